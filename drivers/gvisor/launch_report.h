// The launcher (launch/safex-launch.c): the first process of every gVisor run, inside the
// sandbox. It reads what the sandbox gives it (identity, capabilities, seccomp mode, rlimits,
// mount table) from its own /proc and sends it on the report pipe; the supervisor compares it
// with the plan here, and only if nothing differs sends the go-ahead on which the launcher execs
// the program in its place. This is the "check made inside the sandbox just before the program is
// exec'd" of the run's evidence (drivers/enforcement.h): under gVisor the Sentry holds these, and
// the host kernel cannot show them.
//
// Why the launcher is trusted: it runs before any code of the request, from a read-only mount of
// a root-owned directory, under the same uid, filter and limits as the program; after the exec
// nothing it said is taken again. It can only report, never loosen.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "drivers/enforcement.h"
#include "drivers/sandbox_report.h"
#include "plan/plan.h"

namespace safex::drivers::gvisor {

// Where the launcher appears inside the sandbox (a read-only bind of its directory).
inline constexpr char kLauncherMountTarget[] = "/.safex-launch";
inline constexpr char kLauncherProgram[] = "/.safex-launch/safex-launch";
// The mount points of the bundle's root besides the plan's (drivers/rootfs.h): what gVisor
// mounts itself (/proc, /dev, /sys) and the launcher.
inline std::vector<std::string> RootMountPoints() {
  return {"/proc", "/dev", "/sys", kLauncherMountTarget};
}
// Where packaging installs it; a build tree has it in launch-bin/ (FindLauncherDir).
inline constexpr char kInstalledLauncherDir[] = "/usr/local/lib/safex/launch";
// The report pipe and the go-ahead pipe, as the launcher sees them.
inline constexpr int kLauncherReportFd = 3;
inline constexpr int kLauncherGoFd = 4;

// The directory holding safex-launch: `configured` when set, else launch-bin/ next to the running
// binary or up to two levels above it (a build tree: safex, tests/*/, bench/*/), else
// kInstalledLauncherDir. Refused unless the file is a root-owned executable regular file in a
// root-owned directory that nobody else can write (what it reports decides whether runs start).
Result<std::string> FindLauncherDir(const std::string& configured);

// The report's framing and its comparison with the plan are the backends' common part
// (drivers/sandbox_report.h); this adds gVisor's own mounts: its /proc, /dev, /dev/pts and /sys,
// the read-only root and the launcher's directory.
void AddLaunchEvidence(const plan::Plan& plan, bool filtered, const SandboxReport& report,
                       Enforcement* e);

}  // namespace safex::drivers::gvisor
