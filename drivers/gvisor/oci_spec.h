// The OCI runtime spec (config.json) of one gVisor run, built from a verified plan.
//
// Pure: no I/O. The driver supplies where each mount's host side lives (OciLayout). What the
// spec contains and why:
//   process: argv verbatim, env exactly plan.env, cwd/uid/gid from the plan, no capabilities in
//            any set, noNewPrivileges, rlimits NOFILE = open_files, NPROC = pids (gVisor enforces
//            it for a non-root uid: fork fails with EAGAIN), FSIZE = disk_bytes, CORE = 0.
//            RLIMIT_CPU is left out: gVisor does not enforce it (the driver does, from outside).
//   root:    the fresh rootfs, read-only.
//   mounts:  /proc, /dev, /sys (read-only) as gVisor provides them, then the plan's mounts in
//   order. linux:   namespaces, cgroupsPath (pre-created by the driver), resources (informational:
//   runsc
//            leaves a pre-created cgroup's settings alone), seccomp (see BuildSeccomp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"

namespace safex::drivers::gvisor {

struct OciLayout {
  std::string rootfs = "rootfs";  // relative to the bundle directory
  std::string cgroups_path;       // absolute cgroup path, e.g. "/safex/<run-id>"
  // Host path bound for each plan mount (same index as plan.mounts): kBind its source, kInput
  // the request's input dir (or an empty directory), kOutput the run's fresh tmpfs; "" for kTmpfs.
  std::vector<std::string> mount_sources;
  uint64_t pids_backstop = 0;  // host pids.max (informational)
  // False when runsc runs inside a network namespace provided for the run (--network=host):
  // the spec then asks for no network namespace of its own.
  bool network_none = true;
  // The launcher's directory on the host (launch_report.h): mounted read-only at
  // /.safex-launch, and the process is `safex-launch -- argv...`. "" : argv runs directly (unit
  // tests of the spec only; the driver always sets it).
  std::string launcher_dir;
  // A warm pool's sandbox (drivers/driver.h, PreparedSandbox): the process is
  // `safex-launch --pool`, which is handed the program's argv later; argv must be empty.
  bool pooled = false;
  // An agent session's sandbox: the process is `safex-launch --session` (launch/session.c),
  // which runs each command as its child; argv must be empty.
  bool session = false;
};

struct SeccompOptions {
  // runsc 0.0~20240729 ignores errnoRet (every SCMP_ACT_ERRNO returns EPERM). While false, a rule
  // asking for another errno is refused rather than silently changed.
  bool errno_ret_supported = false;
};

// linux.seccomp for plan.seccomp, or nullopt when nothing needs filtering (default allow, no
// errno/kill rules). Mapping: kAllow -> SCMP_ACT_ALLOW, kErrno -> SCMP_ACT_ERRNO (+errnoRet),
// kKill -> SCMP_ACT_KILL (gVisor 20240729 knows no SCMP_ACT_KILL_PROCESS: the calling thread dies
// with SIGSYS, which ends a single-threaded process), kLog -> allowed here and counted by the
// driver from gVisor's strace (gVisor has no SCMP_ACT_LOG). Architectures: x86_64 only; gVisor
// evaluates filters against its own x86_64 table and implements neither the i386 (int 0x80) nor the
// x32 ABI.
Result<std::optional<nlohmann::json>> BuildSeccomp(const plan::Seccomp& seccomp,
                                                   const SeccompOptions& options);

// Syscall names whose rule is kLog (sorted). With default_action kLog, `all` is set instead.
struct LoggedSyscalls {
  bool all = false;
  std::vector<std::string> names;
};
LoggedSyscalls SyscallsToLog(const plan::Seccomp& seccomp);

Result<nlohmann::json> BuildOciSpec(const plan::Plan& plan, const std::vector<std::string>& argv,
                                    const OciLayout& layout, const SeccompOptions& seccomp);

}  // namespace safex::drivers::gvisor
