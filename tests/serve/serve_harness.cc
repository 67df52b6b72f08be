#include "tests/serve/serve_harness.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "supervisor/serve/unix_socket.h"
#include "tests/support/test_host_config.h"
#include "tests/support/test_support.h"

namespace safex::testing {

ServeHarness::ServeHarness() {
  // Other uids (the authorisation test's 65534) must reach the socket inside.
  chmod(dir_.path().c_str(), 0755);
  std::filesystem::create_directories(policy_dir());
  for (const char* p : {"base-untrusted", "python-untrusted"}) {
    std::filesystem::copy_file(SourceDir() + "/policies/examples/" + p + ".policy",
                               policy_dir() + "/" + p + ".policy");
  }
}

ServeHarness::~ServeHarness() { Kill(); }

std::string ServeHarness::log() const {
  std::ifstream in(dir_.Join("serve.log"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ServeHarness::Start(const ServeOptions& o) {
  audit_db_ = o.audit_db;
  std::string config = std::string("host {\n") + kTestBackends + "  service {\n";
  config += "    policy_dir = \"" + policy_dir() + "\"\n";
  config += "    socket = \"" + socket() + "\"\n";
  config += "    socket_mode = \"0666\"\n";
  config += "    state_dir = \"" + state_dir() + "\"\n";
  config += "    audit_db = \"" + audit_db() + "\"\n";
  config += "    max_concurrent = " + std::to_string(o.max_concurrent) + "\n";
  config += "    max_queue = " + std::to_string(o.max_queue) + "\n";
  config += "    request_timeout = " + o.request_timeout + "\n";
  config += "    drain_timeout = " + o.drain_timeout + "\n";
  config += "    max_request = " + o.max_request + "\n";
  config += "    allow \"*\" { users = [0] }\n";
  config += "    allow \"base-untrusted\" { users = [65534] }\n";
  config += o.extra;
  config += "  }\n  network { pool = \"198.18.240.0/24\" }\n}\n";
  dir_.Write("host.policy", config);

  log_fd_.Reset(
      open(dir_.Join("serve.log").c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600));
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = {SafexBinary(),         "serve", "--config", dir_.Join("host.policy"), "--audit-key",
             dir_.Join("audit.key")};
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  so.fds = {{0, devnull.get()}, {1, log_fd_.get()}, {2, log_fd_.get()}};
  so.parent_death_signal = SIGKILL;
  auto p = Subprocess::Spawn(so);
  if (!p.ok()) return "spawn: " + p.status().message();
  daemon_ = std::move(p).value();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    auto ex = daemon_->TryWait();
    if (ex.ok() && ex->has_value()) {
      return "the daemon exited with " + std::to_string((*ex)->ShellCode()) + ":\n" + log();
    }
    auto r = serve::HttpCall(socket(), "GET", "/v1/health", "");
    if (r.ok() && r->status == 200) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "the daemon did not become healthy:\n" + log();
}

int ServeHarness::Stop(int sig, std::chrono::seconds deadline) {
  if (!daemon_ || daemon_->reaped()) return -1;
  daemon_->Signal(sig).ok();
  auto st = daemon_->Wait(std::chrono::steady_clock::now() + deadline);
  if (!st.ok() || !st->has_value()) return daemon_->KillAndWait().ShellCode() + 1000;
  return (*st)->ShellCode();
}

void ServeHarness::Kill() {
  if (daemon_ && !daemon_->reaped()) daemon_->KillAndWait();
}

bool ServeHarness::running() {
  if (!daemon_) return false;
  auto st = daemon_->TryWait();
  return st.ok() && !st->has_value();
}

pid_t ServeHarness::pid() const { return daemon_ ? daemon_->pid() : -1; }

Result<serve::HttpResponse> ServeHarness::Call(const std::string& method, const std::string& target,
                                               const std::string& body) {
  return serve::HttpCall(socket(), method, target, body);
}

ProcessOutput ServeHarness::Submit(const std::string& policy, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"submit", "--socket", socket(), "--policy", policy};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), argv.begin(), argv.end());
  return RunSafex(args, "", std::chrono::seconds(180));
}

std::string ServeHarness::Raw(const std::string& bytes, bool half_close) {
  auto fd = serve::ConnectUnix(socket());
  if (!fd.ok()) return "";
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd->get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (half_close) shutdown(fd->get(), SHUT_WR);
  std::string out;
  char buf[4096];
  timeval tv{30, 0};
  setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::unique_ptr<audit::AuditLog> ServeHarness::OpenAudit() {
  audit::AuditOptions o;
  o.read_only = true;
  auto log = audit::AuditLog::Open(audit_db(), o);
  if (!log.ok()) return nullptr;
  return std::move(log).value();
}

std::vector<audit::RunSummary> ServeHarness::AuditRuns() {
  auto log = OpenAudit();
  if (!log) return {};
  auto runs = log->ListRuns({});
  return runs.ok() ? *runs : std::vector<audit::RunSummary>{};
}

int64_t ServeHarness::HealthNumber(const std::string& key) {
  auto r = Call("GET", "/v1/health");
  if (!r.ok()) return -1;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains(key) || !j[key].is_number_integer()) return -1;
  return j[key].get<int64_t>();
}

bool ServeHarness::WaitHealth(const std::function<bool(const std::string&)>& pred,
                              std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    auto r = Call("GET", "/v1/health");
    if (r.ok() && pred(r->body)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string RequestAs(uid_t uid, gid_t gid, const std::string& socket,
                      const std::string& request) {
  int p[2];
  if (pipe(p) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(2);
    }
    auto fd = serve::ConnectUnix(socket);
    if (!fd.ok()) _exit(3);
    if (send(fd->get(), request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      _exit(4);
    }
    shutdown(fd->get(), SHUT_WR);
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (write(p[1], buf, static_cast<size_t>(n)) != n) break;
    }
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(p[0], buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

}  // namespace safex::testing
