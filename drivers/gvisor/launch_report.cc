#include "drivers/gvisor/launch_report.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace safex::drivers::gvisor {
namespace {

// Regular, executable by the sandbox user, owned by root, and neither it nor its directory
// writable by anyone but root.
Status CheckLauncher(const std::string& dir) {
  const std::string file = dir + "/safex-launch";
  struct stat st;
  if (lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("no launcher at " + file);
  }
  if (st.st_uid != 0 || (st.st_mode & 022) != 0 || (st.st_mode & S_IXOTH) == 0) {
    return Status::Unavailable("gvisor: the launcher " + file +
                               " must be root-owned, executable by all and writable by root only");
  }
  struct stat dst;
  if (stat(dir.c_str(), &dst) != 0 || dst.st_uid != 0 || (dst.st_mode & 022) != 0) {
    return Status::Unavailable("gvisor: the launcher's directory " + dir +
                               " must be root-owned and writable by root only");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> FindLauncherDir(const std::string& configured) {
  if (!configured.empty()) {
    Status s = CheckLauncher(configured);
    if (!s.ok()) return Status::Unavailable("gvisor: " + s.message());
    return configured;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    for (int up = 0; up < 3 && dir.rfind('/') != std::string::npos; ++up) {
      dir = dir.substr(0, dir.rfind('/'));
      Status s = CheckLauncher(dir + "/launch-bin");
      if (s.ok()) return dir + "/launch-bin";
      if (s.code() != Status::Code::kNotFound) return s;
    }
  }
  Status s = CheckLauncher(kInstalledLauncherDir);
  if (s.ok()) return std::string(kInstalledLauncherDir);
  if (s.code() != Status::Code::kNotFound) return s;
  return Status::Unavailable(
      "gvisor: the launcher safex-launch is missing (build target safex-launch, installed to " +
      std::string(kInstalledLauncherDir) +
      " by packaging/install.sh); without it a run's "
      "evidence cannot be read, so runs are refused");
}

void AddLaunchEvidence(const plan::Plan& plan, bool filtered, const SandboxReport& report,
                       Enforcement* e) {
  ReportExpectations x;
  x.infrastructure_mounts = {
      MountLine("/", true, false),         MountLine("/dev", false, false),
      MountLine("/dev/pts", false, false), MountLine("/proc", false, false),
      MountLine("/sys", true, true),       MountLine(kLauncherMountTarget, true, false)};
  x.filtered = filtered;
  // What the OCI spec sets (oci_spec.h).
  x.rlimits = {{"Max core file size", 0},
               {"Max file size", plan.limits.disk_bytes},
               {"Max open files", plan.limits.open_files},
               {"Max processes", plan.limits.pids}};
  x.source = "launcher inside the sandbox, before the program's exec";
  AddSandboxReportEvidence(plan, x, report, e);
  e->NotObserved("seccomp.filter",
                 "the filter's program lives in the Sentry, which does not export it (no "
                 "PTRACE_SECCOMP_GET_FILTER); seccomp.mode shows one is installed",
                 "the first errno and kill syscall rules");
}

}  // namespace safex::drivers::gvisor
