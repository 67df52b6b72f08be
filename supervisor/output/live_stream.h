// Validated output while a run goes on (the runs API's event stream, docs/api.md).
//
// Nothing unvalidated may leave the service, so a stream is delivered live only when its
// validators decide line by line, and then only complete lines that passed them are sent. Which
// streams qualify is a property of the plan (plan/stream_delivery.h; `safex explain` shows it):
//   - no JSON check (it decides on the whole text);
//   - every reject/redact pattern is line-local: it cannot match a newline and does not depend on
//     where the text starts or ends (IsLineLocalPattern; conservative: anything it cannot prove
//     is held).
// For such a stream, validating each new run of complete lines on its own gives exactly the
// bytes that validating the whole output gives for them (UTF-8 sequences, CR-LF, CSI sequences
// and bidi controls never span a newline; matches cannot either), as long as no size or line cap
// is reached and no escape string (OSC, DCS, ... may run across lines) appears. Each validator of
// the stream is one stage, in plan order, fed what the stage before it delivered (complete lines
// in, complete lines out: nothing line-local removes a newline), with its caps counted on its own
// input, as the whole-output validation applies them. A stage checks those conditions as it
// goes: a cap with action `reject` that is passed rejects (the run is then stopped); a `truncate`
// cap that is reached, an escape or C1 control, or a line longer than kMaxLineHold hold the rest
// of the stream until the end. After the run, Finish sends what the whole-output
// validation delivers beyond what was sent (that validation stays the authority: the result
// always carries the whole validated text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"
#include "plan/stream_delivery.h"
#include "supervisor/output/stream_validator.h"

namespace safex::output {

// A partial last line longer than this holds the stream until the end.
inline constexpr size_t kMaxLineHold = 64 * 1024;

class LiveStream {
 public:
  // `validators` (the plan's, all targets) must outlive this object; each one of `target` is
  // compiled here on its own, once (the stages are fed separately).
  LiveStream(const std::vector<plan::Validator>& validators, plan::ValidatorTarget target);

  struct Step {
    std::string deliver;    // validated bytes to send now (may be empty)
    bool rejected = false;  // the output is rejected: stop the run (it ends validator-rejected)
    std::string notice;     // e.g. why the rest is held from now on ("" usually)
  };
  // The next bytes the program wrote to this stream (as captured, in order).
  Step Feed(std::string_view bytes);

  // After the run, with the whole output's validation: what is left to send. When that text does
  // not start with what was sent (it must; a bug otherwise), nothing is sent and `notice` says so.
  Step Finish(const ValidationReport& final_report);

  bool live() const { return delivery_.live; }
  const plan::StreamDelivery& delivery() const { return delivery_; }
  uint64_t sent_bytes() const { return sent_.size(); }

 private:
  // One validator of the stream (or none: the stream has no validator), fed line by line.
  struct Stage {
    const plan::Validator* validator = nullptr;
    std::optional<ValidatorSet> alone;  // that validator compiled on its own
    std::string pending;                // bytes after the last complete line
    uint64_t fed_bytes = 0;             // everything fed so far
    uint64_t fed_lines = 0;             // newlines in what was validated
  };
  Step Hold(std::string why);
  Step FeedStage(Stage& stage, std::string_view bytes);

  plan::ValidatorTarget target_;
  plan::StreamDelivery delivery_;
  std::vector<Stage> stages_;
  bool holding_ = false;  // from now on, nothing more is sent before Finish
  bool rejected_ = false;
  std::string sent_;  // what was delivered so far
};

}  // namespace safex::output
