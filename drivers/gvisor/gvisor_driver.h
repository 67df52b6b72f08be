// GvisorDriver: runs each request in a fresh gVisor sandbox (runsc) and destroys it afterwards.
//
// Per run, under <state_root>/<run-id>/ (a private 0700 directory):
//   bundle/config.json   the OCI spec built from the plan (oci_spec.h)
//   bundle/rootfs/       a fresh, empty, read-only root with only mount points and a minimal /etc
//   state/               runsc --root: this run's runsc state, never shared with another run
//   out/<n>/             one fresh size-capped host tmpfs per kOutput mount, bound into the sandbox
//   input-empty/         an empty read-only directory for a kInput mount when no input_dir is given
//   owner.lock           flock'ed by the running supervisor (CleanupStale skips live runs)
// plus a cgroup <cgroup_parent>/<run-id> in every hierarchy (pre-created with the plan's limits, so
// runsc only joins it and never creates or removes cgroups itself).
//
// runsc is started as `runsc --root=... --network=none --oci-seccomp --platform=... run`; the
// container's stdin/stdout/stderr are passed with --pass-fd so runsc's own messages never mix with
// the program's output. See docs/gvisor-notes.md for what runsc does and does not enforce and how
// each limit is implemented and detected.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/net/network_provider.h"
#include "plan/backend_settings.h"
#include "plan/plan.h"

namespace safex::drivers {

namespace gvisor {
struct RunState;
struct RunContext;
struct RunIo;
struct SeccompOptions;
enum class LaunchOutcome;
}  // namespace gvisor

struct GvisorOptions {
  // Defaults: the host config's (plan/backend_settings.h), so each default is written once.
  std::string runsc_path = plan::GvisorBackendSettings().runsc;
  // The platforms the host offers (host config `backends { gvisor { platforms } }`).
  std::set<std::string> platforms = plan::GvisorBackendSettings().platforms;
  // Parent of every run's private directory (runsc state, bundle, output tmpfs).
  std::string state_root = "/run/safex";
  // Relative cgroup path under each hierarchy's root that holds the runs' cgroups.
  std::string cgroup_parent = "safex";
  std::string cgroup_root = "/sys/fs/cgroup";
  // Oldest runsc accepted (the date in its version). 20240729 is the first release known to work
  // on this kernel (older ones fail statx inside the sandbox).
  int min_runsc_date = 20240729;
  // The host pids cgroup is only a backstop (gVisor's own threads and stubs count against it; the
  // plan's process limit is RLIMIT_NPROC inside): pids.max = base + per_pid * limits.pids.
  uint64_t pids_backstop_base = 512;
  uint64_t pids_backstop_per_pid = 8;
  // How often CPU time and OOM kills are read from the cgroup while a run is live.
  std::chrono::milliseconds poll_interval{20};
  // After the sandbox is killed: how long runsc may take to exit before it is SIGKILLed.
  std::chrono::milliseconds kill_grace{2000};
  // Limit on runsc's own diagnostics kept in memory (its stderr).
  size_t diagnostics_cap = 16 * 1024;
  // The launcher's directory (gvisor/launch_report.h); "" : found next to this binary or where
  // packaging installs it. Without a launcher every run is refused.
  std::string launcher_dir;
  // How long the launcher may take to report once runsc is started (the sandbox's boot).
  std::chrono::milliseconds launch_timeout{60000};
  // Required for plans that grant egress; runs with egress are refused without it.
  net::NetworkProvider network_provider;
};

class GvisorDriver : public Driver {
 public:
  explicit GvisorDriver(GvisorOptions options = {});
  ~GvisorDriver() override;

  const char* name() const override { return "gvisor"; }

  // runsc present and executable, version >= min_runsc_date, cgroups (v1 or v2) with memory,
  // pids, cpu writable under cgroup_parent, state_root creatable. Unavailable otherwise.
  Status Probe() override;
  // The quick check alone (runsc the same file, the launcher there) while a full probe has
  // passed since the last failure; a full probe otherwise.
  Status ProbeForMadeSandbox() override;

  // Besides the common checks: every argv string and environment value must be UTF-8. The
  // program reaches runsc through the OCI config.json, a JSON file, and runsc's decoder replaces
  // invalid bytes with U+FFFD: the program would get argv it was not given. Refused instead.
  Status CheckRequest(const plan::Plan& plan, const RunRequest& request) const override;

  Result<RunResult> Run(const plan::Plan& plan, const RunRequest& request) override;

  // The warm pool (drivers/driver.h): the sandbox of a cold run up to the launcher's go-ahead
  // (run_steps.h 1-6b, the launcher in its --pool mode), and the hand-over to it (6c) followed by
  // the rest of a cold run (7-10). pooled_sandbox.h holds what waits in between.
  Result<std::unique_ptr<PreparedSandbox>> Prepare(const plan::Plan& plan,
                                                   const PrepareRequest& request) override;
  Result<RunResult> RunPrepared(std::unique_ptr<PreparedSandbox> sandbox, const plan::Plan& plan,
                                const RunRequest& request) override;
  // Sessions (drivers/driver.h): the sandbox of a cold run up to the launcher's go-ahead
  // (run_steps.h 1-6b, the launcher in its --session mode), kept as a gvisor::GvisorSession
  // (session_sandbox.h) whose init runs each command.
  Result<std::unique_ptr<SessionSandbox>> OpenSession(const plan::Plan& plan,
                                                      const PrepareRequest& request) override;
  // A pooled sandbox (pooled_sandbox.h) handed 's': its launcher becomes the session's init.
  Result<std::unique_ptr<SessionSandbox>> OpenPreparedSession(
      std::unique_ptr<PreparedSandbox> sandbox, const plan::Plan& plan) override;
  // runsc's file identity (device, inode, size, mtime) and each bind source's (device, inode,
  // mtime): a replaced runsc or mount source changes it. A package upgrade that rewrites files
  // deep below a bound directory without touching the directory itself does not.
  std::string SandboxGeneration(const plan::Plan& plan) override;

  // Crash recovery (the daemon calls it at start): removes what the runs of a supervisor that
  // died left behind under state_root: runsc containers (delete --force), their cgroups (killing
  // anything still in them), output mounts and the private directories. A run still owned by a
  // live process (it holds an flock on <run dir>/owner.lock for the whole run) is left alone.
  // `cleaned` gets the number of run directories removed.
  Status CleanupStale(int* cleaned = nullptr) override;
  // The same for one run whose owner is known to be dead (a durable run record whose lock is
  // free): its directory is taken even without a lock file, and a cgroup left without a
  // directory is removed. A run whose owner.lock is held is still left alone. `cleaned`:
  // something was removed.
  Status CleanupStaleRun(const std::string& run_id, bool* cleaned = nullptr) override;

  // After a successful Probe: "0.0~20240729.0" and the cgroup version in use.
  std::string runsc_version() const;
  std::optional<cgroup::Version> cgroup_version() const;

 private:
  struct Ready {
    std::string runsc_version;
    std::string runsc_sha256;  // of the binary probed (runsc_version_cache.h)
    int runsc_date = 0;
    std::string launcher_dir;
    cgroup::CgroupHost cgroups;
    std::string runsc_identity;  // PathIdentity of runsc when it was probed
    std::chrono::steady_clock::time_point probed_at;
  };
  Result<Ready> EnsureReady();
  // The quick check when the last full probe passed less than `stands_for` ago; else a full one.
  Status ProbeUnlessStanding(std::chrono::steady_clock::duration stands_for);
  // A boot from `ready` got as far as its launcher's report: it made a cgroup with every limit
  // and its directory in the state root, and runsc ran. That is all a full probe checks, so the
  // probe counts as passed now (Probe within kProbeFresh of it stays a quick check).
  void ProbedByBoot(const Ready& ready);
  Status CleanRunDir(const Ready& ready, const std::string& name, const std::string& dir);
  RunResult RefusedByEvidence(RunResult result, gvisor::RunState& s) const;
  // What the plan asks of this backend that it may not offer (the platform, env bytes).
  Status CheckPlan(const plan::Plan& plan) const;
  // Steps 1-6b of a run (or of a pooled sandbox's boot, c.pooled), into `s` and `io`.
  // nullopt: refused on the evidence before runsc started.
  Result<std::optional<gvisor::LaunchOutcome>> Boot(const gvisor::RunContext& c, const Ready& ready,
                                                    const gvisor::SeccompOptions& seccomp,
                                                    bool filtered, gvisor::RunState& s,
                                                    gvisor::RunIo& io, RunResult* result);
  // Steps 0-6b of a sandbox made before its program is known (gvisor_driver.cc).
  Status BootAhead(const plan::Plan& plan, const PrepareRequest& preq, bool session,
                   const char* what, gvisor::RunState& s, gvisor::RunIo& io, RunResult* boot,
                   bool* filtered);
  // Steps 7-10 once the program was let go (or its launcher stopped short).
  Result<RunResult> Finish(const gvisor::RunContext& c, gvisor::LaunchOutcome launched,
                           gvisor::RunIo& io, gvisor::RunState& s, RunResult result);

  GvisorOptions options_;
  mutable std::mutex mu_;
  std::optional<Ready> ready_;  // guarded by mu_
};

}  // namespace safex::drivers
