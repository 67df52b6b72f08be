#include "supervisor/serve/run_table.h"

#include <algorithm>

#include "audit/time_format.h"

namespace safex::serve {

using nlohmann::json;

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kQueued:
      return "queued";
    case RunState::kRunning:
      return "running";
    case RunState::kFinished:
      return "finished";
  }
  return "?";
}

RunTable::RunTable(RetentionLimits limits, std::function<void()> on_change)
    : limits_(limits), on_change_(std::move(on_change)) {}

std::shared_ptr<RunEntry> RunTable::Admit(std::shared_ptr<RunEntry> entry, bool* existing) {
  *existing = false;
  std::lock_guard<std::mutex> l(mu_);
  if (!entry->idempotency_key.empty()) {
    auto k = keys_.find({entry->owner.uid, entry->idempotency_key});
    if (k != keys_.end()) {
      auto it = runs_.find(k->second);
      if (it != runs_.end()) {
        *existing = true;
        return it->second;
      }
    }
    keys_[{entry->owner.uid, entry->idempotency_key}] = entry->run_id;
  }
  runs_.emplace(entry->run_id, entry);
  return entry;
}

void RunTable::Forget(const std::string& run_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  if (!it->second->idempotency_key.empty()) {
    keys_.erase({it->second->owner.uid, it->second->idempotency_key});
  }
  runs_.erase(it);
}

std::shared_ptr<RunEntry> RunTable::Find(const std::string& run_id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = runs_.find(run_id);
  return it == runs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<RunEntry>> RunTable::All() const {
  std::vector<std::shared_ptr<RunEntry>> out;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, e] : runs_) out.push_back(e);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->admitted_ns > b->admitted_ns; });
  return out;
}

// e.mu is held.
void RunTable::AppendEvent(RunEntry& e, const json& event) {
  json line = {{"seq", e.events.size()}};
  line.update(event);
  std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  e.event_bytes += text.size();
  e.events.push_back(std::move(text));
}

void RunTable::Event(RunEntry& e, json event) {
  {
    std::lock_guard<std::mutex> l(e.mu);
    AppendEvent(e, event);
  }
  on_change_();
}

void RunTable::SetState(RunEntry& e, RunState state, int64_t now_ns) {
  {
    std::lock_guard<std::mutex> l(e.mu);
    e.state = state;
    if (state == RunState::kRunning) e.started_ns = now_ns;
  }
  Event(e, {{"type", "state"}, {"state", RunStateName(state)}});
}

void RunTable::Finish(RunEntry& e, int http_status, json result, std::string files_dir,
                      ResultFileList files, int64_t now_ns) {
  {
    std::lock_guard<std::mutex> l(e.mu);
    e.result_status = http_status;
    e.state = RunState::kFinished;
    e.ended_ns = now_ns;
    e.result_json = result.dump(-1, ' ', false, json::error_handler_t::replace);
    e.files_dir = std::move(files_dir);
    e.files = std::move(files);
    // In the same critical section as the state: a stream pumped between the two would see a
    // finished run with no result to send, and end without it (the client: outcome unknown).
    AppendEvent(e, {{"type", "result"}, {"result", std::move(result)}});
  }
  on_change_();
}

std::vector<std::string> RunTable::Expire(int64_t now_ns) {
  std::vector<std::string> remove;
  std::lock_guard<std::mutex> l(mu_);
  // Finished runs, oldest end first.
  std::vector<std::shared_ptr<RunEntry>> finished;
  for (const auto& [id, e] : runs_) {
    std::lock_guard<std::mutex> el(e->mu);
    if (e->state == RunState::kFinished) finished.push_back(e);
  }
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) {
    return a->ended_ns < b->ended_ns;  // stable enough: ended_ns is written once, under mu
  });
  uint64_t file_bytes = 0;
  for (const auto& e : finished) {
    std::lock_guard<std::mutex> el(e->mu);
    if (!e->files_removed) file_bytes += e->files.total_bytes;
  }
  size_t over = runs_.size() > limits_.max_runs ? runs_.size() - limits_.max_runs : 0;
  for (const auto& e : finished) {
    std::lock_guard<std::mutex> el(e->mu);
    const bool expired = now_ns - e->ended_ns > limits_.ttl_ns;
    const bool drop = expired || over > 0;
    if ((drop || file_bytes > limits_.max_file_bytes) && !e->files_removed) {
      if (!e->files_dir.empty()) remove.push_back(e->files_dir);
      e->files_removed = true;
      file_bytes -= e->files.total_bytes;
    }
    if (drop) {
      if (over > 0) --over;
      if (!e->idempotency_key.empty()) keys_.erase({e->owner.uid, e->idempotency_key});
      runs_.erase(e->run_id);
    }
  }
  return remove;
}

json RunStateJson(const RunEntry& e, std::optional<size_t> queue_position) {
  std::lock_guard<std::mutex> l(e.mu);
  auto time_or_null = [](int64_t ns) {
    return ns == 0 ? json(nullptr) : json(audit::FormatIso8601(ns));
  };
  json j = {
      {"run_id", e.run_id},
      {"state", RunStateName(e.state)},
      {"policy", e.policy},
      {"uid", e.owner.uid},
      {"admitted_at", audit::FormatIso8601(e.admitted_ns)},
      {"started_at", time_or_null(e.started_ns)},
      {"ended_at", time_or_null(e.ended_ns)},
      {"cancel_requested", !e.cancelled_by.empty()},
      {"result", e.result_json.empty() ? json(nullptr) : json::parse(e.result_json)},
  };
  if (queue_position) j["queue_position"] = *queue_position;
  return j;
}

}  // namespace safex::serve
