#include "drivers/gvisor/runsc_command.h"

#include "drivers/gvisor/launch_report.h"

namespace safex::drivers::gvisor {

std::vector<std::string> RunscRunArgv(const RunscRun& r) {
  std::vector<std::string> argv = {
      r.runsc_path,
      "--root=" + r.state_dir,
      // No network device at all, or the host stack of the run's own namespace (gVisor's own
      // netstack refuses to start in what it takes for the root namespace; notes/environment.md).
      r.network ? "--network=host" : "--network=none",
      // Without it runsc silently ignores the spec's linux.seccomp.
      "--oci-seccomp",
      "--platform=" + r.platform,
      // The root is read-only and fresh; writable space is explicit mounts only.
      "--overlay2=none",
      "--debug-log=/proc/self/fd/" + std::to_string(kRunscLogFd),
      "--strace",
      "--strace-log-size=64",
  };
  // Tracing fork-like calls is how a failure at the process limit is observed (see notes), and
  // the plan's kLog rules are counted from the same trace.
  if (!r.logged.all) {
    std::string list = "clone,clone3,fork,vfork";
    for (const std::string& n : r.logged.names) list += "," + n;
    argv.push_back("--strace-syscalls=" + list);
  }
  for (const char* a : {"run", "--bundle"}) argv.emplace_back(a);
  argv.push_back(r.bundle);
  for (int fd : {kRunscStdinFd, kRunscStdoutFd, kRunscStderrFd}) {
    argv.emplace_back("--pass-fd");
    argv.push_back(std::to_string(fd) + ":" + std::to_string(fd - kRunscStdinFd));
  }
  if (r.launcher) {
    for (auto [host, container] :
         {std::pair{kRunscReportFd, kLauncherReportFd}, std::pair{kRunscGoFd, kLauncherGoFd}}) {
      argv.emplace_back("--pass-fd");
      argv.push_back(std::to_string(host) + ":" + std::to_string(container));
    }
  }
  argv.push_back(r.run_id);
  return argv;
}

}  // namespace safex::drivers::gvisor
