#include "drivers/native/native_driver.h"

#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "common/fs_tree.h"
#include "common/owner_lock.h"
#include "common/run_id.h"
#include "drivers/cgroup/cpuset.h"
#include "drivers/native/id_lease.h"
#include "drivers/native/run_state.h"
#include "drivers/native/run_steps.h"
#include "drivers/seccomp_bpf.h"
#include "drivers/sigpipe_block.h"

namespace safex::drivers {
namespace {

using native::RunState;

// A child in the namespaces a run's first process gets, plus the user namespace it makes: the
// host can really make them (a kernel without user namespaces, or with them turned off, fails
// here, not in the middle of a run). Not the network namespace: making one costs more than the
// rest together (~2 ms here), and a run whose clone3 fails for it is refused all the same. Once
// per process: what a kernel offers does not come and go, and every run's clone3 checks again.
Status ProbeNamespaces() {
  static const Status probed = [] {
    clone_args args;
    std::memset(&args, 0, sizeof args);
    args.flags =
        CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
    args.exit_signal = SIGCHLD;
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) _exit(0);
    if (pid < 0) {
      return Status::Unavailable(std::string("native: this host cannot make the sandbox's "
                                             "namespaces (clone3 with user, pid, mount, ipc, "
                                             "uts and cgroup namespaces: ") +
                                 std::strerror(errno) + ")");
    }
    int status = 0;
    while (waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
    }
    return Status::Ok();
  }();
  return probed;
}

BpfAction ToBpf(plan::SyscallAction a) {
  switch (a) {
    case plan::SyscallAction::kAllow:
      return BpfAction::kAllow;
    case plan::SyscallAction::kErrno:
      return BpfAction::kErrno;
    case plan::SyscallAction::kKill:
      return BpfAction::kKill;
    case plan::SyscallAction::kLog:
      return BpfAction::kLog;
  }
  return BpfAction::kKill;
}

Result<std::vector<sock_filter>> SeccompProgram(const plan::Seccomp& s) {
  BpfPolicy p;
  p.default_action = ToBpf(s.default_action);
  p.default_errno = s.default_errno;
  for (const plan::SyscallRule& r : s.rules)
    p.rules.push_back({r.name, ToBpf(r.action), r.errno_value});
  std::string error;
  std::optional<std::vector<sock_filter>> prog = BuildSeccompBpf(p, &error);
  if (!prog) return Status::InvalidArgument("native: " + error);
  if (prog->size() > BPF_MAXINSNS) {
    return Status::InvalidArgument("native: the seccomp filter is longer than the kernel takes");
  }
  return std::move(*prog);
}

std::string BackendMode(const plan::Plan& plan, int landlock_abi) {
  return "native/" +
         (landlock_abi > 0 ? "landlock=abi" + std::to_string(landlock_abi) : "landlock=none") +
         (plan.network.egress.empty() ? "/network=none" : "/network=netns");
}

// Nothing of the program ran: the host did not enforce the plan, or the run was stopped first.
RunResult NotStarted(RunResult result, RunState& s, bool cancelled) {
  if (cancelled) {
    result.interrupted = true;
    result.term_signal = SIGKILL;
  } else {
    result.refused_by_enforcement = true;
    result.backend_error =
        "the host does not enforce the plan: " + result.enforcement.Differences();
  }
  s.Teardown();
  result.teardown_error = s.errors;
  return result;
}

}  // namespace

NativeDriver::NativeDriver(NativeOptions options) : options_(std::move(options)) {}
NativeDriver::~NativeDriver() = default;

int NativeDriver::landlock_abi() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_ ? ready_->landlock_abi : 0;
}

Status NativeDriver::Probe() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ready_.reset();
  }
  return EnsureReady().status();
}

Result<NativeDriver::Ready> NativeDriver::EnsureReady() {
  std::lock_guard<std::mutex> l(mu_);
  if (ready_) return *ready_;
  SAFEX_RETURN_IF_ERROR(ProbeNamespaces());
  if (prctl(PR_GET_SECCOMP) < 0) {
    return Status::Unavailable("native: this kernel has no seccomp (prctl(PR_GET_SECCOMP): " +
                               std::string(std::strerror(errno)) + ")");
  }
  auto host = cgroup::CgroupHost::Detect(options_.cgroup_root);
  if (!host.ok()) return Status::Unavailable("native: " + host.status().message());
  Status usable = host->CheckUsable(options_.cgroup_parent);
  if (!usable.ok()) return Status::Unavailable("native: " + usable.message());
  const plan::NativeBackendSettings& n = options_.settings;
  Status ids = native::CheckIdsUnassigned(n.first_id, n.ids);
  if (!ids.ok()) return Status::Unavailable(ids.message());
  const int abi = options_.landlock_abi ? *options_.landlock_abi : native::LandlockAbi();
  if (abi == 0 && n.require_landlock) {
    return Status::Unavailable(
        "native: this kernel has no Landlock and the host config requires it "
        "(backends { native { landlock = require } }); refused, nothing ran");
  }
  ready_ = Ready{*host, abi};
  return *ready_;
}

Status NativeDriver::CheckRequest(const plan::Plan& plan, const RunRequest& req) const {
  SAFEX_RETURN_IF_ERROR(Driver::CheckRequest(plan, req));
  if (plan.backend != plan::Backend::kNative) {
    return Status::InvalidArgument("native driver given a plan for backend " +
                                   std::string(plan::BackendName(plan.backend)));
  }
  // The compiler allows native for trusted code only; a plan that says otherwise was not made by
  // it, or was edited: refused here too, nothing runs.
  if (plan.trust != plan::Trust::kTrusted) {
    return Status::PermissionDenied(
        "native: the plan is for untrusted code, which never runs on the host kernel with only "
        "namespaces around it (use gvisor or microvm); refused, nothing ran");
  }
  return Status::Ok();
}

// The script of one run: each step in the order it must happen, with why (run_steps.h has the
// steps; RunState's destructor tears down whatever exists on every way out).
Result<RunResult> NativeDriver::Run(const plan::Plan& plan, const RunRequest& req) {
  // 0. Refuse what cannot be run faithfully, before anything exists.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  SAFEX_RETURN_IF_ERROR(CheckRunnable(plan, req, plan::Backend::kNative,
                                      static_cast<bool>(options_.network_provider)));
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  SAFEX_ASSIGN_OR_RETURN(std::vector<sock_filter> seccomp, SeccompProgram(plan.seccomp));
  const native::LandlockRuleset landlock = native::LandlockRulesFor(plan, ready.landlock_abi);
  RunResult result;
  result.backend_mode = BackendMode(plan, landlock.abi);
  const native::RunContext c{plan, req, options_};
  SigpipeBlock sigpipe_block;
  RunState s;
  // 1-2. The host id first (the output tmpfs is its), the private directory, the mount sources.
  SAFEX_RETURN_IF_ERROR(native::CreateRunDirectory(c, RunsDir(), IdsDir(), s));
  SAFEX_RETURN_IF_ERROR(native::PrepareMountSources(c, s));
  // 3. The cgroup before the sandbox: its first process is placed in it before the program.
  SAFEX_RETURN_IF_ERROR(native::CreateCgroup(c, ready.cgroups, s));
  // 4-5. The network before the root: its /etc/hosts names the granted destinations.
  SAFEX_ASSIGN_OR_RETURN(std::string hosts, native::CreateNetwork(c, s));
  SAFEX_RETURN_IF_ERROR(native::PrepareRoot(c, hosts, s));
  native::ReadBackHostSide(landlock, s, &result.enforcement);
  if (result.enforcement.Differs()) return NotStarted(std::move(result), s, false);
  // 6-7. The sandbox, then what it got, compared with the plan before the program exists.
  SAFEX_ASSIGN_OR_RETURN(native::RunIo io, native::StartSandbox(c, landlock, seccomp, s));
  Status reported = native::AwaitReport(c, s, &result.enforcement);
  if (s.sandbox.cancelled()) return NotStarted(std::move(result), s, true);
  SAFEX_RETURN_IF_ERROR(reported);
  if (result.enforcement.Differs()) return NotStarted(std::move(result), s, false);
  // The program counts the CPUs it may run on: the plan's (drivers/cgroup/cpuset.h).
  SAFEX_RETURN_IF_ERROR(cgroup::NarrowAffinity(s.sandbox.process().pid(), plan.limits.cpus));
  int exec_errno = 0;
  SAFEX_RETURN_IF_ERROR(s.sandbox.Go(&exec_errno));
  if (exec_errno != 0) {
    // Not found (127) or not executable (126), as a shell says it.
    result.exit_code = exec_errno == ENOENT || exec_errno == ENOTDIR ? 127 : 126;
    result.backend_error = "execve " + req.argv[0] + ": " + std::strerror(exec_errno);
  }
  // 8. Supervision until the program is gone.
  native::Observation seen = native::Supervise(c, io, s, &result);
  // 9. What happened: the counters (final now), then the classifier.
  native::ReadAccounting(c, s, &seen, &result);
  if (exec_errno == 0) {
    const ProgramEnd end = native::Classify(seen, plan.limits, &result.interrupted);
    result.exit_code = end.exit_code;
    result.term_signal = end.term_signal;
    result.limit = end.limit;
    result.limit_detail = end.limit_detail;
  }
  // 10. Outputs, collected after every process is gone and before their storage goes away.
  native::CollectOutputs(c, s);
  // 11. Teardown; what could not be removed is the operator's to see.
  s.Teardown();
  result.teardown_error = s.errors;
  return result;
}

// Removes one stale run's cgroup (killing anything left in it), its output mounts and its
// directory. REQUIRES: the run's owner is dead.
Status NativeDriver::CleanRunDir(const Ready& ready, const std::string& run_id,
                                 const std::string& dir) {
  std::string errors;
  auto note = [&](const std::string& what, const Status& st) {
    if (!st.ok()) errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };
  auto cg = ready.cgroups.Adopt(options_.cgroup_parent, native::CgroupName(run_id));
  if (cg.ok()) {
    note("cgroup", cg->Destroy());
  } else if (cg.status().code() != Status::Code::kNotFound) {
    note("cgroup", cg.status());
  }
  for (const std::string& n : ListDirectoryOrEmpty(dir + "/out")) {
    const std::string m = dir + "/out/" + n;
    // Security: only the tmpfs mounts this driver made below its own state root.
    if (umount2(m.c_str(), UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
      note("umount " + m, Status::Errno("umount2", m, errno));
    }
  }
  if (!dir.empty()) note("remove " + dir, RemoveTree(dir));
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

Status NativeDriver::CleanupStale(int* cleaned) {
  if (cleaned != nullptr) *cleaned = 0;
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  std::string errors;
  for (const std::string& name : ListDirectoryOrEmpty(RunsDir())) {
    const std::string dir = RunsDir() + "/" + name;
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (!IsValidRunId(name)) continue;  // not ours
    UniqueFd lock;
    const OwnerState owner = ProbeOwner(dir, &lock);
    if (owner == OwnerState::kAlive) continue;
    // No lock file: a crash between mkdir and the lock, or a probe directory: only old ones.
    if (owner == OwnerState::kNoLock && time(nullptr) - st.st_mtime < 60) continue;
    Status done = CleanRunDir(ready, name, dir);
    if (!done.ok()) {
      errors += (errors.empty() ? "" : "; ") + name + ": " + done.message();
    } else if (cleaned != nullptr) {
      ++*cleaned;
    }
  }
  if (!errors.empty()) return Status::Internal("native cleanup: " + errors);
  return Status::Ok();
}

Status NativeDriver::CleanupStaleRun(const std::string& run_id, bool* cleaned) {
  if (cleaned != nullptr) *cleaned = false;
  if (!IsValidRunId(run_id)) return Status::Ok();
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  const std::string dir = RunsDir() + "/" + run_id;
  struct stat st;
  const bool has_dir = lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (has_dir) {
    UniqueFd lock;
    if (ProbeOwner(dir, &lock) == OwnerState::kAlive) return Status::Ok();
  }
  auto cg = ready.cgroups.Adopt(options_.cgroup_parent, native::CgroupName(run_id));
  const bool has_cgroup = cg.ok();
  if (!has_dir && !has_cgroup) return Status::Ok();
  SAFEX_RETURN_IF_ERROR(
      CleanRunDir(ready, run_id, has_dir ? dir : "").With("native cleanup of " + run_id));
  if (cleaned != nullptr) *cleaned = true;
  return Status::Ok();
}

}  // namespace safex::drivers
