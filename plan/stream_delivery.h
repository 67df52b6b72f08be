// Which of a plan's output streams can be delivered while the run goes on (the runs API's event
// stream, docs/api.md), and why the others are held until the run ends. A property of the plan:
// `safex explain` says it, and the service streams by it (supervisor/output/live_stream.h says
// why validating line by line is exact for the streams this calls live).
//
// A stream is live when none of its validators needs the whole text: no JSON check, and every
// reject/redact pattern line-local (IsLineLocalPattern).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.h"

namespace safex::plan {

struct StreamDelivery {
  bool live = false;
  std::string why_held;  // held: why, one line ("" when live)
};

// How `target` (kStdout or kStderr) of a plan with these validators is delivered.
StreamDelivery StreamDeliveryOf(const std::vector<Validator>& validators, ValidatorTarget target);

// Whether an RE2 pattern provably cannot match '\n' and does not depend on the text's start or
// end. False for anything this conservative reading does not recognise.
bool IsLineLocalPattern(std::string_view pattern);

}  // namespace safex::plan
