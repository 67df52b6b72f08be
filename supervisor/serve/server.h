// `safex serve`: the supervisor as a host service (docs/operating.md).
//
// Threads:
//   - the event loop (the thread that calls Run): accepts connections on the Unix socket, reads
//     and parses requests (http_parser.h) with a deadline, answers health and metrics itself,
//     checks each run request (submit_request.h, access.h, admission) and writes every response;
//     all socket I/O is here and non-blocking, so no client can stall anything else;
//   - max_concurrent workers: each takes an admitted run request from the bounded queue, resolves
//     the policy (policy_store.h) and runs it through supervisor::Runner::Execute -- the same code
//     path as `safex run` -- with its own audit log connection;
//   - one side thread with its own audit log connection: records refusals (before the refusal is
//     answered) and answers GET /v1/runs queries.
// Admission: at most max_concurrent + max_queue run requests are accepted and not yet finished;
// one more is refused at once (503) and audited.
//
// Start order (Start): instance lock, access rules, audit log, crash recovery (recovery.h), then
// the socket; work is accepted only after recovery succeeded.
// Stop (SIGTERM/SIGINT, read through a signalfd): the socket is closed and removed, queued
// requests are refused (503, audited), running ones may finish until drain_timeout, then they are
// cancelled (sandbox killed and removed, verdict interrupted); Run returns once every response is
// written. A second signal cancels at once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "compiler/host_config.h"
#include "supervisor/serve/recovery.h"
#include "supervisor/serve/service_log.h"

namespace safex::serve {

struct ServeConfig {
  compiler::HostConfig host;  // service and backend settings after command-line overrides
  std::string audit_key;      // checkpoint key (unused by the daemon itself; kept for symmetry)
};

class Server {
 public:
  // REQUIRES: SIGTERM, SIGINT, SIGHUP and SIGPIPE blocked in the calling thread before any
  // thread exists (cli_serve does it), so that workers inherit the mask.
  static Result<std::unique_ptr<Server>> Start(ServeConfig config);
  ~Server();

  // Serves until told to stop; returns the process exit status (0 after a clean drain).
  int Run();

  const RecoveryReport& recovery() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace safex::serve
