// Subprocess: spawn a program from an argv array (execve, explicit environment, never a shell)
// and own it through a pidfd until it is reaped. The project's one fork/exec path: runsc, the
// VMM (QEMU under its own uid, in its cgroup before its first instruction) and the guest image
// builder (in a private mount namespace) all start here.
//
// The child side of Spawn follows the project's rules for the window between clone and exec, in
// this order:
//   1. PR_SET_PDEATHSIG first (then re-check the parent is still ours: it may already be gone);
//   2. default signal dispositions and an empty signal mask (ignored signals survive execve);
//   3. optional setsid() (no controlling terminal) and setns() into a network namespace;
//   4. optional bind mounts, in a private mount namespace of the child's own (CLONE_NEWNS);
//   5. the fd map is applied and every other descriptor is closed (close_range);
//   6. optional credentials (groups, gid, uid), then PR_SET_PDEATHSIG again (a credential change
//      clears it) and the parent re-checked; optional no_new_privs;
//   7. optional "go" barrier: the child waits until the parent has written its pid into every
//      cgroup.procs file it was given, so the program's first instruction runs in its cgroup;
//   8. optional chdir(), then execve().
// Nothing in that window allocates or logs. Without the barrier (7) the child shares the parent's
// memory until execve and the spawning thread waits for it (CLONE_VM | CLONE_VFORK, as
// posix_spawn does): spawning from a large daemon copies nothing; with the barrier it gets a copy.
// A failure is reported to the parent as {step, errno} over a close-on-exec pipe and the child
// _exit()s; Spawn then returns the failure as a Status.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex {

struct SpawnOptions {
  // argv[0] is the absolute path given to execve (no PATH search) and the program's argv[0].
  std::vector<std::string> argv;
  // The complete environment of the new program ("NAME=value"). Nothing is inherited.
  std::vector<std::string> env;
  // {child_fd, parent_fd}: the child gets a copy of parent_fd at child_fd (close-on-exec cleared).
  // Every descriptor not named here is closed in the child. At most kMaxFds entries; child fds
  // must be distinct and < 1024.
  std::vector<std::pair<int, int>> fds;
  static constexpr size_t kMaxFds = 16;
  // setsid() in the child: a new session without a controlling terminal.
  bool new_session = true;
  // Sent to the child when the spawning thread exits. 0 disables it.
  int parent_death_signal = 9;  // SIGKILL
  // If set, the child does setns(netns_fd, CLONE_NEWNET) before exec. The fd stays the caller's.
  int netns_fd = -1;
  // chdir() target in the child; empty keeps the parent's working directory.
  std::string cwd;
  // {source, target}: bind-mounted in that order in a private mount namespace of the child's own
  // (the mounts vanish with it; nothing is mounted in the caller's namespace). Needs
  // CAP_SYS_ADMIN. Empty: the caller's mount namespace.
  std::vector<std::pair<std::string, std::string>> bind_mounts;
  // Run the program as this uid/gid with exactly these supplementary groups (needs CAP_SETUID and
  // CAP_SETGID). Unset: the caller's credentials.
  struct Credentials {
    uid_t uid = 65534;
    gid_t gid = 65534;
    std::vector<gid_t> groups;
  };
  std::optional<Credentials> credentials;
  // PR_SET_NO_NEW_PRIVS before exec: no setuid or file-capability gain for the program.
  bool no_new_privs = false;
  // cgroup.procs files the child's pid is written to before it may exec (one per v1 hierarchy,
  // or the one v2 file). If any write fails, the child is killed and Spawn fails.
  std::vector<std::string> cgroup_procs_files;
};

// How a process ended (from waitid).
struct ExitStatus {
  bool exited = false;  // true: `code` is the exit status; false: killed by `signal`
  int code = 0;
  int signal = 0;
  // The conventional shell encoding: code, or 128 + signal.
  int ShellCode() const { return exited ? code : 128 + signal; }
};

// A spawned child process. Move-only. Destroying a Subprocess that has not been reaped sends
// SIGKILL through the pidfd and reaps it, so a child never outlives its owner unnoticed.
// Thread-safety: one owner thread at a time.
class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  Subprocess() = default;
  ~Subprocess();
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Starts the program. Returns an error (with the failing step and errno) if the child could not
  // be set up or execve failed; the child is reaped in that case.
  static Result<Subprocess> Spawn(const SpawnOptions& options);
  // Takes ownership of a child the caller cloned itself (with CLONE_PIDFD and exit signal
  // SIGCHLD): the native backend's sandbox, whose child side does more than Spawn's (namespaces,
  // mounts, a user namespace; drivers/native/sandbox_child.h). Killed and reaped as any other.
  static Subprocess Adopt(pid_t pid, UniqueFd pidfd) { return Subprocess(pid, std::move(pidfd)); }

  bool valid() const { return pidfd_.valid(); }
  pid_t pid() const { return pid_; }
  // Readable (POLLIN) once the child has exited; usable in a caller's poll set.
  int pidfd() const { return pidfd_.get(); }
  bool reaped() const { return status_.has_value(); }

  // Sends `sig` through the pidfd (never to a recycled pid). A child that already exited is not
  // an error.
  Status Signal(int sig);

  // Waits for the child to exit, until `deadline` if given. Returns the exit status, or nullopt
  // if the deadline passed first. After a successful wait the child is reaped; later calls return
  // the same status.
  Result<std::optional<ExitStatus>> Wait(std::optional<Clock::time_point> deadline = std::nullopt);

  // Reaps the child if it has exited; never blocks. nullopt while it is still running.
  Result<std::optional<ExitStatus>> TryWait();

  // SIGKILL, then wait. Idempotent.
  ExitStatus KillAndWait();

 private:
  Subprocess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<ExitStatus> status_;
};

struct ToolOutput {
  ExitStatus status;
  std::string output;  // stdout and stderr together, at most the cap
  bool timed_out = false;
};

// Runs argv (argv[0] absolute) with an empty environment, stdin /dev/null, stdout+stderr
// captured; SIGKILLed at the deadline (timed_out is then set).
Result<ToolOutput> RunTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           size_t cap = 64 * 1024);

}  // namespace safex
