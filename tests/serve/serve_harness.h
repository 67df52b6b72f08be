// A real `safex serve` for tests: a temp directory with policies, a host config with a service
// section, a socket, a state dir and an audit log; the daemon is the built binary, started as a
// child process. Requests go over the socket (raw HTTP or `safex submit`).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/subprocess.h"
#include "supervisor/serve/client.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"

namespace safex::testing {

struct ServeOptions {
  uint32_t max_concurrent = 4;
  uint32_t max_queue = 16;
  std::string request_timeout = "2s";
  std::string drain_timeout = "20s";
  std::string max_request = "1MiB";
  // Extra `allow` rules and settings inside service { }.
  std::string extra;
  // The audit log's path ("": <dir>/audit.db).
  std::string audit_db;
};

class ServeHarness {
 public:
  ServeHarness();
  ~ServeHarness();  // SIGKILL the daemon if still running (tests stop it properly)

  // Writes the config (first call) and starts the daemon; waits until /v1/health answers.
  // Returns "" or what went wrong (with the daemon's log).
  std::string Start(const ServeOptions& options = {});
  // Sends `sig` and waits for the daemon to exit; returns its exit status (ShellCode).
  int Stop(int sig = 15, std::chrono::seconds deadline = std::chrono::seconds(90));
  void Kill();  // SIGKILL, reaped
  bool running();
  pid_t pid() const;

  Result<serve::HttpResponse> Call(const std::string& method, const std::string& target,
                                   const std::string& body = "");
  // `safex submit --socket S --policy POLICY [extra] -- argv`.
  ProcessOutput Submit(const std::string& policy, const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra = {});
  // Sends raw bytes on a fresh connection and reads the answer until the daemon closes it.
  std::string Raw(const std::string& bytes, bool half_close = true);

  std::unique_ptr<audit::AuditLog> OpenAudit();
  std::vector<audit::RunSummary> AuditRuns();
  // Waits until `pred(health json)` holds (polls /v1/health); false on timeout.
  bool WaitHealth(const std::function<bool(const std::string&)>& pred,
                  std::chrono::seconds timeout = std::chrono::seconds(60));
  int64_t HealthNumber(const std::string& key);

  const TempDir& dir() const { return dir_; }
  std::string socket() const { return dir_.Join("safex.sock"); }
  std::string state_dir() const { return dir_.Join("state"); }
  std::string audit_db() const { return audit_db_.empty() ? dir_.Join("audit.db") : audit_db_; }
  std::string policy_dir() const { return dir_.Join("policies"); }
  std::string log() const;

 private:
  TempDir dir_;
  std::string audit_db_;
  std::optional<Subprocess> daemon_;
  UniqueFd log_fd_;
};

}  // namespace safex::testing
