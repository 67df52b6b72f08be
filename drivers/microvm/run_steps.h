// The steps of one microVM run (MicrovmDriver::Run is their script, in this order). Each adds
// what it creates to the run's VmRun, whose members are declared in teardown order, so that every
// way out of Run removes them (QEMU is always reaped by LaunchAndRun before anything else goes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/enforcement.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/guest_spec_builder.h"
#include "drivers/microvm/microvm_driver.h"
#include "drivers/microvm/output_receiver.h"
#include "drivers/microvm/qemu_command.h"
#include "drivers/microvm/rootfs_image.h"
#include "drivers/microvm/vm_launcher.h"
#include "drivers/microvm/vm_session.h"
#include "drivers/net/run_network.h"
#include "drivers/sandbox_report.h"
#include "plan/plan.h"

namespace safex::microvm {

inline constexpr uint64_t kMiB = 1024 * 1024;

// Removes the run directory when the run ends, whatever happened.
class RunDir {
 public:
  RunDir() = default;
  explicit RunDir(std::string p) : path_(std::move(p)) {}
  RunDir(RunDir&& o) noexcept : path_(std::exchange(o.path_, std::string())) {}
  RunDir& operator=(RunDir&& o) noexcept;
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  ~RunDir() { (void)Remove(); }
  const std::string& path() const { return path_; }
  Status Remove();

 private:
  std::string path_;
};

// What one run holds (destroyed bottom up: outputs and network before the directory, the owner
// lock last, so that CleanupStale never takes a finishing run for a dead one).
struct VmRun {
  UniqueFd owner_lock;
  RunDir dir;                 // <state_root>/runs/<run id>, 0700
  RootfsImages rootfs;        // the bind sources' images (cached, shared read-only)
  UniqueFd input_fd;          // the input image of this run
  std::vector<VmDisk> disks;  // what QEMU attaches, one per fd below
  std::vector<int> disk_fds;
  GuestSpecInputs in;  // what the guest spec is built from
  std::vector<OutputMountSpec> outputs;
  std::unique_ptr<drivers::net::RunNetwork> net;
  UniqueFd tap;
  std::optional<OutputReceiver> receiver;
  std::optional<drivers::cgroup::RunCgroup> cg;  // the VMM's host cgroup
  drivers::cgroup::Limits cg_limits;             // what was written to it
  uint64_t guest_mib = 0;
};

// 1. The run's private directory and its owner lock (locked from its first instant).
Status CreateRunDirectory(const drivers::MicrovmOptions& o, const drivers::RunRequest& req,
                          VmRun& v);
// 2. The disks: one read-only image per bind root (the image cache), the run's input image.
Status PrepareDisks(const plan::Plan& plan, const drivers::RunRequest& req, ImageCache& images,
                    VmRun& v);
// 3. Egress only: the run's namespace from the provider, its link taken over by a tap for the
//    guest, which configures its own interface from the link's addresses.
Status AttachNetwork(const plan::Plan& plan, const drivers::RunRequest& req,
                     const drivers::MicrovmOptions& o, VmRun& v);
// 4. One detached host tmpfs per output mount, filled from the guest's output stream.
Status PrepareOutputs(const plan::Plan& plan, VmRun& v);
// The guest's RAM in MiB (the plan's memory plus guest_overhead_bytes, rounded up), and the
// VMM's host cgroup memory limit (that RAM plus vmm_overhead_bytes for QEMU itself).
uint64_t GuestMib(const plan::Plan& plan, const drivers::MicrovmOptions& o);
uint64_t VmmMemoryBytes(const plan::Plan& plan, const drivers::MicrovmOptions& o);
// 5. The VMM's host cgroup: guest RAM and QEMU's own overhead, its tasks, its vCPUs.
Status CreateVmmCgroup(const plan::Plan& plan, const drivers::RunRequest& req,
                       const drivers::MicrovmOptions& o, const drivers::cgroup::CgroupHost& cgroups,
                       uint32_t vcpus, VmRun& v);
// 5b. What the host kernel shows of the run before QEMU starts (drivers/enforcement.h): the
//     VMM's cgroup read back against what was written, the run's network namespace, the QEMU
//     binary's version and SHA-256; what the guest agent enforces inside the VM is marked not
//     observed, with the probe that tests it.
void ReadBackEnforcement(const plan::Plan& plan, const std::string& qemu_version,
                         const std::string& qemu_sha256, const VmRun& v, drivers::Enforcement* e);

// What the guest agent sets up for the workload besides the plan's mounts (its root, /proc, /dev)
// and the rlimits it applies, for comparing the workload's own report (drivers/sandbox_report.h).
drivers::ReportExpectations GuestReportExpectations(const plan::Plan& plan);
// The accelerator QEMU really runs with ("kvm", "tcg"), from the host kernel: its -accel argument
// in the VMM's cgroup, read while the guest waits for kGo. "not shown" when none is found.
std::string QemuAccel(const drivers::cgroup::RunCgroup& cg);

// How QEMU and the session with the guest are set up (pure from what the steps made).
struct LaunchInputs {
  Accel accel = Accel::kTcg;
  uint32_t vcpus = 1;
  uint64_t tsc_khz = 0;
  std::vector<gid_t> kvm_groups;
};
LaunchSpec BuildLaunchSpec(const drivers::MicrovmOptions& o, const drivers::RunRequest& req,
                           const LaunchInputs& li, VmRun& v);
// The session's deadlines, caps, stdin and observers for `req`; the caller adds what goes first
// (a cold run's spec_payload, a pooled VM's request_payload).
SessionConfig BuildSessionConfig(const plan::Plan& plan, const drivers::RunRequest& req,
                                 const drivers::MicrovmOptions& o, VmRun& v);

// 8. When nothing of the program ran (the guest did not boot, could not set the run up, QEMU
//    died early): the refusal or setup error with its reason, in safex's words first. Ok when the
//    program ran (or the run was cancelled, which is a result).
Status NothingRan(const LaunchResult& launched, uint64_t vmm_oom, Accel accel,
                  const drivers::MicrovmOptions& o);
// 9. What happened, from the session with the guest (the guest agent's exit report, the
//    supervisor's own deadlines and caps, the VMM's cgroup).
drivers::RunResult ResultOf(const plan::Plan& plan, const SessionResult& s, uint64_t guest_mib,
                            uint64_t vmm_oom, const std::string& backend_mode);

std::string Ms(std::chrono::nanoseconds d);

}  // namespace safex::microvm
