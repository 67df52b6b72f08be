// Helpers shared by the audit tests: temp dirs, sample records, a child-process runner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/event_row.h"

namespace safex::audit::testing {

// A fresh directory under /var/tmp (a real disk, not tmpfs), removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

RunStart SampleStart(const std::string& run_id, const std::string& policy = "python-untrusted");
RunEnd SampleEnd(const std::string& run_id, Verdict verdict = Verdict::kOk);

// Options for a test log: its key lives next to it.
AuditOptions TestOptions(const TempDir& dir);

// Appends `runs` start+end pairs (run ids PREFIX-0, PREFIX-1, ...) to the log at `path` in one
// transaction of a plain SQLite connection, with a valid chain: a fast way to make a big log
// (AuditLog commits every event durably). The log must exist.
void BulkAppend(const std::string& path, int runs, const std::string& prefix = "bulk");

// Copies a database file (after a TRUNCATE checkpoint of its WAL, so the copy is complete).
void CopyDb(const std::string& from, const std::string& to);

// Runs `sql` on `path` with a plain SQLite connection (no safex code in between); returns
// SQLite's error message, or "" on success.
std::string RawSql(const std::string& path, const std::string& sql);
// The single value a query returns, as text ("" for none/NULL).
std::string RawQuery(const std::string& path, const std::string& sql);

struct ProcResult {
  int exit_code = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};
// fork + execv of argv[0] with stdout/stderr captured.
ProcResult RunProcess(const std::vector<std::string>& argv);

// The audit_test_writer helper binary (built beside the tests).
std::string WriterBinary();

// Random strings over a small hostile alphabet (NUL-free), for property tests.
std::string RandomBytes(std::mt19937_64& rng, size_t max_len);
EventRow RandomRow(std::mt19937_64& rng);

}  // namespace safex::audit::testing
