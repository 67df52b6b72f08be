#include "supervisor/sweep.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "common/fs_tree.h"
#include "common/proc_stat.h"
#include "common/small_file.h"
#include "drivers/net/run_network.h"
#include "supervisor/run_record.h"
#include "supervisor/runner.h"

namespace safex::supervisor {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsAbsoluteClean(const std::string& p) {
  return !p.empty() && p[0] == '/' && p.find("/../") == std::string::npos && !p.ends_with("/..") &&
         p.find('\0') == std::string::npos;
}

// Removes `path` if it exists. Only paths built here from a state root and a run id are given.
Status RemoveIfPresent(const std::string& path, int* removed) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(RemoveTree(path));
  if (removed != nullptr) ++*removed;
  return Status::Ok();
}

// The machine's boot time (unix ns, /proc/stat btime); 0 when it cannot be read.
int64_t BootTimeNs() { return BootTimeSeconds().value_or(0) * 1'000'000'000; }

}  // namespace

// The records are not synced to disk (run_record.h): after a machine crash a run may be started
// in the log with no record. Every process of that boot is gone, so such a run is closed here:
// once per boot (the boot id is kept beside the records, per log), an unfinished run that
// started before this boot and has no record is interrupted. One with a record is the usual
// path's. Cheap on every other call: two small reads.
Status CloseRunsFromEarlierBoots(const SweepOptions& options, audit::AuditLog& log,
                                 SweepReport* report) {
  const std::string boot_id = ReadSmallFile("/proc/sys/kernel/random/boot_id").value_or("");
  const std::string marker = options.records_dir + "/.boot-swept-" + Basename(options.audit_db);
  if (boot_id.empty() || ReadSmallFile(marker).value_or("") == boot_id) return Status::Ok();
  const int64_t boot_ns = BootTimeNs();
  if (boot_ns <= 0) return Status::Ok();
  SAFEX_ASSIGN_OR_RETURN(auto runs, log.UnfinishedRunStarts());
  for (const auto& [run_id, start_ns] : runs) {
    struct stat st {};
    if (start_ns >= boot_ns) continue;  // this boot's: its owner may be alive
    if (lstat((options.records_dir + "/" + run_id + ".run").c_str(), &st) == 0) continue;
    audit::Interrupted ev;
    ev.run_id = run_id;
    ev.reason = "the machine restarted while this run went on (it started before the last boot)";
    Status recorded = log.RecordInterrupted(ev);
    // Another sweep may have closed it a moment ago.
    if (!recorded.ok() && recorded.code() != Status::Code::kFailedPrecondition) return recorded;
    if (recorded.ok()) report->interrupted.push_back(run_id);
  }
  // Not synced either: a lost marker only means this check runs again.
  if (mkdir(options.records_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Errno("mkdir", options.records_dir, errno);
  }
  std::ofstream(marker, std::ios::trunc) << boot_id;
  return Status::Ok();
}

Status SweepDeadRuns(const SweepOptions& options, audit::AuditLog& log, SweepReport* report) {
  if (options.records_dir.empty()) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(CloseRunsFromEarlierBoots(options, log, report).With("sweep"));
  SAFEX_ASSIGN_OR_RETURN(std::vector<StaleRecord> stale, TakeStaleRecords(options.records_dir));
  if (stale.empty()) return Status::Ok();

  std::string errors;
  auto note = [&errors](const std::string& what, const Status& st) {
    if (st.ok()) return;
    errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };
  std::set<std::string> unfinished;
  {
    auto runs = log.UnfinishedRuns();
    if (!runs.ok()) return runs.status().With("sweep: reading unfinished runs");
    unfinished.insert(runs->begin(), runs->end());
  }
  // The backends once per state root the records name (a record of the daemon and one of a CLI
  // with --state-root name different roots); nothing is probed unless a record needs it.
  std::map<std::string, std::unique_ptr<drivers::Backends>> backends;
  auto backends_for = [&](const std::string& root) -> drivers::Backends& {
    auto& b = backends[root];
    if (!b) {
      drivers::BackendsConfig config = options.backends;
      config.state_root = root;
      b = drivers::Backends::Create(config);
    }
    return *b;
  };

  const std::string our_db = Basename(options.audit_db);
  bool networks_swept = false;
  for (StaleRecord& r : stale) {
    const RunRecordInfo& info = r.info;
    if (r.readable && !info.audit_db.empty() && Basename(info.audit_db) != our_db) {
      continue;  // another log in the same directory: its own writers sweep it
    }
    const size_t errors_before = errors.size();
    // 1. The sandbox, by run id, under the root the record names (or the configured one).
    {
      const std::string root = r.readable && IsAbsoluteClean(info.state_root)
                                   ? info.state_root
                                   : options.backends.state_root;
      drivers::Backends::Cleanup cleanup;
      note("sandbox of " + info.run_id, backends_for(root).CleanupStaleRun(info.run_id, &cleanup));
      for (const auto& [name, n] : cleanup.removed) report->sandboxes_removed[name] += n;
      for (std::string& w : cleanup.warnings) report->warnings.push_back(std::move(w));
    }
    // 2. Networks of dead owners (their address slots are unlocked).
    if (!networks_swept) {
      networks_swept = true;
      if (Status v = drivers::net::ValidateNetworkConfig(options.network); v.ok()) {
        int cleaned = 0;
        note("networks", drivers::net::CleanupStale(options.network, &cleaned));
        report->networks_removed += cleaned;
      } else {
        report->warnings.push_back("run networks not checked: " + v.message());
      }
    }
    // 3. What was staged for it.
    if (r.readable && IsAbsoluteClean(info.state_root)) {
      note("input snapshot", RemoveIfPresent(StagedInputPath(info.state_root, info.run_id),
                                             &report->input_dirs_removed));
      // Where versions before the private directory staged it.
      note("input snapshot",
           RemoveIfPresent(info.state_root + "/input-" + info.run_id, &report->input_dirs_removed));
    }
    if (!options.request_inputs_dir.empty()) {
      note("request input", RemoveIfPresent(options.request_inputs_dir + "/" + info.run_id,
                                            &report->input_dirs_removed));
    }
    if (errors.size() != errors_before) continue;  // the record stays: the next sweep retries
    // 4. The audit trail: a started run that never ended is closed as interrupted.
    if (unfinished.count(info.run_id) > 0) {
      audit::Interrupted ev;
      ev.run_id = info.run_id;
      ev.reason =
          "the process that owned this run" +
          (r.readable && info.pid > 0 ? " (pid " + std::to_string(info.pid) + ")" : std::string()) +
          " ended before the run did; its sandbox was removed afterwards";
      Status st = log.RecordInterrupted(ev);
      if (!st.ok()) {
        note("interrupted event for " + info.run_id, st);
        continue;
      }
      report->interrupted.push_back(info.run_id);
    }
    // 5. The record.
    note("run record", RemoveStaleRecord(r));
    ++report->records_removed;
  }
  if (!errors.empty()) return Status::Internal("sweep of dead runs: " + errors);
  return Status::Ok();
}

}  // namespace safex::supervisor
