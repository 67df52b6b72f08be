// The runs the service holds for the runs API (docs/api.md): every admitted run, from admission
// until results_ttl after it ended, with its state, its events (what GET /v1/runs/ID/events
// streams) and, once finished, its result and the output files kept for it.
//
// Memory is bounded: a run's events are its validated output (at most the plan's output cap,
// which the capture enforces) plus a few state events and its result; at most max_runs entries
// are held (the oldest finished go first); output files are on disk, results_max_bytes across all
// runs (the oldest finished runs' files go first, and those runs' file requests answer 410).
//
// Threads: the table and each entry have their own mutex. Workers append events and finish
// runs; the event loop reads. `on_change` (the loop's wake-up) is called after every change an
// event follower may be waiting for, outside the locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "supervisor/serve/access.h"
#include "supervisor/serve/result_files.h"

namespace safex::serve {

enum class RunState { kQueued, kRunning, kFinished };
const char* RunStateName(RunState s);

struct RunEntry {
  RunEntry(std::string id, Caller owner_caller, std::string policy_name, int64_t admitted)
      : run_id(std::move(id)),
        owner(std::move(owner_caller)),
        policy(std::move(policy_name)),
        admitted_ns(admitted) {}

  const std::string run_id;
  const Caller owner;
  const std::string policy;
  const int64_t admitted_ns;
  std::string idempotency_key;  // set before the entry is shared
  std::string request_digest;   // SHA-256 of the request body, for idempotent retries

  // Read by the runner (RunSpec::cancel): supervisor::kCancelRequested, kCancelForOutput, or the
  // signal the service got while draining.
  std::atomic<int> cancel{0};

  mutable std::mutex mu;
  // Guarded by mu.
  RunState state = RunState::kQueued;
  int64_t started_ns = 0;
  int64_t ended_ns = 0;
  std::string cancelled_by;         // "uid 1000 (pid 42)", "the client went away"; "" if not
  std::vector<std::string> events;  // NDJSON lines, each ending in '\n'; seq = index
  uint64_t event_bytes = 0;
  std::string result_json;  // the result object, once finished
  int result_status = 0;    // the HTTP status a waiting client gets with it
  std::string files_dir;    // "" when the run kept no files
  ResultFileList files;
  bool files_removed = false;  // expired or evicted: file requests answer 410
};

struct RetentionLimits {
  int64_t ttl_ns = 600'000'000'000;
  size_t max_runs = 1000;
  uint64_t max_file_bytes = 256ull << 20;
};

class RunTable {
 public:
  RunTable(RetentionLimits limits, std::function<void()> on_change);

  // Adds a new run; with a key, unless the caller already has a run held under that key, which
  // is returned instead (`*existing` true).
  std::shared_ptr<RunEntry> Admit(std::shared_ptr<RunEntry> entry, bool* existing);
  // Takes back an entry that Admit added but that was then refused before it was queued.
  void Forget(const std::string& run_id);
  std::shared_ptr<RunEntry> Find(const std::string& run_id) const;
  // Every entry, newest admission first.
  std::vector<std::shared_ptr<RunEntry>> All() const;

  // Appends one event ({"seq": N, "type": ..., fields}) to the run and wakes followers.
  void Event(RunEntry& e, nlohmann::json event);
  void SetState(RunEntry& e, RunState state, int64_t now_ns);
  // The run has ended: its result object and the files kept for it (ListResultFiles of
  // `files_dir`), and the `result` event, all under the entry's lock (a reader that sees the run
  // finished sees its result as the last event).
  void Finish(RunEntry& e, int http_status, nlohmann::json result, std::string files_dir,
              ResultFileList files, int64_t now_ns);

  // Drops runs that ended more than ttl ago and the oldest finished ones beyond max_runs, and
  // marks the files of the oldest finished runs removed while over max_file_bytes. Returns the
  // file directories to delete (the caller does it, outside the lock).
  std::vector<std::string> Expire(int64_t now_ns);

  const RetentionLimits& limits() const { return limits_; }

 private:
  static void AppendEvent(RunEntry& e, const nlohmann::json& event);  // e.mu held

  RetentionLimits limits_;
  std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<RunEntry>> runs_;         // guarded by mu_
  std::map<std::pair<uint32_t, std::string>, std::string> keys_;  // (uid, key) -> run id
};

// The JSON of GET /v1/runs/ID for a held run (docs/api.md).
nlohmann::json RunStateJson(const RunEntry& e, std::optional<size_t> queue_position);

}  // namespace safex::serve
