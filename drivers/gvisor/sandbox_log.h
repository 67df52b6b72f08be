// SandboxLogScanner: reads runsc's debug log (--debug-log, a pipe the driver drains) as a stream
// and keeps only a few facts, in bounded memory whatever the volume:
//   - how the application ended, from the sandbox's own line
//       "boot.go:NNN] application exiting with exit status N" / "... killed by signal N"
//     (the last one wins; the driver cross-checks it with runsc's exit code);
//   - whether the application was started at all (gVisor logs "EXEC: [...]" for each execve);
//   - fork/clone/vfork/clone3 calls that returned EAGAIN (from gVisor's strace, enabled for those
//     syscalls only): the process limit (RLIMIT_NPROC) at work;
//   - calls of syscalls the plan asked to log (strace "E name(" entry lines).
//
// The program inside can influence log text (its argv appears in EXEC lines, its name in strace
// lines), so nothing here is trusted beyond labelling the program's own run: the exit status is
// only believed when it agrees with runsc's exit code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace safex::drivers::gvisor {

class SandboxLogScanner {
 public:
  struct AppExit {
    bool signaled = false;
    int value = 0;  // exit status or signal number
  };

  // Syscall names whose calls are counted (plan kLog rules); `log_all` counts every syscall.
  void SetLogged(std::set<std::string> names, bool log_all);

  // Feeds the next chunk of the stream (any split).
  void Feed(std::string_view data);
  // Processes a final line without a newline.
  void Finish();

  std::optional<AppExit> app_exit() const { return app_exit_; }
  bool app_started() const { return app_started_; }
  uint64_t fork_eagain() const { return fork_eagain_; }
  const std::map<std::string, uint64_t>& logged() const { return logged_; }
  uint64_t lines() const { return lines_; }

 private:
  void Line(std::string_view line);

  static constexpr size_t kMaxLine = 1024;  // bytes of a line that are looked at
  std::string partial_;
  std::set<std::string> log_names_;
  bool log_all_ = false;
  std::optional<AppExit> app_exit_;
  bool app_started_ = false;
  uint64_t fork_eagain_ = 0;
  std::map<std::string, uint64_t> logged_;
  uint64_t lines_ = 0;
};

}  // namespace safex::drivers::gvisor
