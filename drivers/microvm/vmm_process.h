// VmmProcess: QEMU started from an argv array (never a shell) as an unprivileged per-run uid, in
// the run's host cgroup before it executes a single instruction, owned through a pidfd.
//
// Why not common/subprocess.h: the VMM must (a) run under a uid of its own, with the parent-death
// signal set *after* the uid change (the kernel clears it on a credential change), and (b) be in
// its cgroup before exec. The child therefore blocks on a "go" pipe after its setup while the
// parent writes its pid into the cgroup, then execs. Child side, in order (no allocation, failures
// reported as {step, errno} on a close-on-exec pipe): default signals -> setsid -> setns(net) ->
// fd map (child fds 0..n-1, everything else closed) -> groups, gid, uid -> PR_SET_PDEATHSIG
// (re-checking the parent) -> no_new_privs -> wait for "go" -> execve with an empty environment.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::microvm {

struct VmmSpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the absolute path of the binary
  // fds[i] becomes fd i in the child (so the child gets exactly fds 0..fds.size()-1). At most 16.
  std::vector<int> fds;
  uid_t uid = 65534;
  gid_t gid = 65534;
  std::vector<gid_t> groups;  // supplementary groups (e.g. kvm's, for /dev/kvm)
  int netns_fd = -1;          // setns(CLONE_NEWNET) before exec when >= 0
  // cgroup.procs files the pid is written to before the child may exec (one per v1 hierarchy).
  std::vector<std::string> cgroup_procs_files;
};

struct VmmExit {
  bool exited = false;
  int code = 0;
  int signal = 0;
};

class VmmProcess {
 public:
  using Clock = std::chrono::steady_clock;

  VmmProcess() = default;
  ~VmmProcess();  // kills and reaps a live process
  VmmProcess(VmmProcess&& o) noexcept;
  VmmProcess& operator=(VmmProcess&& o) noexcept;
  VmmProcess(const VmmProcess&) = delete;
  VmmProcess& operator=(const VmmProcess&) = delete;

  static Result<VmmProcess> Spawn(const VmmSpawnOptions& options);

  bool valid() const { return pidfd_.valid(); }
  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }

  // SIGKILL through the pidfd, then reap. Idempotent.
  VmmExit KillAndWait();
  // Reaps if it has exited by `deadline`; nullopt otherwise.
  std::optional<VmmExit> WaitUntil(Clock::time_point deadline);

 private:
  VmmProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  std::optional<VmmExit> Reap(bool block);

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<VmmExit> exit_;
};

}  // namespace safex::microvm
