// One container as one safex run (the monitor's step 3, supervisor/oci/monitor.h): the same
// lifecycle as `safex run` (supervisor/runner.h), with the policy chosen by the node's rules for
// the container's namespace, the OCI spec checked against the plan, the run's cgroup below the
// spec's cgroupsPath, and the pod's identity recorded as the run's purpose.
#pragma once

#include <atomic>
#include <string>

#include "drivers/driver.h"
#include "supervisor/oci/monitor.h"
#include "supervisor/runner.h"

namespace safex::supervisor::oci {

// Returns the report (a refusal when it never ran). `on_output` gets the program's output as it
// is captured; `termination_log` is set to the host file kubelet reads the verdict from.
RunReport RunContainer(const MonitorArgs& args, const std::atomic<int>* cancel,
                       const drivers::OutputObserver& on_output, std::string* termination_log);

// The termination message kubelet shows for the container: one JSON object, at most 4 KiB.
std::string TerminationMessage(const RunReport& report);

}  // namespace safex::supervisor::oci
