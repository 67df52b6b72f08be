#include "supervisor/output/live_stream.h"

#include <algorithm>
#include <string>

namespace safex::output {
namespace {

const char* TargetName(plan::ValidatorTarget t) {
  return t == plan::ValidatorTarget::kStdout ? "stdout" : "stderr";
}

}  // namespace

LiveStream::LiveStream(const std::vector<plan::Validator>& validators, plan::ValidatorTarget target)
    : target_(target), delivery_(plan::StreamDeliveryOf(validators, target)) {
  holding_ = !delivery_.live;
  if (holding_) return;
  for (const plan::Validator& v : validators) {
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
