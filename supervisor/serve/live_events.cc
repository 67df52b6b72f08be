#include "supervisor/serve/live_events.h"

#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "supervisor/serve/base64.h"

namespace safex::serve {

using nlohmann::json;

LiveEvents::LiveEvents(RunTable& table, RunEntry& entry, const plan::Plan& plan)
    : table_(table), entry_(entry) {
  streams_[0] =
      std::make_unique<output::LiveStream>(plan.validators, plan::ValidatorTarget::kStdout);
  streams_[1] =
      std::make_unique<output::LiveStream>(plan.validators, plan::ValidatorTarget::kStderr);
}

void LiveEvents::Start() {
  std::lock_guard<std::mutex> l(mu_);
  for (int which = 0; which < 2; ++which) {
    if (!streams_[which] || streams_[which]->live()) continue;
    table_.Event(entry_,
                 {{"type", "notice"},
                  {"stream", which == 0 ? "stdout" : "stderr"},
                  {"message", "held until the run ends: " + streams_[which]->delivery().why_held}});
  }
}

void LiveEvents::Send(int which, const output::LiveStream::Step& step) {
  const char* name = which == 0 ? "stdout" : "stderr";
  if (!step.deliver.empty()) {
    json e = {{"type", name}};
    if (IsValidUtf8(step.deliver)) {
      e["data"] = step.deliver;
    } else {
      e["data_base64"] = Base64Encode(step.deliver);
    }
    table_.Event(entry_, std::move(e));
  }
  if (!step.notice.empty()) {
    table_.Event(entry_, {{"type", "notice"}, {"stream", name}, {"message", step.notice}});
  }
}

void LiveEvents::OnOutput(int which, std::string_view bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (which < 0 || which > 1 || !streams_[which]) return;
  output::LiveStream::Step step = streams_[which]->Feed(bytes);
  Send(which, step);
  if (step.rejected) {
    int expected = 0;
    entry_.cancel.compare_exchange_strong(expected, supervisor::kCancelForOutput);
  }
}

void LiveEvents::Finish(const supervisor::RunReport& report) {
  std::lock_guard<std::mutex> l(mu_);
  const std::optional<output::ValidationReport>* finals[2] = {&report.stdout_report,
                                                              &report.stderr_report};
  for (int which = 0; which < 2; ++which) {
    if (!streams_[which] || !finals[which]->has_value()) continue;
    Send(which, streams_[which]->Finish(**finals[which]));
  }
  for (const std::string& limit : report.limits_fired) {
    table_.Event(entry_, {{"type", "limit"}, {"limit", limit}});
  }
}

}  // namespace safex::serve
