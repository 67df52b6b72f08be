// The plain records the supervisor hands to the audit log. They name no plan or driver type:
// audit depends only on common, so the supervisor copies what it knows into these.
//
// Times are unix nanoseconds (CLOCK_REALTIME); 0 means "now, when the event is appended".
// Strings are stored byte for byte (argv may hold any bytes but NUL).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/verdict.h"

namespace safex::audit {

// Who asked for the run: SO_PEERCRED for the daemon, getuid()/getgid()/getpid() for the CLI.
struct Requester {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<int32_t> pid;

  bool operator==(const Requester&) const = default;
};

// Written (and committed) before the sandbox starts.
struct RunStart {
  std::string run_id;  // unique; [A-Za-z0-9._:-], at most 128 characters (NewRunId())
  Requester requester;
  std::string policy_name;
  std::string policy_source_digest;  // SHA-256 hex of the policy source
  std::string plan_digest;           // SHA-256 hex of the canonical plan
  std::string backend;               // gvisor | microvm | native
  std::string backend_mode;          // e.g. "systrap", "tcg", "kvm"
  std::vector<std::string> argv;
  int64_t start_time_ns = 0;
  // Why the run was made, when not for a caller's own work: "test POLICY/NAME" for a policy's
  // test run by `safex test`, "probe POLICY/NAME" for a built-in probe; "session ID exec N" for
  // the Nth run in an agent session (SessionExecPurpose). Empty: an ordinary run.
  std::string purpose;
};

// A captured output stream: bytes kept, their SHA-256, and whether the cap cut it short.
struct StreamSummary {
  uint64_t bytes = 0;
  std::string sha256;  // lowercase hex of the captured bytes
  bool truncated = false;

  bool operator==(const StreamSummary&) const = default;
};

struct ValidatorResult {
  std::string name;     // e.g. "stdout", "file:/data/out/result.json"
  std::string outcome;  // e.g. "accepted", "rejected", "redacted", "truncated"
  std::string detail;   // why, for a human

  bool operator==(const ValidatorResult&) const = default;
};

// Connection attempts the network layer dropped, per destination.
struct DeniedEgress {
  std::string destination;  // "198.18.0.7:443/tcp" or a name
  uint64_t count = 0;

  bool operator==(const DeniedEgress&) const = default;
};

// Written (and committed) after the sandbox is gone, before the result is reported.
struct RunEnd {
  std::string run_id;  // must name a run whose start is in the log and that has not ended
  int64_t end_time_ns = 0;
  std::optional<int32_t> exit_code;  // the program's own status, when it exited
  std::optional<int32_t> signal;     // the signal that killed it, when it was killed
  Verdict verdict = Verdict::kOk;
  // Which limits fired, by the plan's names: wall_time, cpu_time, memory, pids, open_files,
  // output, disk.
  std::vector<std::string> limits_fired;
  uint64_t wall_ns = 0;
  uint64_t cpu_ns = 0;
  uint64_t peak_memory_bytes = 0;
  StreamSummary stdout_summary;
  StreamSummary stderr_summary;
  std::vector<ValidatorResult> validator_results;
  std::vector<DeniedEgress> denied_egress;
  std::string error;  // setup-error detail; empty otherwise
  // What the run enforced, read back from the kernel and the runtime after set-up (JSON;
  // docs/audit.md "Evidence"). Empty: not recorded.
  std::string enforcement;
};

// A request refused before anything ran (bad policy, ceilings, busy, unwritable state...).
struct Refusal {
  std::string run_id;  // the id the request was given; NewRunId() when empty
  Requester requester;
  std::string policy_name;           // empty when the policy could not even be named
  std::string policy_source_digest;  // empty when unknown
  std::string plan_digest;           // empty when no plan was compiled
  std::vector<std::string> argv;
  std::string reason;  // required: why it was refused
  int64_t time_ns = 0;
  std::string purpose;  // as RunStart::purpose
};

// Someone read what a run left: the service's file downloads (docs/api.md). The run must be in
// the log already. The event records who (SO_PEERCRED), when and what ("fetched file NAME:
// N bytes, SHA-256 H"); it changes nothing about the run.
struct Access {
  std::string run_id;
  Requester requester;
  std::string what;  // required
  int64_t time_ns = 0;
};

// A sandbox of the service's warm pool (supervisor/serve/sandbox_pool.h) was made, or was
// destroyed without serving a run. A sandbox that served a run has no eviction: the run's end
// event names it (its evidence's `sandbox` field).
struct SandboxEvent {
  enum class What { kMade, kEvicted };
  std::string sandbox_id;  // as a run id; one `made` per id, then at most one `evicted`
  What what = What::kMade;
  Requester requester;  // the service process
  std::string policy_name;
  std::string plan_digest;  // SHA-256 hex of the plan it was made from
  std::string backend;
  std::string backend_mode;
  std::string enforcement;  // made: what it enforced, read back (as RunEnd::enforcement)
  std::string reason;       // evicted: why (required), e.g. "idle longer than max_idle (10m)"
  int64_t time_ns = 0;
};

// An agent session (supervisor/serve: POST /v1/sessions): one sandbox for one caller's task.
// Opened once on an id new to the log, then files in and out and exec runs (RunStart::purpose =
// SessionExecPurpose()) from the opener's uid only, then closed once; nothing after the close.
struct SessionEvent {
  enum class What { kOpened, kFileIn, kFileOut, kClosed };
  std::string session_id;  // as a run id; also the id of the session's sandbox
  What what = What::kOpened;
  // The caller (opened, files); closed: whoever closed it (the caller, or the service).
  // Opened: the uid is required (a session serves one caller).
  Requester requester;
  std::string policy_name;   // opened
  std::string plan_digest;   // opened: SHA-256 hex of the plan it runs (required for opened)
  std::string backend;       // opened
  std::string backend_mode;  // opened
  std::string enforcement;   // opened: what its sandbox enforced (JSON, as RunEnd::enforcement)
  // closed: why (required), e.g. "deleted by the caller", "idle longer than 5m", "service
  // restarted"; file-in / file-out: the path (required).
  std::string reason;
  uint64_t file_bytes = 0;  // file-in / file-out: size
  std::string file_sha256;  // file-in / file-out: lowercase hex SHA-256 (required for files)
  int64_t time_ns = 0;
};

// The RunStart::purpose of a session's exec run: "session SESSION_ID exec N", N = 1, 2, ... in
// the order the session's runs start. The log refuses a start whose purpose begins "session "
// unless it is exactly this form, for an open session, from its opener's uid, with the next N.
std::string SessionExecPurpose(const std::string& session_id, uint64_t index);
// Inverse of SessionExecPurpose: true only for exactly that form (a valid run id, N >= 1 in
// decimal without leading zeros); the outputs are set only then.
bool ParseSessionExecPurpose(std::string_view purpose, std::string* session_id, uint64_t* index);

// A run that started and never ended: the service's crash recovery closes it with this.
struct Interrupted {
  std::string run_id;  // must name a started, unended run
  std::string reason;  // e.g. "supervisor restarted"
  int64_t time_ns = 0;
};

}  // namespace safex::audit
