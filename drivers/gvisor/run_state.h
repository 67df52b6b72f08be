// Everything one gVisor run holds on the host, in teardown order, and the small pieces the run's
// steps share (run_steps.h). RunState's destructor tears everything down, so that every way out
// of GvisorDriver::Run, errors included, leaves nothing behind.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/gvisor/stdio_files.h"
#include "drivers/net/run_network.h"
#include "drivers/output_capture.h"
#include "drivers/run_dir.h"
#include "drivers/run_outputs.h"
#include "drivers/sigpipe_block.h"

namespace safex::drivers::gvisor {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
Result<Pipe> MakePipe();  // both ends close-on-exec
Status SetNonBlocking(int fd);

// Reads what the non-blocking `fd` has now into `into`, keeping its last `keep` bytes (whole
// lines; 0: nothing); false at EOF or on an error (the writer is gone, `fd` is closed).
bool DrainInto(UniqueFd& fd, std::string* into, size_t keep);

// The last non-empty line of runsc's diagnostics (its error, if it failed).
std::string LastLine(const std::string& text);

struct RunState {
  std::string runsc_path;
  std::string run_id;
  std::string state_dir;  // runsc --root of this run
  std::string bundle;
  PrivateDir dir;                          // <state root>/<run id>, 0700
  TmpfsMount bundle_fs;                    // mounted at `bundle` (CreateRunDirectory)
  UniqueFd owner_lock;                     // flock'ed for the whole run (see CleanupStale)
  StdioFiles stdio;                        // the program's stdout and stderr (stdio_files.h)
  RunOutputs outputs;                      // one size-capped tmpfs per kOutput mount
  std::vector<std::string> mount_sources;  // host source of each plan mount ("" for tmpfs)
  cgroup::RunCgroup cg;
  cgroup::Limits cg_limits;  // what was written to it for the plan
  uint64_t pids_backstop = 0;
  // CPU the cgroup had used before the program was handed over (a pooled sandbox's boot and
  // idling): subtracted from every CPU figure of the run. 0 for a cold run.
  uint64_t cpu_baseline_ns = 0;
  // The cgroup's cpuset before it was narrowed to the plan's CPUs (visible_cpus.h), put back
  // before the program starts; "" when nothing was narrowed.
  std::string cpuset_restore;
  // A pooled sandbox waits frozen (Park): thawed at its hand-over and before it is stopped.
  bool frozen = false;  // Park and Unpark keep it
  std::unique_ptr<net::RunNetwork> net;
  Subprocess runsc;
  bool sandbox_stopped = false;
  bool torn_down = false;
  std::string errors;  // what teardown could not remove (a leak the operator must see)

  void Note(const std::string& what, const Status& st);
  std::vector<std::string> Runsc(std::initializer_list<std::string> args) const;

  // Freezes the run's cgroup (run_steps.h, step 6b''); best effort: without a freezer the
  // sandbox waits as it is, not frozen.
  void Park();
  // Thaws a parked sandbox (for its hand-over, a session's, or its end); nothing if not parked.
  Status Unpark();

  // Ends every process of the run and removes runsc's state. Safe to call more than once.
  void StopSandbox(std::chrono::milliseconds grace);
  // Removes what is left, in reverse order of creation. Outputs must have been collected.
  void Teardown(std::chrono::milliseconds grace);
  ~RunState() { Teardown(std::chrono::milliseconds(2000)); }
};

}  // namespace safex::drivers::gvisor
