// A private `safex serve` for the service benchmarks: a directory under /var/tmp with the example
// policies, a host config whose service section allows root every policy, the daemon spawned with
// its log in the directory, and its resident memory read from /proc.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"
#include "common/subprocess.h"

namespace safex::bench {

struct Rss {
  long total = -1, anon = -1, file = -1;  // KiB: VmRSS, RssAnon, RssFile
};
Rss ReadRss(pid_t pid);

class BenchDaemon {
 public:
  // `name` names the directory (/var/tmp/safex-NAME-PID); `extra_service` goes into service { }.
  BenchDaemon(const std::string& name, int max_concurrent, const std::string& extra_service = "");
  ~BenchDaemon();  // SIGTERM, wait, remove the directory

  // The gVisor platform written into the example policies (`gvisor { platform = ... }`); empty
  // leaves theirs (systrap). Before Start.
  void set_platform(const std::string& platform) { platform_ = platform; }

  // Writes the policies and the config, spawns the daemon and waits for /v1/health.
  Status Start();
  const std::string& dir() const { return dir_; }
  std::string socket() const { return dir_ + "/safex.sock"; }
  std::string policy_dir() const { return dir_ + "/policies"; }
  pid_t pid() const { return daemon_ ? daemon_->pid() : -1; }

 private:
  std::string dir_;
  int max_concurrent_;
  std::string extra_;
  std::string platform_;
  std::optional<Subprocess> daemon_;
};

}  // namespace safex::bench
