// NativeDriver: runs trusted code on the host kernel, in a fresh process tree per run, as
// nsjail and bubblewrap do, with safex's limits, evidence and audit. Only for plans whose
// `trust = trusted` on hosts whose config lists `native`: the compiler refuses anything else,
// and this driver refuses it again. docs/native.md has the threat model: a kernel bug here is a
// host compromise, which is why untrusted code never gets this backend.
//
// Per run:
//   <state_root>/native/<run-id>/      a private 0700 directory, owner.lock flock'ed for the run
//     root/                            the fresh root: mount points and a minimal /etc
//     out/<n>/                         one size-capped host tmpfs per output mount
//     input-empty/                     a read-only stand-in when the request has no input
//   <state_root>/native-ids/<id>       the run's host uid/gid, flock'ed (id_lease.h)
//   <cgroup_parent>/native-<run-id>    in every hierarchy: memory, pids, CPU limits and accounting
//   the run's network namespace, veth and nftables rules when the plan grants egress (net/)
// The sandbox itself (sandbox_child.h): new pid, mount, ipc, uts, network, user and cgroup
// namespaces; the plan's mounts on the fresh root and pivot_root into it; the plan's uid and gid
// inside mapped to the run's own host id; no capabilities, no_new_privs, Landlock, the plan's
// seccomp filter; the program as pid 1 of its pid namespace.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/net/network_provider.h"
#include "plan/backend_settings.h"
#include "plan/plan.h"

namespace safex::drivers {

namespace native {
struct RunState;
}

struct NativeOptions {
  // Parent of the native runs' directories (<state_root>/native) and id leases.
  std::string state_root = "/run/safex";
  std::string cgroup_parent = "safex";
  std::string cgroup_root = "/sys/fs/cgroup";
  // The host ids of runs and Landlock (host config `backends { native { } }`).
  plan::NativeBackendSettings settings;
  // Test seam: the Landlock ABI to use instead of the kernel's (0: as if the kernel had none).
  std::optional<int> landlock_abi;
  // How often CPU time is read from the cgroup while a run is live.
  std::chrono::milliseconds poll_interval{20};
  // How long the sandbox may take to set itself up before the program starts.
  std::chrono::milliseconds setup_timeout{30000};
  // Required for plans that grant egress; such runs are refused without it.
  net::NetworkProvider network_provider;
};

class NativeDriver : public Driver {
 public:
  explicit NativeDriver(NativeOptions options = {});
  ~NativeDriver() override;

  const char* name() const override { return "native"; }

  // User namespaces (and the others of a run but the network's, once per process), cgroups (v1
  // or v2) with memory, pids and cpu, seccomp filters; the id range free of host accounts;
  // Landlock when the host requires it. Unavailable otherwise: every native run is then refused,
  // never run with less. What it does not check (a state root, a network namespace) fails the
  // run's own steps, before the program, all the same.
  Status Probe() override;

  // Besides the common checks: the plan must be for trusted code (the compiler's rule, checked
  // again here) and for this backend.
  Status CheckRequest(const plan::Plan& plan, const RunRequest& request) const override;

  Result<RunResult> Run(const plan::Plan& plan, const RunRequest& request) override;

  // Crash recovery: the run directories, cgroups and output mounts of runs whose owner died.
  Status CleanupStale(int* cleaned = nullptr) override;
  Status CleanupStaleRun(const std::string& run_id, bool* cleaned = nullptr) override;

  // After a successful Probe: the Landlock ABI in use (0: none).
  int landlock_abi() const;

 private:
  struct Ready {
    cgroup::CgroupHost cgroups;
    int landlock_abi = 0;
  };
  Result<Ready> EnsureReady();
  Status CleanRunDir(const Ready& ready, const std::string& run_id, const std::string& dir);
  std::string RunsDir() const { return options_.state_root + "/native"; }
  std::string IdsDir() const { return options_.state_root + "/native-ids"; }

  NativeOptions options_;
  mutable std::mutex mu_;
  std::optional<Ready> ready_;  // guarded by mu_
};

}  // namespace safex::drivers
