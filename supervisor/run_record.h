// The durable per-run state record: proof of which process owns a started run, so that crash
// recovery closes only runs whose owner is gone.
//
// Before a run's start event is written, its owner (a `safex run` process or the daemon) creates
// <records_dir>/<run-id>.run, a small JSON file, and holds an flock on it for the whole run; it
// unlinks the file after the end event has committed. The file is created unnamed (O_TMPFILE),
// locked, written and then linked into place, so a record under its final name is always
// complete and locked from its first instant, and no sweep can take it while it is made. It is
// not synced to disk: it only has to outlive its owner process (a machine crash ends every
// owner, and the next boot's first sweep closes the runs it left without a record: sweep.h,
// CloseRunsFromEarlierBoots). A record
// whose lock can be taken belongs to a process that died: its run (if the audit log shows it
// started and never ended) is closed as interrupted, and the things it names (an input directory
// the daemon made for it) are removed.
//
// The records live beside the audit log they refer to (<dir of audit db>/runs), so that every
// writer of one log, CLI or daemon, shares one records directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::supervisor {

struct RunRecordInfo {
  std::string run_id;
  int64_t pid = 0;         // the owner, for people reading the file (the lock is the proof)
  std::string audit_db;    // the log the run's events go to
  std::string state_root;  // where the driver keeps the run's sandbox state
  std::string input_dir;   // a directory made for this run alone, removed by recovery ("": none)
  int64_t start_ns = 0;
};

// "<dir of audit_db>/runs", or "" for an in-memory log.
std::string RecordsDirFor(const std::string& audit_db);

// A record held by this process. Move-only; the destructor removes it (errors ignored).
class RunRecord {
 public:
  RunRecord() = default;
  RunRecord(RunRecord&& o) noexcept;
  RunRecord& operator=(RunRecord&&) noexcept;
  ~RunRecord();

  // Creates <dir>/<run_id>.run (and `dir`, mode 0700, when missing) and locks it durably.
  static Result<RunRecord> Create(const std::string& dir, const RunRecordInfo& info);

  // Unlinks the record, then releases the lock. Idempotent.
  Status Remove();
  // Releases the lock and keeps the file: the run is left for crash recovery to close (its end
  // event could not be written).
  void Abandon();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd lock_;
};

// A record whose owner is gone, locked by the caller while it is being handled.
struct StaleRecord {
  RunRecordInfo info;  // as read from the file (run_id from the file name when unreadable)
  std::string path;
  UniqueFd lock;
  bool readable = true;  // false: the content could not be parsed (info.run_id still set)
};

// Every record in `dir` whose lock could be taken now. Records still locked (live runs) are left
// alone. A missing `dir` is no records.
Result<std::vector<StaleRecord>> TakeStaleRecords(const std::string& dir);

// Unlinks a stale record (keeps nothing else).
Status RemoveStaleRecord(StaleRecord& record);

// Parses the JSON content of a record (exposed for tests).
Result<RunRecordInfo> ParseRunRecord(const std::string& text);

}  // namespace safex::supervisor
