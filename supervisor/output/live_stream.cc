#include "supervisor/output/live_stream.h"

#include <algorithm>
#include <string>

namespace safex::output {
namespace {

const char* TargetName(plan::ValidatorTarget t) {
  return t == plan::ValidatorTarget::kStdout ? "stdout" : "stderr";
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

StreamDelivery StreamDeliveryOf(const std::vector<plan::Validator>& validators,
                                plan::ValidatorTarget target) {
  for (const plan::Validator& v : validators) {
    if (v.target != target) continue;
    if (v.json) {
      return {false, std::string("a JSON check decides on the whole of ") + TargetName(target)};
    }
    for (const plan::RegexRule& r : v.regex) {
      if (!IsLineLocalPattern(r.pattern)) {
        return {false, "pattern /" + r.pattern +
                           "/ could match across a line end or depend on where the text starts "
                           "or ends"};
      }
    }
  }
  return {true, ""};
}

LiveStream::LiveStream(const ValidatorSet& validators, plan::ValidatorTarget target)
    : target_(target), delivery_(StreamDeliveryOf(validators.validators(), target)) {
  holding_ = !delivery_.live;
  if (holding_) return;
  for (const plan::Validator& v : validators.validators()) {
    if (v.target != target) continue;
    Stage stage;
    stage.validator = &v;
    auto alone = ValidatorSet::Compile({v});
    if (!alone.ok()) {  // compiled once as part of the whole set; cannot fail alone
      holding_ = true;
      delivery_ = {false, "a validator did not compile on its own: " + alone.status().message()};
      return;
    }
    stage.alone = std::move(alone).value();
    stages_.push_back(std::move(stage));
  }
}

LiveStream::Step LiveStream::Hold(std::string why) {
  holding_ = true;
  Step s;
  s.notice =
      std::string(TargetName(target_)) + ": " + why + "; the rest is held until the run ends";
  return s;
}

LiveStream::Step LiveStream::Feed(std::string_view bytes) {
  if (holding_ || rejected_ || bytes.empty()) return {};
  std::string data(bytes);
  for (Stage& stage : stages_) {
    Step step = FeedStage(stage, data);
    if (step.rejected || !step.notice.empty()) return step;
    data = std::move(step.deliver);
    if (data.empty()) return {};
  }
  sent_ += data;
  return {std::move(data), false, ""};
}

LiveStream::Step LiveStream::FeedStage(Stage& st, std::string_view bytes) {
  const plan::Validator& v = *st.validator;
  st.fed_bytes += bytes.size();
  const bool rejects = v.on_overflow == plan::OverflowAction::kReject;
  // 1. The size cap, on everything this stage was given.
  if (v.max_bytes > 0 && st.fed_bytes > v.max_bytes) {
    if (rejects) {
      rejected_ = true;
      return {"", true, ""};
    }
    return Hold("reached its size cap of " + std::to_string(v.max_bytes) + " bytes");
  }
  // 2. Escape strings may run across lines: from one on, this stream is validated whole.
  if (v.control != plan::ControlChars::kAllow) {
    for (unsigned char c : bytes) {
      if (c == 0x1b || c == 0x90 || c == 0x98 || c == 0x9b || c == 0x9d || c == 0x9e || c == 0x9f) {
        return Hold("an escape sequence or C1 control appeared");
      }
    }
  }
  st.pending.append(bytes);
  const size_t end = st.pending.rfind('\n');
  if (end == std::string::npos) {
    if (st.pending.size() > kMaxLineHold) {
      return Hold("a line is longer than " + std::to_string(kMaxLineHold) + " bytes");
    }
    return {};
  }
  // 3. The line cap: passed when there are more lines than it allows, or anything after the
  //    last allowed one.
  const std::string_view lines(st.pending.data(), end + 1);
  const uint64_t new_lines = static_cast<uint64_t>(std::count(lines.begin(), lines.end(), '\n'));
  if (v.max_lines > 0 &&
      (st.fed_lines + new_lines > v.max_lines ||
       (st.fed_lines + new_lines == v.max_lines && st.pending.size() > end + 1))) {
    if (rejects) {
      rejected_ = true;
      return {"", true, ""};
    }
    return Hold("reached its line cap of " + std::to_string(v.max_lines) + " lines");
  }
  // 4. The complete lines, validated on their own (the header says why that is exact).
  ValidationReport rep = st.alone->ValidateStream(target_, lines, lines.size(), false);
  st.pending.erase(0, end + 1);
  st.fed_lines += new_lines;
  if (rep.rejected) {
    rejected_ = true;
    return {"", true, ""};
  }
  return {std::move(rep.delivered), false, ""};
}

LiveStream::Step LiveStream::Finish(const ValidationReport& final_report) {
  if (final_report.rejected) return {};
  const std::string& all = final_report.delivered;
  if (all.size() < sent_.size() || all.compare(0, sent_.size(), sent_) != 0) {
    Step s;
    s.notice = std::string(TargetName(target_)) +
               ": the text sent while the run went on differs from the whole output's "
               "validated text; the result carries the whole text";
    return s;
  }
  Step s;
  s.deliver = all.substr(sent_.size());
  sent_ = all;
  return s;
}

}  // namespace safex::output
