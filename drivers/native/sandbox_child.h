// The native sandbox's first process, between clone3 and execve: it builds the run's file system,
// enters the run's user namespace, drops everything, and becomes the program, as pid 1 of the
// run's own pid namespace (when it exits the kernel kills every other process of the run).
//
// It was cloned (sandbox_launch.h) into new pid, mount, ipc and uts namespaces, and a new network
// namespace unless the run has its own (egress). Its steps, in order, and why that order:
//   1. parent-death signal, default signal dispositions, an empty mask, a new session;
//   2. the run's network namespace, if it has one (setns needs the privileges it still has), or
//      the fresh one's loopback brought up;
//   3. the mount script (mount_script.h), while it is still root of the host's user namespace:
//      the mounts are then owned by that namespace and locked for the program, which can never
//      unmount one to see what is below;
//   4. its descriptors: 0-2 the program's stdio, 3 the failure report (close-on-exec), 4 the
//      channel to the parent; everything else closed (the bind sources and the netns too);
//   5. pivot_root into the new root, the old root detached: the host's tree is unreachable;
//   6. host name, rlimits, no supplementary groups;
//   7. a new user namespace, then it waits on the channel while the parent writes its uid and gid
//      maps (one id: the plan's id inside is the run's leased id outside; nothing else is
//      mapped). The parent placed it in the run's cgroup right after the clone, while steps 1-6
//      ran, and always before this answer;
//   8. a new cgroup namespace (rooted at the run's cgroup), the bounding set emptied, the plan's
//      gid and uid, every capability dropped, the parent-death signal again (a credential change
//      clears it), no_new_privs;
//   9. Landlock (landlock.h), umask 022, the plan's working directory;
//  10. the seccomp filter, installed last: nothing of safex's runs after it but the report;
//  11. the report of what it got (drivers/sandbox_report.h) on the channel, and the parent's
//      go-ahead; without it nothing runs;
//  12. execve of the program (each PATH candidate in turn, as a shell would).
// Nothing here allocates, locks or logs: the parent (a multi-threaded supervisor) prepared every
// byte. A failure is reported as {step, errno, index} on fd 3 and the process _exits 127; after a
// successful execve fd 3 is closed and the parent reads EOF.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "drivers/native/landlock.h"
#include "drivers/native/mount_script.h"

namespace safex::drivers::native {

enum ChildStep : int32_t {
  kStepDeathSignal = 1,
  kStepSignals,
  kStepSession,
  kStepNetns,
  kStepLoopback,
  kStepMount,  // index: the mount script's op
  kStepDescriptors,
  kStepPivotRoot,
  kStepHostname,
  kStepRlimit,
  kStepGroups,
  kStepUserns,
  kStepMaps,  // the parent did not map its ids
  kStepCgroupns,
  kStepBoundingSet,
  kStepGid,
  kStepUid,
  kStepCapabilities,
  kStepNoNewPrivs,
  kStepLandlock,  // index: the rule (-1: the ruleset)
  kStepCwd,
  kStepSeccomp,
  kStepReport,
  kStepGoAhead,
  kStepExec,
};
const char* ChildStepName(int32_t step);

struct ChildReport {
  int32_t step = 0;
  int32_t err = 0;
  int32_t index = -1;
};

// The messages on the channel, besides the report (sandbox_report.h framing).
inline constexpr char kMsgUserns = 'U';  // child: my user namespace exists
inline constexpr char kMsgMapped = 'M';  // parent: placed in the cgroup, ids mapped
inline constexpr char kMsgGo = 'g';      // parent: the report holds, start the program

struct ChildRlimit {
  int resource = 0;
  rlim_t value = 0;
};

struct ChildSpec {
  // Descriptors of the parent, the same numbers in the child.
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  int report_fd = -1;   // the failure report's write end
  int channel_fd = -1;  // the child's end of the socketpair
  int netns_fd = -1;    // -1: the new, empty network namespace of clone3
  int high_base = 0;    // above every descriptor the child moves
  const MountOp* ops = nullptr;
  size_t nops = 0;
  const char* root = nullptr;
  const char* hostname = nullptr;
  size_t hostname_len = 0;
  const ChildRlimit* rlimits = nullptr;
  size_t nrlimits = 0;
  uid_t uid = 0;  // inside the user namespace (the plan's)
  gid_t gid = 0;
  const LandlockRule* landlock_rules = nullptr;
  size_t nlandlock = 0;
  int landlock_abi = 0;
  uint64_t landlock_handled = 0;
  const char* cwd = "/";
  sock_fprog seccomp{};
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* const* candidates = nullptr;  // absolute paths to try, nullptr-terminated
  int death_signal = 9;
};

[[noreturn]] void SandboxChildMain(const ChildSpec& s);

}  // namespace safex::drivers::native
