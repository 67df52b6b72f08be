#include "bench/serve/bench_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/unique_fd.h"
#include "supervisor/serve/client.h"

namespace safex::bench {

using Clock = std::chrono::steady_clock;

Rss ReadRss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  Rss r;
  for (std::string line; std::getline(in, line);) {
    auto value = [&line] { return std::atol(line.c_str() + line.find(':') + 1); };
    if (line.starts_with("VmRSS:")) r.total = value();
    if (line.starts_with("RssAnon:")) r.anon = value();
    if (line.starts_with("RssFile:")) r.file = value();
  }
  return r;
}

BenchDaemon::BenchDaemon(const std::string& name, int max_concurrent,
                         const std::string& extra_service)
    : dir_("/var/tmp/safex-" + name + "-" + std::to_string(getpid())),
      max_concurrent_(max_concurrent),
      extra_(extra_service) {}

BenchDaemon::~BenchDaemon() {
  if (daemon_) {
    (void)daemon_->Signal(SIGTERM);
    auto st = daemon_->Wait(Clock::now() + std::chrono::seconds(60));
    if (!st.ok() || !st->has_value()) daemon_->KillAndWait();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status BenchDaemon::Start() {
  std::filesystem::create_directories(policy_dir());
  chmod(dir_.c_str(), 0755);
  for (const char* p : {"base-untrusted", "python-untrusted"}) {
    const std::string source =
        std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/" + p + ".policy";
    std::ifstream in(source);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t last = text.rfind('}');  // the policy block's end
    if (!in.is_open() || last == std::string::npos)
      return Status::Internal("cannot read " + source);
    if (!platform_.empty()) text.insert(last, "  gvisor { platform = " + platform_ + " }\n");
    std::ofstream out(policy_dir() + "/" + p + ".policy");
    out << text;
    if (!out) return Status::Internal("cannot write policy " + std::string(p));
  }
  std::string config = "host {\n  service {\n";
  config += "    policy_dir = \"" + policy_dir() + "\"\n";
  config += "    socket = \"" + socket() + "\"\n";
  config += "    state_dir = \"" + dir_ + "/serve-state\"\n";
  config += "    audit_db = \"" + dir_ + "/serve-audit.db\"\n";
  config += "    max_concurrent = " + std::to_string(max_concurrent_) + "\n";
  config += "    max_queue = 16\n";
  config += "    allow \"*\" { users = [0] }\n";
  config += extra_;
  config += "  }\n}\n";
  {
    std::ofstream out(dir_ + "/host.policy");
    out << config;
    if (!out) return Status::Internal("cannot write " + dir_ + "/host.policy");
  }
  UniqueFd log(
      open((dir_ + "/serve.log").c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600));
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  so.argv = {SAFEX_BENCH_BINARY,    "serve",       "--config",
             dir_ + "/host.policy", "--audit-key", dir_ + "/audit.key"};
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  so.fds = {{0, devnull.get()}, {1, log.get()}, {2, log.get()}};
  so.parent_death_signal = SIGKILL;
  SAFEX_ASSIGN_OR_RETURN(Subprocess d, Subprocess::Spawn(so));
  daemon_ = std::move(d);
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    auto r = serve::HttpCall(socket(), "GET", "/v1/health", "");
    if (r.ok() && r->status == 200) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Unavailable("the daemon did not come up (see " + dir_ + "/serve.log)");
}

}  // namespace safex::bench
