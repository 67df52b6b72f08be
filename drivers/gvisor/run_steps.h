// The steps of one gVisor run (GvisorDriver::Run is their script, in this order). Each takes the
// run's RunState, adds what it creates to it (so RunState's teardown removes it on every way
// out), and says why when it cannot.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/driver.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/gvisor/outcome.h"
#include "drivers/gvisor/run_state.h"
#include "drivers/gvisor/sandbox_log.h"
#include "plan/plan.h"

namespace safex::drivers::gvisor {

// What every step reads.
struct RunContext {
  const plan::Plan& plan;
  const RunRequest& req;
  const GvisorOptions& options;
  // Making a warm pool's sandbox (GvisorDriver::Prepare): req has no argv yet; the launcher
  // waits for the hand-over (HandOver) instead of a go-ahead, and stdin is always a pipe.
  bool pooled = false;
  // Opening a session's sandbox (GvisorDriver::OpenSession): req has no argv; the launcher runs
  // `--session` and stays the sandbox's init, serving commands (launch/session.c); the report
  // pipe stays open for its answers and stdin is /dev/null.
  bool session = false;
};

// The run's descriptors to and from `runsc run` (the program's stdout and stderr are files in
// RunState::stdio).
struct RunIo {
  std::optional<Pipe> stdin_pipe;  // when the request has stdin
  Pipe log;                        // runsc's debug log (the program's exit, fork failures)
  Pipe diag;                       // runsc's own stdout and stderr (its errors)
  Pipe report;                     // the launcher's report (we read), launch_report.h
  Pipe go;                         // the go-ahead to the launcher (we write one byte, or close)
  // What runsc wrote to the log and diagnostics pipes while a pooled sandbox waited
  // (pooled_sandbox.h): supervision reads it first, as if it had just arrived.
  std::string idle_log;
  std::string idle_diag;
};

// What the launcher said before the program could start (AwaitLauncher).
enum class LaunchOutcome {
  kStarted,   // its report matched the plan; the go-ahead was sent: the program runs
  kReady,     // (pooled, session) its report matched the plan; it waits for the hand-over
              // (pooled) or for commands (session)
  kRefused,   // its report differed: no go-ahead, the launcher exits 125 and nothing ran
  kNoReport,  // no complete report (runsc failed, or the launcher could not report): no go-ahead
};

// 1. The run's private directory (0700) with its owner lock, its bundle and its runsc state dir.
Status CreateRunDirectory(const RunContext& c, RunState& s);
// 2. The host side of every plan mount: bind sources checked, the input (or an empty read-only
//    stand-in), one size-capped tmpfs per output mount owned by the sandbox user.
Status PrepareMountSources(const RunContext& c, RunState& s);
// 3. The run's cgroup, pre-created with the limits: runsc joins it and owns nothing. Its cpuset
//    holds the plan's `cpus` CPUs until the sandbox has counted them (visible_cpus.h).
Status CreateCgroup(const RunContext& c, const cgroup::CgroupHost& cgroups, RunState& s);
// 4. No network, or the run's own namespace from the provider; the sandbox's /etc/hosts.
Result<std::string> CreateNetwork(const RunContext& c, RunState& s);
// What the kernel and runsc show of the run, read back once its cgroup and network exist and
// before runsc starts the program (drivers/enforcement.h); what lives in the Sentry is marked
// not observed, with the probe that tests it.
void ReadBackEnforcement(const std::string& runsc_version, const std::string& runsc_sha256,
                         RunState& s, Enforcement* e);
// 5. The bundle: the fresh root (mount points and a minimal /etc) and config.json.
Status WriteBundle(const RunContext& c, const std::string& hosts, const SeccompOptions& seccomp,
                   const std::string& launcher_dir, RunState& s);
// 6. The program's stdout/stderr files, the pipes, and `runsc run` itself (runsc_command.h).
Result<RunIo> StartRunsc(const RunContext& c, RunState& s);
// 6b. The launcher's report, read back before the program starts (with the run's cancel flag and
//     a deadline), added to the evidence and compared; the cgroup's cpuset widened again
//     (visible_cpus.h); the go-ahead only when nothing differs.
//     The platform comes from the host kernel meanwhile: the sandbox process's command line.
LaunchOutcome AwaitLauncher(const RunContext& c, bool filtered, RunIo& io, RunState& s,
                            Enforcement* e);
// 6b'. (pooled) The request's input directory, a snapshot of its own, moved into the empty
//     stand-in of the plan's input mount that the sandbox was booted with (MoveInputInto);
//     nothing for a request without one. Before the hand-over: the program starts with it whole.
Status PlaceInput(const RunContext& c, RunState& s);
// 6b''. (pooled) Once its launcher has reported, the waiting sandbox is frozen (its cgroup's
//     freezer, as `runsc pause`): an idle Sentry on systrap still uses some 20-50 ms of CPU a
//     second (its timers), which a pool of several would take from running sandboxes. Best
//     effort: without a freezer the sandbox waits as it is. RunState::Park; RunState::Unpark
//     thaws it (for its hand-over, a session's, or its end), as StopSandbox does first.
// 6c. (pooled) The hand-over to a sandbox that waited: thawed (RunState::Unpark), its CPU share
//     back to normal (it booted and waited at a low one, CreateCgroup), what it used so far
//     becomes the baseline (the CPU of boot and idling is not the run's; the memory high-water
//     mark starts again where the kernel can reset it), then the launcher gets the program's
//     argv and whether stdin is the pipe or /dev/null, and execs it (launch/safex-launch.c).
Status HandOver(const RunContext& c, RunIo& io, RunState& s);
// 7. Until every process of the run is gone: stdin fed, output captured (the cap stops the run),
//    the wall deadline, CPU time and OOM kills from the cgroup, cancellation. Then whatever was
//    still written is drained.
Observation Supervise(const RunContext& c, RunIo& io, RunState& s, RunResult* result);
// What runsc's debug log (into `scanner`) or, without a scanner, its diagnostics pipe (into
// `diag`, at most `cap` bytes) has now: at most 16 reads, so one stream cannot starve the others
// of a poll loop; `fd` is closed at EOF or on an error. (Supervise's, and a session command's.)
void ReadRunscPipe(UniqueFd& fd, SandboxLogScanner* scanner, std::string* diag, size_t cap);
// 8. The cgroup's and the debug log's counters after the run, into the observation and result.
void ReadAccounting(const RunContext& c, RunState& s, Observation* o, RunResult* result);
// 9. Each output mount handed to the request's collector (every process is gone; the storage
//    still exists).
void CollectOutputs(const RunContext& c, RunState& s);

}  // namespace safex::drivers::gvisor
