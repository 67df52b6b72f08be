// A run's output as events for GET /v1/runs/ID/events (docs/api.md): the program's stdout and
// stderr pass through a LiveStream each (supervisor/output/live_stream.h), which lets out only
// validated complete lines, and what comes out becomes `stdout` / `stderr` events of the run in
// the RunTable. A stream that is held says so in a `notice` event at the start; after the run,
// Finish sends what the whole-output validation delivers beyond what was streamed, and `limit`
// events for the limits that fired. A rejection while streaming cancels the run
// (supervisor::kCancelForOutput): it ends validator-rejected at once instead of at its end.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>

#include "plan/plan.h"
#include "supervisor/output/live_stream.h"
#include "supervisor/runner.h"
#include "supervisor/serve/run_table.h"

namespace safex::serve {

class LiveEvents {
 public:
  // `plan` must outlive this object (the streams keep pointers to its validators).
  LiveEvents(RunTable& table, RunEntry& entry, const plan::Plan& plan);

  // Before the run: a notice for each held stream.
  void Start();
  // The driver's OutputObserver (drivers/driver.h); any thread, serialised here.
  void OnOutput(int which, std::string_view bytes);
  // After the run: the rest of each stream, then the limits that fired.
  void Finish(const supervisor::RunReport& report);

 private:
  void Send(int which, const output::LiveStream::Step& step);

  RunTable& table_;
  RunEntry& entry_;
  std::mutex mu_;
  std::unique_ptr<output::LiveStream> streams_[2];
};

}  // namespace safex::serve
