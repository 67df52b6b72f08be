// The monitor: the process `safex-oci create` leaves behind as the container's "init" for the
// shim (its pid goes to --pid-file; the shim, a subreaper, inherits and reaps it, and its exit
// status is the container's). Order of its life:
//   1. tells create it is ready (the pipe), so create can record it and return to the shim;
//   2. waits on exec.fifo until `start` opens it (a kill before then ends it without a run);
//   3. runs the container as one safex run (supervisor/oci/container_run.h): the audit log
//      first (fail closed), the policy the node allows, the spec checked against the plan, the
//      run under gVisor with the policy's limits inside the pod's cgroup, its output passed on
//      to the shim's stdio as it is captured;
//   4. writes the verdict as the termination message, removes the cgroup it made, and exits
//      with the verdict's exit status (125 refused, 124 timeout, 137 memory, ...).
// Signals from `safex-oci kill` (TERM, INT, HUP, QUIT; KILL arrives as USR1, since the monitor
// must live to record the run) stop the run: the sandbox is killed and removed and the run is
// recorded as interrupted, with exit status 128 + the signal asked for.
#pragma once

#include <string>

#include "compiler/host_config.h"
#include "supervisor/oci/container_spec.h"
#include "supervisor/oci/oci_log.h"

namespace safex::supervisor::oci {

struct MonitorArgs {
  std::string id;
  std::string dir;               // the container's state directory
  std::string host_config_path;  // for the run's setup (ceilings, backends, network)
  compiler::HostConfig host;
  ContainerSpec spec;
  OciLog log;
};

// In the child of create's fork, with fds 0-2 the container's stdio. Never returns.
[[noreturn]] void RunMonitor(const MonitorArgs& args, int ready_fd);

}  // namespace safex::supervisor::oci
