// The host side of a run's plan mounts that the backends bind into their sandbox (gVisor, native):
// one fresh, size-capped tmpfs per output mount below the run's private directory, and the input
// (the request's snapshot, or an empty read-only stand-in). After the run, the outputs are handed
// to the request's collector and unmounted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "drivers/driver.h"
#include "drivers/run_dir.h"
#include "plan/plan.h"

namespace safex::drivers {

// The host directory of the plan's input mount: `input_dir` (an existing absolute directory), or
// an empty read-only directory made in `run_dir` when the request has none.
Result<std::string> InputSource(const std::string& input_dir, const std::string& run_dir);

// A pooled sandbox's input (the warm pool): the entries of `snapshot` (the run's own input
// snapshot, staged by the supervisor) are moved into `dest`, the empty stand-in the sandbox was
// booted with, which its runtime has held bound since the boot (so the directory itself must stay:
// a new one under the same name would not be seen). Its mode and owner become the snapshot's, as
// in a cold run where the snapshot itself is bound. Renames only: both must be on one filesystem
// (FailedPrecondition otherwise, nothing moved). `snapshot` is left empty.
// Security: both are root's directories below 0700 state directories no other user can enter;
// each is opened O_NOFOLLOW|O_DIRECTORY and the entries are moved fd-relative with
// RENAME_NOREPLACE, so nothing but the two opened directories is touched.
Status MoveInputInto(const std::string& snapshot, const std::string& dest);

class RunOutputs {
 public:
  using Note = std::function<void(const std::string& what, const Status& st)>;

  // A fresh tmpfs for plan mount `m` (index `index` of the plan's mounts) at run_dir/out/<n>,
  // nosuid, nodev, noexec, its root owned by uid:gid (the sandbox's user) with mode 0700.
  // Returns its host path.
  Result<std::string> Add(const std::string& run_dir, const plan::Mount& m, size_t index,
                          uid_t uid, gid_t gid);
  bool empty() const { return mounts_.empty(); }

  // The output mounts that were full when the run ended (target, size), in plan order.
  std::vector<std::pair<std::string, uint64_t>> Full(const plan::Plan& plan) const;
  // Hands each mount's root to `collect` (REQUIRES: every process of the run is gone); a root
  // that cannot be opened is given to `note`.
  void Collect(const plan::Plan& plan, const OutputCollector& collect, const Note& note);
  // Unmounts every one; failures go to `note`.
  void UnmountAll(const Note& note);

 private:
  std::vector<TmpfsMount> mounts_;
  std::vector<size_t> plan_index_;  // plan mount index of each
};

}  // namespace safex::drivers
