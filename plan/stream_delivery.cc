#include "plan/stream_delivery.h"

namespace safex::plan {
namespace {

const char* TargetName(ValidatorTarget t) {
  return t == ValidatorTarget::kStdout ? "stdout" : "stderr";
}

// Escapes after which a pattern may match '\n' or a position that depends on the text's ends.
// \n newline, \s \D \W \p \P classes that hold it, \x \0-\7 \Q byte or literal forms this
// reading does not decode, \A \z the text's ends, \C any byte.
bool UnsafeEscape(char c) {
  static constexpr std::string_view kUnsafe = "nsDWpPxQAzC01234567";
  return kUnsafe.find(c) != std::string_view::npos;
}

// Skips a bracket class starting at pattern[i] == '['; false when it could hold '\n': a negated
// class, a named class ([:space:]...), an unsafe escape, or a literal newline. `i` ends on ']'.
bool SafeClass(std::string_view p, size_t& i) {
  ++i;
  if (i < p.size() && p[i] == '^') return false;
  if (i < p.size() && p[i] == ']') ++i;  // a leading ']' is literal
  for (; i < p.size(); ++i) {
    const char c = p[i];
    if (c == ']') return true;
    if (c == '\n') return false;
    if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') return false;
    if (c == '\\') {
      if (i + 1 >= p.size() || UnsafeEscape(p[i + 1])) return false;
      ++i;
    }
    // A range between two literal characters can include '\n' only if its low end is below it;
    // literal control characters are not written in patterns this accepts.
    if (static_cast<unsigned char>(c) < 0x20) return false;
  }
  return false;  // unterminated (RE2 rejects it anyway)
}

// A group's flags "(?flags)" or "(?flags:" starting at p[i] == '(' with p[i+1] == '?': false
// when they turn on 's' (dot matches newline). `i` stays on '('.
bool SafeFlags(std::string_view p, size_t i) {
  for (size_t j = i + 2; j < p.size(); ++j) {
    const char c = p[j];
    if (c == ':' || c == ')' || c == 'P' || c == '<') return true;  // flags ended, or a name
    if (c == 's') return false;
  }
  return true;
}

}  // namespace

bool IsLineLocalPattern(std::string_view p) {
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    switch (c) {
      case '\\':
        if (i + 1 >= p.size() || UnsafeEscape(p[i + 1])) return false;
        ++i;
        break;
      case '[':
        if (!SafeClass(p, i)) return false;
        break;
      case '(':
        if (i + 1 < p.size() && p[i + 1] == '?' && !SafeFlags(p, i)) return false;
        break;
      case '^':
      case '$':
      case '\n':
        return false;
      default:
        break;
    }
  }
  return true;
}

StreamDelivery StreamDeliveryOf(const std::vector<Validator>& validators, ValidatorTarget target) {
  for (const Validator& v : validators) {
    if (v.target != target) continue;
    if (v.json) {
      return {false, std::string("a JSON check decides on the whole of ") + TargetName(target)};
    }
    for (const RegexRule& r : v.regex) {
      if (!IsLineLocalPattern(r.pattern)) {
        return {false, "pattern /" + r.pattern +
                           "/ could match across a line end or depend on where the text starts "
                           "or ends"};
      }
    }
  }
  return {true, ""};
}

}  // namespace safex::plan
