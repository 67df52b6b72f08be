// One container as one safex run (the monitor's work, supervisor/oci/monitor.h), with the same
// lifecycle as `safex run` (supervisor/runner.h), in two halves that follow runc's create/start:
//
//   Prepare (after create, before start): the audit log (fail closed), the policy the node's
//     rules give the container's namespace, the plan compiled under the host's ceilings, the OCI
//     spec checked against it, and the sandbox booted from the plan inside the spec's
//     cgroupsPath, its program not yet known (drivers/driver.h, Prepare: as the warm pool does;
//     recorded as a made sandbox). Nothing is recorded as a run yet.
//   Run (after start): the run's start event, the program handed to the waiting sandbox (or a
//     cold one when none could be made), its end event; or the refusal Prepare found, recorded.
//   Abandon (killed or deleted before start): the waiting sandbox torn down, its eviction
//     recorded.
// The pod's identity is the run's recorded purpose.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "drivers/driver.h"
#include "supervisor/oci/monitor.h"
#include "supervisor/run_setup.h"
#include "supervisor/runner.h"

namespace safex::supervisor::oci {

class ContainerRun {
 public:
  explicit ContainerRun(const MonitorArgs& args);
  ~ContainerRun();

  // `cancel` set (a kill before start) stops a boot in progress.
  void Prepare(const std::atomic<int>* cancel);
  // `on_output` gets the program's output as it is captured.
  RunReport Run(const std::atomic<int>* cancel, const drivers::OutputObserver& on_output);
  void Abandon(const std::string& why);

  // The host file kubelet reads the verdict from ("" : none).
  const std::string& termination_log() const { return termination_log_; }

 private:
  class OneSandbox;
  Status Compile(const std::string& policy);
  void BootSandbox();
  void EvictSandbox(const std::string& why);
  RunReport Refusal();

  const MonitorArgs& a_;
  RunSetupFlags flags_;
  RunSetup setup_;
  RunSpec run_;
  std::optional<PreparedPlan> prepared_;
  RunReport refusal_;
  std::string refuse_reason_;   // set: the container is refused at start, for this reason
  bool record_refusal_ = true;  // false when the audit log itself could not be opened
  const std::atomic<int>* cancel_ = nullptr;
  std::string cgroup_parent_;
  std::string termination_log_;
  std::unique_ptr<OneSandbox> sandbox_;
};

// The termination message kubelet shows for the container: one JSON object, at most 4 KiB.
std::string TerminationMessage(const RunReport& report);

}  // namespace safex::supervisor::oci
