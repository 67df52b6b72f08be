// Everything one native run holds on the host, and its teardown in reverse order of creation.
// RunState's destructor tears down whatever exists, so that every way out of NativeDriver::Run,
// errors included, leaves nothing behind.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/native/id_lease.h"
#include "drivers/native/sandbox_launch.h"
#include "drivers/net/run_network.h"
#include "drivers/run_dir.h"
#include "drivers/run_outputs.h"

namespace safex::drivers::native {

// The cgroup of a run, below the delegated parent.
std::string CgroupName(const std::string& run_id);

struct RunState {
  std::string run_id;
  IdLease id;                              // released last: nothing of the run may hold it then
  PrivateDir dir;                          // <state_root>/native/<run id>, 0700
  UniqueFd owner_lock;                     // flock'ed for the whole run (CleanupStale skips it)
  std::vector<std::string> mount_sources;  // host side of each plan mount ("" for tmpfs)
  RunOutputs outputs;                      // one size-capped tmpfs per kOutput mount
  cgroup::RunCgroup cg;
  cgroup::Limits cg_limits;
  std::unique_ptr<net::RunNetwork> net;
  Sandbox sandbox;
  bool torn_down = false;
  std::string errors;  // what teardown could not remove (a leak the operator must see)

  void Note(const std::string& what, const Status& st);
  // Kills every process of the run (the first one through its pidfd, which ends the pid
  // namespace, then whatever is in the cgroup) and reaps the first.
  void KillAll();
  // Removes what is left, in reverse order of creation. Outputs must have been collected.
  void Teardown();
  ~RunState() { Teardown(); }
};

}  // namespace safex::drivers::native
