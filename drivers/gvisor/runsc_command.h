// The `runsc run` command line of one run, built by a pure function (golden-tested in
// tests/drivers/gvisor_unit_test.cc), so that every flag is visible in one place with its reason.
#pragma once

#include <string>
#include <vector>

#include "drivers/gvisor/oci_spec.h"

namespace safex::drivers::gvisor {

// Child-side descriptor numbers of `runsc run`. 0 is /dev/null, 1 and 2 collect runsc's own
// diagnostics; the container's stdio arrives through --pass-fd so that runsc's messages never
// mix with the program's output; the debug log is read for the program's exit and fork failures.
inline constexpr int kRunscStdinFd = 3;
inline constexpr int kRunscStdoutFd = 4;
inline constexpr int kRunscStderrFd = 5;
inline constexpr int kRunscLogFd = 6;
// The launcher's report and go-ahead pipes (launch_report.h), container fds 3 and 4.
inline constexpr int kRunscReportFd = 7;
inline constexpr int kRunscGoFd = 8;

struct RunscRun {
  std::string runsc_path;
  std::string state_dir;  // --root: this run's own runsc state
  std::string bundle;
  std::string run_id;
  std::string platform;   // systrap | ptrace
  bool network = false;   // --network=host inside the run's own namespace, else --network=none
  LoggedSyscalls logged;  // syscalls the plan counts (kLog rules)
  bool launcher = false;  // pass the launcher's pipes (kRunscReportFd, kRunscGoFd)
};

std::vector<std::string> RunscRunArgv(const RunscRun& r);

}  // namespace safex::drivers::gvisor
