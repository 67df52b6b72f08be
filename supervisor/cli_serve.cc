// `safex serve`: the supervisor as a host service (supervisor/serve/server.h, docs/operating.md).
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "compiler/host_config.h"
#include "supervisor/cli.h"
#include "supervisor/serve/server.h"

namespace safex::cli {
namespace {

struct ServeFlags {
  std::string config = compiler::kDefaultHostConfigPath;
  std::string socket;
  std::string state_dir;
  std::string audit_db;
  std::string audit_key;
  std::string policy_dir;
  std::string runsc;  // "" : the host config's backends { gvisor { runsc } }
};

// systemd's readiness protocol (Type=notify) without libsystemd: one datagram to $NOTIFY_SOCKET.
void NotifySystemd(const char* state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  UniqueFd fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return;
  ssize_t n =
      sendto(fd.get(), state, std::strlen(state), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  (void)n;
}

int DoServe(const ServeFlags& f) {
  // Before any thread exists: every thread inherits the mask; the server reads SIGTERM, SIGINT
  // and SIGHUP through a signalfd, and SIGPIPE never ends the process.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto host = compiler::LoadHostConfigFile(f.config);
  if (!host.ok()) {
    std::cerr << "safex serve: host config: " << host.status().message() << "\n";
    return 1;
  }
  serve::ServeConfig cfg;
  cfg.host = std::move(host).value();
  compiler::ServiceSettings& svc = cfg.host.service;
  if (!f.socket.empty()) svc.socket = f.socket;
  if (!f.state_dir.empty()) svc.state_dir = f.state_dir;
  if (!f.audit_db.empty()) svc.audit_db = f.audit_db;
  if (!f.policy_dir.empty()) svc.policy_dir = f.policy_dir;
  cfg.audit_key = f.audit_key;
  if (!f.runsc.empty()) cfg.host.backends.gvisor.runsc = f.runsc;

  auto server = serve::Server::Start(std::move(cfg));
  if (!server.ok()) {
    std::cerr << "safex serve: not starting: " << server.status().message() << "\n";
    return 1;
  }
  const serve::RecoveryReport& r = (*server)->recovery();
  serve::ServeLog("recovery: " + std::to_string(r.interrupted.size()) +
                  " runs closed as interrupted, " + std::to_string(r.sandboxes_evicted.size()) +
                  " pooled sandboxes of a killed service recorded as evicted, sandboxes removed: " +
                  r.SandboxesText() + ", " +
                  std::to_string(r.networks_removed) + " networks, " +
                  std::to_string(r.input_dirs_removed) + " input dirs and " +
                  std::to_string(r.records_removed) + " run records removed");
  for (const std::string& w : r.warnings) serve::ServeWarn("recovery: " + w);
  NotifySystemd("READY=1");
  int rc = (*server)->Run();
  NotifySystemd("STOPPING=1");
  return rc;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Run the safex service on a Unix socket (root)");
  cmd->add_option("--config", flags->config, "Host config with the service section (host.policy)");
  cmd->add_option("--socket", flags->socket, "Unix socket to listen on (overrides the config)");
  cmd->add_option("--state-dir", flags->state_dir,
                  "Directory for the runs' sandbox state (overrides the config)");
  cmd->add_option("--audit-db", flags->audit_db, "Audit log (overrides the config)");
  cmd->add_option("--audit-key", flags->audit_key, "Checkpoint signing key");
  cmd->add_option("--policy-dir", flags->policy_dir, "Policy directory (overrides the config)");
  cmd->add_option("--runsc", flags->runsc,
                  "runsc binary (overrides the host config's backends { gvisor { runsc } })");
  cmd->callback([flags, exit_code] { *exit_code = DoServe(*flags); });
}

}  // namespace safex::cli
