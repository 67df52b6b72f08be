// The isolation backend interface. One Driver per backend (gvisor/, microvm/, native/); the
// supervisor picks one by plan.backend and never falls back to another: an unusable backend is a
// refusal (Status::Unavailable), never a weaker run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "drivers/enforcement.h"
#include "plan/plan.h"

namespace safex::drivers {

// Called once per kOutput mount after every process of the run is gone and before the run's
// storage is destroyed. `dirfd` is an O_DIRECTORY fd of the mount's root as the host sees it
// (a fresh, size-capped tmpfs the driver made for this run). The supervisor collects output
// files fd-relative from it (supervisor/output). Must not keep dirfd after returning.
using OutputCollector = std::function<void(const plan::Mount& mount, int dirfd)>;

// Called with the bytes of stdout (`which` 0) or stderr (1) as the capture keeps them, in order,
// while the run goes on (the service streams validated output from them). Runs on the driver's
// supervising thread: it must be quick and must not throw. Bytes past the output cap are never
// passed. Every backend calls it as the bytes arrive on the host (gVisor and native from the
// program's pipes or files, microvm from the agent's frames).
using OutputObserver = std::function<void(int which, std::string_view bytes)>;

// What the caller asks to run under a (verified) plan.
struct RunRequest {
  std::string run_id;             // unique, [a-z0-9-]; names per-run resources
  std::vector<std::string> argv;  // passed verbatim to execve inside the sandbox; never a shell
  std::optional<std::string> stdin_data;  // bytes fed to stdin; /dev/null when absent
  std::string input_dir;                  // host dir for the plan's kInput mount ("" if none)
  OutputCollector collect_output;         // may be empty: outputs are then discarded
  OutputObserver on_output;               // may be empty
  // Cancellation: set non-zero (from any thread) to stop the run early, e.g. the supervisor was
  // told to stop (the value is the signal it got; drivers only test for non-zero). The driver
  // then kills the sandbox, tears everything down as it always does and returns a RunResult with
  // `interrupted` set. Checked at least every GvisorOptions::poll_interval. nullptr: never
  // cancelled. Must outlive Run().
  const std::atomic<int>* cancel = nullptr;
  // A session's command only (SessionSandbox::Exec): the caller's choices its policy allows
  // (plan::CallerChoices, checked by the caller), which a cold run carries in its derived plan
  // instead: variables added to or replacing the session's environment, a working directory
  // ("": the session's) and a shorter wall time (0: the session's plan's).
  struct CommandChoices {
    std::optional<std::map<std::string, std::string>> env;
    std::string cwd;
    uint64_t wall_time_ns = 0;
  };
  CommandChoices choices;
  // plan::PlanDigest of the plan the request runs under, when the caller has it (the supervisor
  // always does); "": the driver computes it. Only a pooled run reads it (RunPrepared's check).
  std::string plan_digest;
};

// Which limit stopped or constrained the run. kNone when the program ended on its own.
enum class LimitHit { kNone, kWallTime, kCpuTime, kMemory, kPids, kOutput, kDisk, kOpenFiles };
const char* LimitHitName(LimitHit l);

struct CapturedStream {
  std::string data;          // at most the plan's output cap
  uint64_t total_bytes = 0;  // bytes the program wrote before capture stopped
  bool truncated = false;
};

struct RunResult {
  // The program's own exit status when it exited; -1 otherwise.
  int exit_code = -1;
  // The signal that ended it (including kills by the supervisor at a limit); 0 otherwise.
  int term_signal = 0;
  LimitHit limit = LimitHit::kNone;
  std::string limit_detail;  // e.g. "fork failed with EAGAIN 31 times at pids = 32"
  uint64_t wall_ns = 0;
  uint64_t cpu_ns = 0;  // user + system CPU of the sandboxed code (cgroup accounting)
  uint64_t peak_memory_bytes = 0;
  CapturedStream stdout_stream;
  CapturedStream stderr_stream;
  std::string backend_mode;    // e.g. "gvisor/systrap/network=none", "microvm/tcg"
  uint64_t denied_egress = 0;  // packets dropped by the run's egress rules

  // The backend's own error when the program could not be started inside a sandbox that was set
  // up (e.g. argv[0] not found: exit_code 127) or the sandbox failed after the program started
  // (exit_code -1). Host-side text for the operator and the audit log, never shown as the
  // program's output. Empty normally.
  std::string backend_error;
  // fork/clone calls inside the sandbox that failed with EAGAIN at the process limit (observed
  // by the backend; 0 when the backend cannot observe them).
  uint64_t fork_failures = 0;
  // Calls of each syscall whose plan rule is SyscallAction::kLog (allowed, counted).
  std::map<std::string, uint64_t> logged_syscalls;
  // Non-empty when teardown could not remove something (a leak the operator must see).
  std::string teardown_error;
  // The run was stopped through RunRequest::cancel (term_signal is then SIGKILL).
  bool interrupted = false;
  // What the run enforced, read back after set-up and before the program started
  // (drivers/enforcement.h).
  Enforcement enforcement;
  // The read-back differed from the plan, so the program was never started:
  // enforcement.Differences() says how. The run ends refused.
  bool refused_by_enforcement = false;
};

// What every backend's Run refuses before anything exists: a plan for another backend, a run id
// that cannot name per-run resources, a plan with a limit unset (not verified), egress without a
// network provider (never run without the egress rules).
Status CheckRunnable(const plan::Plan& plan, const RunRequest& request, plan::Backend backend,
                     bool has_network_provider);

// What a sandbox made ahead of its request is made with (the service's warm pool,
// supervisor/serve/sandbox_pool.h): everything of a cold run but the program and its input.
struct PrepareRequest {
  std::string sandbox_id;  // [a-z0-9-] as a run id; names the sandbox's resources
  // Stops a boot in progress (the pool is stopping). nullptr: never. Must outlive Prepare().
  const std::atomic<int>* cancel = nullptr;
  // plan::PlanDigest of the plan, when the caller has it; "": the driver computes it.
  std::string plan_digest;
};

// The digest a request gives for `plan`, or the plan's own when it gives none. The callers'
// digests are of the very plan they pass (a derived plan's own digest included): spares a
// canonical JSON and a SHA-256 of the whole plan per pooled sandbox and per pooled run.
std::string PlanDigestOf(const plan::Plan& plan, const std::string& given);

// A sandbox booted from a plan, checked from inside (the same evidence as a cold run's) and
// waiting for the one request it will ever serve: its first process waits for the program's
// argv and stdin and then execs the program in its own place. Destroying it without a run tears
// everything down (nothing is left, nothing of any request ever entered it). Never reused: a
// sandbox that ran a program is gone when RunPrepared returns.
class PreparedSandbox {
 public:
  virtual ~PreparedSandbox() = default;
  const std::string& id() const { return id_; }
  // The digest of the plan it was made from (plan::PlanDigest); only that plan runs in it.
  const std::string& plan_digest() const { return plan_digest_; }
  int64_t created_ns() const { return created_ns_; }  // CLOCK_REALTIME when it became ready
  // Driver::SandboxGeneration when it was made: a sandbox of another generation is retired.
  const std::string& generation() const { return generation_; }
  // What it enforced, read back before it was declared ready.
  const Enforcement& enforcement() const { return enforcement_; }
  // Keeps the waiting sandbox serviceable (drains what its runtime writes) and says whether it
  // still is (false once its runtime exited). Called from time to time while it waits, from one
  // thread at a time.
  virtual bool Healthy() = 0;
  // Whether RunPrepared can give it a request's input directory (a pool hands a sandbox that
  // cannot to runs without one only).
  virtual bool TakesInput() const { return true; }

 protected:
  PreparedSandbox(std::string id, std::string plan_digest, std::string generation,
                  int64_t created_ns)
      : id_(std::move(id)),
        plan_digest_(std::move(plan_digest)),
        generation_(std::move(generation)),
        created_ns_(created_ns) {}
  Enforcement enforcement_;

 private:
  std::string id_;
  std::string plan_digest_;
  std::string generation_;
  int64_t created_ns_;
};

// An agent session's sandbox (Driver::OpenSession): booted from a plan as a cold run's is, with
// the same read-back, and kept for one caller's task: several commands, one after the other,
// each a child of the sandbox's own init (so each inherits the plan's seccomp filter, rlimits,
// uid and no_new_privs), and files written into and read out of its writable mounts between
// them. Destroying it tears everything down as a cold run's end does. Never handed to another
// session: the service keeps one per session id.
//
// Between commands nothing runs: when a command's process ends, every other process in the
// sandbox is killed and counted (RunResult::limit_detail says how many). The memory, pids and
// disk limits hold for the whole session (one cgroup, one set of tmpfs mounts); wall time, CPU
// time and the output cap are per command. Methods are called from one thread at a time.
class SessionSandbox {
 public:
  virtual ~SessionSandbox() = default;
  const std::string& id() const { return id_; }
  const std::string& plan_digest() const { return plan_digest_; }
  int64_t created_ns() const { return created_ns_; }  // CLOCK_REALTIME when it became ready
  const Enforcement& enforcement() const { return enforcement_; }
  // Runs `request` (argv, stdin, on_output, cancel; no input_dir: files come with WriteFile) as
  // the next command. The result is a run's: the wall clock starts now, cpu_ns and the output
  // are this command's alone. Non-ok when the command could not be started (the sandbox is gone,
  // a request it cannot carry); a limit that ended the whole sandbox (memory) is a result, and
  // the session is then no longer Alive().
  virtual Result<RunResult> Exec(const RunRequest& request) = 0;
  // Writes (creates or replaces) the regular file `path` (absolute, inside the sandbox) with
  // `bytes`, as the program's uid; missing directories are made. `mode` applies when the file is
  // created. Refused: a symlink anywhere on the path, a path that is not a regular file.
  virtual Status WriteFile(const std::string& path, std::string_view bytes, uint32_t mode) = 0;
  // Reads the regular file `path`, at most `max_bytes` (larger: ResourceExhausted).
  virtual Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) = 0;
  // Whether it can still run commands (its runtime is alive and answered its last command).
  virtual bool Alive() = 0;
  // What teardown could not remove so far ("" normally); final once the object is destroyed.
  virtual std::string Errors() const { return ""; }
  // For its opener to add what it knows of it (which pooled sandbox it was) before first use.
  Enforcement& MutableEnforcement() { return enforcement_; }

 protected:
  SessionSandbox(std::string id, std::string plan_digest, int64_t created_ns)
      : id_(std::move(id)), plan_digest_(std::move(plan_digest)), created_ns_(created_ns) {}
  Enforcement enforcement_;

 private:
  std::string id_;
  std::string plan_digest_;
  int64_t created_ns_;
};

// The largest stdin of a session command, and file written into a session (the sandbox's init
// holds each command whole).
inline constexpr uint64_t kMaxSessionPayloadBytes = 16 * 1024 * 1024;

// CLOCK_REALTIME now, in nanoseconds (a PreparedSandbox's created_ns).
int64_t RealtimeNs();
// One path's part of a Driver::SandboxGeneration: its device, inode and modification time (and
// size when `with_size`), or that it is missing.
std::string PathIdentity(const std::string& path, bool with_size);

class Driver {
 public:
  virtual ~Driver() = default;

  // Backend name as in plan::BackendName.
  virtual const char* name() const = 0;

  // Checks that the backend can run on this host right now (binary present and working, cgroups
  // writable, ...). A non-ok status means every run on this backend is refused with its message.
  virtual Status Probe() = 0;
  // The same for a run in a sandbox this backend already made and has checked (a pooled sandbox
  // from Prepare, a session's): only what such a run still depends on now. It makes nothing of
  // what Probe checks (cgroups, state, the runtime's start), so it need not pay Probe's test of
  // them. Falls back to Probe when no probe has passed since the last failure. Default: Probe.
  virtual Status ProbeForMadeSandbox() { return Probe(); }

  // Refuses, before anything exists, a request this backend cannot carry faithfully (e.g. argv
  // bytes its runtime's configuration format cannot hold). The supervisor calls it before the
  // run's start event, so such a request is a refusal, not a setup error. Cheap and pure.
  virtual Status CheckRequest(const plan::Plan& plan, const RunRequest& request) const;

  // Runs one request in a fresh sandbox and destroys it, leaving nothing behind (processes,
  // cgroups, mounts, namespaces, state, temp dirs) whatever happens.
  // REQUIRES: plan has been verified (plan::Verify) by the caller.
  // Returns non-ok only when nothing ran (setup error / refusal); a program that crashed, timed out
  // or hit a limit is a RunResult. An error's message says the cause in safex's words on its
  // first line; the backend's own text (runsc's error chain, QEMU's) may follow a newline: the
  // supervisor shows the caller the first line and keeps the rest for the audit record.
  // Thread-safety: concurrent Run calls on one Driver are allowed.
  virtual Result<RunResult> Run(const plan::Plan& plan, const RunRequest& request) = 0;

  // The warm pool. Prepare makes a sandbox from `plan` as Run would, up to the program: same
  // limits, mounts (an input mount gets an empty stand-in), seccomp filter, network and cgroups,
  // and the same read-back; it fails (nothing left) where Run would refuse or fail. RunPrepared
  // moves the request's input directory (a snapshot of the run's own, left empty) into that
  // stand-in, then runs `request` in it as the program (the wall clock starts now; the CPU used
  // by boot and idling is not the run's) and destroys it; the result is what Run would give. It
  // refuses a plan other than the one the sandbox was made from. Backends without a pool:
  // FailedPrecondition. The sandbox's processes carry a parent-death signal bound to the thread
  // that called Prepare: that thread must outlive the sandbox (the pool's boot threads live until
  // it stops).
  virtual Result<std::unique_ptr<PreparedSandbox>> Prepare(const plan::Plan& plan,
                                                           const PrepareRequest& request);
  virtual Result<RunResult> RunPrepared(std::unique_ptr<PreparedSandbox> sandbox,
                                        const plan::Plan& plan, const RunRequest& request);
  // Sessions (SessionSandbox above): a sandbox made from `plan` as Run would make it, up to the
  // program, whose init then serves commands. The sandbox's processes carry a parent-death signal
  // bound to the calling thread: that thread must outlive the session. Backends without
  // sessions: FailedPrecondition.
  virtual Result<std::unique_ptr<SessionSandbox>> OpenSession(const plan::Plan& plan,
                                                              const PrepareRequest& request);
  // The same from a warm pool's sandbox made from `plan` (Prepare): instead of a program's
  // hand-over, its first process becomes the session's init. The session's CPU accounting starts
  // now (the boot and the wait are not its). The parent-death signal stays bound to the thread
  // that prepared it. Backends without it: FailedPrecondition.
  virtual Result<std::unique_ptr<SessionSandbox>> OpenPreparedSession(
      std::unique_ptr<PreparedSandbox> sandbox, const plan::Plan& plan);
  // What a sandbox made from `plan` now depends on besides the plan: the runtime's binary and
  // version, the identity of the host paths the plan binds. The pool retires a waiting sandbox
  // whose generation is no longer the current one (a runsc upgrade, a replaced bind source).
  // Cheap (a few stat calls). "" for backends without a pool.
  virtual std::string SandboxGeneration(const plan::Plan& plan);
  // The memory a waiting sandbox made from `plan` may hold, for the pool's budget: the plan's
  // memory limit, or more where the backend's sandbox needs more than the program's share (a
  // microVM's guest RAM and VMM overhead).
  virtual uint64_t SandboxMemoryBytes(const plan::Plan& plan) const {
    return plan.limits.memory_bytes;
  }

  // Crash recovery: removes what runs of owners that died left behind (sandbox processes,
  // cgroups, mounts, state directories), and leaves runs whose owner lock is held alone.
  // Unavailable when the backend cannot work on this host at all (then no run of it can have
  // left anything). `cleaned` gets how many runs' leftovers were removed.
  virtual Status CleanupStale(int* cleaned) = 0;
  // The same for one run whose owner is known to be dead (a durable run record whose lock was
  // free): taken even without an owner lock of its own. `cleaned`: something was removed.
  virtual Status CleanupStaleRun(const std::string& run_id, bool* cleaned) = 0;
};

}  // namespace safex::drivers
