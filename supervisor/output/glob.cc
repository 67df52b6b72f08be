#include "supervisor/output/glob.h"

namespace safex::output {

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    const size_t j = path.find('/', i);
    const size_t end = j == std::string_view::npos ? path.size() : j;
    if (end > i) out.push_back(path.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

PathGlob::PathGlob(std::string_view pattern) : pattern_(pattern) {
  for (std::string_view part : SplitPath(pattern)) {
    components_.push_back(ParseComponent(part, &literal_));
  }
}

PathGlob::Component PathGlob::ParseComponent(std::string_view text, bool* literal) {
  Component comp;
  if (text == "**") {
    comp.globstar = true;
    *literal = false;
    return comp;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    Token t{};
    if (ch == '\\' && i + 1 < text.size()) {
      t.kind = Token::kChar;
      t.c = static_cast<unsigned char>(text[++i]);
    } else if (ch == '*') {
      *literal = false;
      if (!comp.tokens.empty() && comp.tokens.back().kind == Token::kStar) continue;
      t.kind = Token::kStar;
    } else if (ch == '?') {
      *literal = false;
      t.kind = Token::kAny;
    } else if (ch == '[') {
      // Find the closing ']' (a ']' right after '[' or '[!' is a member); none: a literal '['.
      size_t j = i + 1;
      bool negated = false;
      if (j < text.size() && (text[j] == '!' || text[j] == '^')) {
        negated = true;
        ++j;
      }
      const size_t first = j;
      if (j < text.size() && text[j] == ']') ++j;
      while (j < text.size() && text[j] != ']') ++j;
      if (j >= text.size()) {
        t.kind = Token::kChar;
        t.c = ch;
      } else {
        *literal = false;
        t.kind = Token::kClass;
        t.negated = negated;
        for (size_t k = first; k < j; ++k) {
          const auto lo = static_cast<unsigned char>(text[k]);
          if (k + 2 < j && text[k + 1] == '-') {
            t.ranges.emplace_back(lo, static_cast<unsigned char>(text[k + 2]));
            k += 2;
          } else {
            t.ranges.emplace_back(lo, lo);
          }
        }
        i = j;
      }
    } else {
      t.kind = Token::kChar;
      t.c = ch;
    }
    comp.tokens.push_back(std::move(t));
  }
  return comp;
}

// Classic wildcard matching: on a mismatch, retry from the last '*' one character further.
// O(len(name) * len(tokens)) at worst.
bool PathGlob::MatchComponent(const Component& comp, std::string_view name) {
  const auto& toks = comp.tokens;
  size_t ti = 0;
  size_t ni = 0;
  size_t star_ti = std::string_view::npos;
  size_t star_ni = 0;
  auto one = [&](const Token& t, unsigned char c) {
    switch (t.kind) {
      case Token::kChar:
        return t.c == c;
      case Token::kAny:
        return true;
      case Token::kClass: {
        bool in = false;
        for (const auto& [lo, hi] : t.ranges) in = in || (c >= lo && c <= hi);
        return in != t.negated;
      }
      case Token::kStar:
        return false;
    }
    return false;
  };
  while (ni < name.size()) {
    if (ti < toks.size() && toks[ti].kind == Token::kStar) {
      star_ti = ti++;
      star_ni = ni;
    } else if (ti < toks.size() && one(toks[ti], static_cast<unsigned char>(name[ni]))) {
      ++ti;
      ++ni;
    } else if (star_ti != std::string_view::npos) {
      ti = star_ti + 1;
      ni = ++star_ni;
    } else {
      return false;
    }
  }
  while (ti < toks.size() && toks[ti].kind == Token::kStar) ++ti;
  return ti == toks.size();
}

void PathGlob::Close(std::vector<bool>* states) const {
  for (size_t i = 0; i < components_.size(); ++i) {
    if ((*states)[i] && components_[i].globstar) (*states)[i + 1] = true;
  }
}

std::vector<bool> PathGlob::Advance(std::string_view path) const {
  std::vector<bool> states(components_.size() + 1, false);
  states[0] = true;
  Close(&states);
  for (std::string_view name : SplitPath(path)) {
    std::vector<bool> next(states.size(), false);
    bool any = false;
    for (size_t i = 0; i < components_.size(); ++i) {
      if (!states[i]) continue;
      if (components_[i].globstar) {
        next[i] = any = true;
      } else if (MatchComponent(components_[i], name)) {
        next[i + 1] = any = true;
      }
    }
    states.swap(next);
    Close(&states);
    if (!any) break;
  }
  return states;
}

bool PathGlob::Matches(std::string_view path) const {
  if (components_.empty()) return false;
  return Advance(path).back();
}

bool PathGlob::CouldMatchBeneath(std::string_view dir) const {
  const std::vector<bool> states = Advance(dir);
  for (size_t i = 0; i < components_.size(); ++i) {
    if (states[i]) return true;
  }
  return false;
}

}  // namespace safex::output
