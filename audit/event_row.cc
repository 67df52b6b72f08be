#include "audit/event_row.h"

#include <charconv>
#include <limits>

#include "audit/json_bytes.h"

namespace safex::audit {
namespace {

constexpr std::array<std::string_view, kNumEventColumns> kColumnNames = {
    "seq",
    "kind",
    "run_id",
    "time_ns",
    "uid",
    "gid",
    "pid",
    "policy_name",
    "policy_source_digest",
    "plan_digest",
    "backend",
    "backend_mode",
    "argv",
    "exit_code",
    "signal",
    "verdict",
    "limits_fired",
    "wall_ns",
    "cpu_ns",
    "peak_memory_bytes",
    "stdout_bytes",
    "stdout_sha256",
    "stdout_truncated",
    "stderr_bytes",
    "stderr_sha256",
    "stderr_truncated",
    "validator_results",
    "denied_egress",
    "reason",
    "purpose",
    "enforcement",
};

Result<int64_t> EventTime(int64_t t, int64_t now_ns) {
  if (t < 0) return Status::InvalidArgument("audit: negative event time");
  return t == 0 ? now_ns : t;
}

Result<int64_t> Signed(uint64_t v, const char* what) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::InvalidArgument(std::string("audit: ") + what + " does not fit in int64");
  }
  return static_cast<int64_t>(v);
}

Status CheckRunId(const std::string& id) {
  if (!IsValidRunId(id)) {
    return Status::InvalidArgument(
        "audit: run id must be 1..128 characters of [A-Za-z0-9._:-], got \"" +
        (id.size() > 64 ? id.substr(0, 64) + "..." : id) + "\"");
  }
  return Status::Ok();
}

Status CheckDigest(const std::string& d, const char* what) {
  // Digests are lowercase hex when known; anything else would hint at a caller mixing fields up.
  if (d.size() > 128) return Status::InvalidArgument(std::string("audit: ") + what + " too long");
  for (char c : d) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return Status::InvalidArgument(std::string("audit: ") + what + " is not lowercase hex");
    }
  }
  return Status::Ok();
}

void SetRequester(EventRow* row, const Requester& r) {
  if (r.uid) row->values[kColUid] = static_cast<int64_t>(*r.uid);
  if (r.gid) row->values[kColGid] = static_cast<int64_t>(*r.gid);
  if (r.pid) row->values[kColPid] = static_cast<int64_t>(*r.pid);
}

Status SetStream(EventRow* row, const StreamSummary& s, EventColumn bytes, EventColumn sha,
                 EventColumn truncated, const char* what) {
  SAFEX_ASSIGN_OR_RETURN(row->values[bytes], Signed(s.bytes, what));
  SAFEX_RETURN_IF_ERROR(CheckDigest(s.sha256, what));
  row->values[sha] = s.sha256;
  row->values[truncated] = int64_t{s.truncated ? 1 : 0};
  return Status::Ok();
}

// The version 2 columns stay NULL when unused, so the row keeps its version 1 encoding.
void SetOptionalText(EventRow* row, EventColumn c, const std::string& text) {
  if (!text.empty()) row->values[c] = text;
}

}  // namespace

std::span<const std::string_view> EventColumnNames() { return kColumnNames; }

int64_t EventRow::seq() const { return integer(kColSeq).value_or(0); }

std::string_view EventRow::text(EventColumn c) const {
  if (const auto* s = std::get_if<std::string>(&values[c])) return *s;
  return {};
}

std::optional<int64_t> EventRow::integer(EventColumn c) const {
  if (const auto* i = std::get_if<int64_t>(&values[c])) return *i;
  return std::nullopt;
}

Result<EventRow> RowFromStart(const RunStart& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.run_id));
  std::string session;
  uint64_t index = 0;
  // Every start that looks like a session's exec is held to the session rules (Append), so none
  // may escape them by a spelling the parser does not take.
  if (r.purpose.starts_with(kSessionPurposePrefix) &&
      !ParseSessionExecPurpose(r.purpose, &session, &index)) {
    return Status::InvalidArgument(
        "audit: a purpose that begins \"session \" must be \"session SESSION_ID exec N\" (N >= 1)");
  }
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.policy_source_digest, "policy source digest"));
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.plan_digest, "plan digest"));
  EventRow row;
  row.values[kColKind] = std::string(kKindStart);
  row.values[kColRunId] = r.run_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.start_time_ns, now_ns));
  SetRequester(&row, r.requester);
  row.values[kColPolicyName] = r.policy_name;
  row.values[kColPolicySourceDigest] = r.policy_source_digest;
  row.values[kColPlanDigest] = r.plan_digest;
  row.values[kColBackend] = r.backend;
  row.values[kColBackendMode] = r.backend_mode;
  row.values[kColArgv] = EncodeStringList(r.argv);
  SetOptionalText(&row, kColPurpose, r.purpose);
  return row;
}

Result<EventRow> RowFromEnd(const RunEnd& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.run_id));
  // Refused is allowed: a started run whose sandbox did not hold what the plan says is refused
  // before its program starts, and its evidence is in this event (enforcement).
  if (r.verdict == Verdict::kInterrupted) {
    return Status::InvalidArgument(
        "audit: an end event cannot carry verdict interrupted (use RecordInterrupted)");
  }
  if (r.verdict == Verdict::kRefused && r.enforcement.empty()) {
    return Status::InvalidArgument(
        "audit: an end event carries verdict refused only with the evidence that refused it "
        "(use RecordRefusal)");
  }
  EventRow row;
  row.values[kColKind] = std::string(kKindEnd);
  row.values[kColRunId] = r.run_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.end_time_ns, now_ns));
  if (r.exit_code) row.values[kColExitCode] = int64_t{*r.exit_code};
  if (r.signal) row.values[kColSignal] = int64_t{*r.signal};
  row.values[kColVerdict] = std::string(VerdictName(r.verdict));
  row.values[kColLimitsFired] = EncodeStringList(r.limits_fired);
  SAFEX_ASSIGN_OR_RETURN(row.values[kColWallNs], Signed(r.wall_ns, "wall_ns"));
  SAFEX_ASSIGN_OR_RETURN(row.values[kColCpuNs], Signed(r.cpu_ns, "cpu_ns"));
  SAFEX_ASSIGN_OR_RETURN(row.values[kColPeakMemoryBytes],
                         Signed(r.peak_memory_bytes, "peak_memory_bytes"));
  SAFEX_RETURN_IF_ERROR(SetStream(&row, r.stdout_summary, kColStdoutBytes, kColStdoutSha256,
                                  kColStdoutTruncated, "stdout"));
  SAFEX_RETURN_IF_ERROR(SetStream(&row, r.stderr_summary, kColStderrBytes, kColStderrSha256,
                                  kColStderrTruncated, "stderr"));
  row.values[kColValidatorResults] = EncodeValidatorResults(r.validator_results);
  for (const auto& d : r.denied_egress) {
    SAFEX_RETURN_IF_ERROR(Signed(d.count, "denied egress count").status());
  }
  row.values[kColDeniedEgress] = EncodeDeniedEgress(r.denied_egress);
  row.values[kColReason] = r.error;
  SetOptionalText(&row, kColEnforcement, r.enforcement);
  return row;
}

Result<EventRow> RowFromRefusal(const Refusal& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.run_id));
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.policy_source_digest, "policy source digest"));
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.plan_digest, "plan digest"));
  if (r.reason.empty()) return Status::InvalidArgument("audit: a refusal needs a reason");
  EventRow row;
  row.values[kColKind] = std::string(kKindRefusal);
  row.values[kColRunId] = r.run_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.time_ns, now_ns));
  SetRequester(&row, r.requester);
  row.values[kColPolicyName] = r.policy_name;
  row.values[kColPolicySourceDigest] = r.policy_source_digest;
  row.values[kColPlanDigest] = r.plan_digest;
  row.values[kColArgv] = EncodeStringList(r.argv);
  row.values[kColVerdict] = std::string(VerdictName(Verdict::kRefused));
  row.values[kColReason] = r.reason;
  SetOptionalText(&row, kColPurpose, r.purpose);
  return row;
}

Result<EventRow> RowFromInterrupted(const Interrupted& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.run_id));
  EventRow row;
  row.values[kColKind] = std::string(kKindInterrupted);
  row.values[kColRunId] = r.run_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.time_ns, now_ns));
  row.values[kColVerdict] = std::string(VerdictName(Verdict::kInterrupted));
  row.values[kColReason] = r.reason;
  return row;
}

Result<EventRow> RowFromAccess(const Access& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.run_id));
  if (r.what.empty()) return Status::InvalidArgument("audit: an access needs to say what it was");
  EventRow row;
  row.values[kColKind] = std::string(kKindAccess);
  row.values[kColRunId] = r.run_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.time_ns, now_ns));
  SetRequester(&row, r.requester);
  row.values[kColReason] = r.what;
  return row;
}

Result<EventRow> RowFromSandbox(const SandboxEvent& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.sandbox_id));
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.plan_digest, "plan digest"));
  const bool made = r.what == SandboxEvent::What::kMade;
  if (!made && r.reason.empty()) {
    return Status::InvalidArgument("audit: a sandbox eviction needs a reason");
  }
  EventRow row;
  row.values[kColKind] = std::string(kKindSandbox);
  row.values[kColRunId] = r.sandbox_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.time_ns, now_ns));
  SetRequester(&row, r.requester);
  row.values[kColPolicyName] = r.policy_name;
  row.values[kColPlanDigest] = r.plan_digest;
  row.values[kColBackend] = r.backend;
  row.values[kColBackendMode] = r.backend_mode;
  row.values[kColPurpose] = std::string(made ? kSandboxMade : kSandboxEvicted);
  SetOptionalText(&row, kColReason, r.reason);
  SetOptionalText(&row, kColEnforcement, r.enforcement);
  return row;
}

namespace {

std::string_view SessionPurpose(SessionEvent::What what) {
  switch (what) {
    case SessionEvent::What::kOpened:
      return kSessionOpened;
    case SessionEvent::What::kFileIn:
      return kSessionFileIn;
    case SessionEvent::What::kFileOut:
      return kSessionFileOut;
    case SessionEvent::What::kClosed:
      return kSessionClosed;
  }
  return kSessionOpened;
}

// What each kind of session event must carry (the rest of the row is filled by RowFromSession).
Status CheckSession(const SessionEvent& r) {
  SAFEX_RETURN_IF_ERROR(CheckRunId(r.session_id));
  SAFEX_RETURN_IF_ERROR(CheckDigest(r.plan_digest, "plan digest"));
  switch (r.what) {
    case SessionEvent::What::kOpened:
      if (r.plan_digest.empty()) {
        return Status::InvalidArgument("audit: an opened session needs its plan digest");
      }
      // Without the caller's uid the log could not tell a second caller from the first.
      if (!r.requester.uid) {
        return Status::InvalidArgument("audit: an opened session needs its caller's uid");
      }
      return Status::Ok();
    case SessionEvent::What::kFileIn:
    case SessionEvent::What::kFileOut:
      if (r.reason.empty()) return Status::InvalidArgument("audit: a session file needs its path");
      if (r.file_sha256.size() != 64) {
        return Status::InvalidArgument("audit: a session file needs its SHA-256 (64 hex digits)");
      }
      SAFEX_RETURN_IF_ERROR(CheckDigest(r.file_sha256, "file SHA-256"));
      return Signed(r.file_bytes, "file size").status();
    case SessionEvent::What::kClosed:
      if (r.reason.empty()) {
        return Status::InvalidArgument("audit: a session's close needs a reason");
      }
      return Status::Ok();
  }
  return Status::InvalidArgument("audit: unknown session event");
}

}  // namespace

Result<EventRow> RowFromSession(const SessionEvent& r, int64_t now_ns) {
  SAFEX_RETURN_IF_ERROR(CheckSession(r));
  EventRow row;
  row.values[kColKind] = std::string(kKindSession);
  row.values[kColRunId] = r.session_id;
  SAFEX_ASSIGN_OR_RETURN(row.values[kColTimeNs], EventTime(r.time_ns, now_ns));
  SetRequester(&row, r.requester);
  row.values[kColPurpose] = std::string(SessionPurpose(r.what));
  SetOptionalText(&row, kColReason, r.reason);
  if (r.what == SessionEvent::What::kOpened) {
    row.values[kColPolicyName] = r.policy_name;
    row.values[kColPlanDigest] = r.plan_digest;
    row.values[kColBackend] = r.backend;
    row.values[kColBackendMode] = r.backend_mode;
    SetOptionalText(&row, kColEnforcement, r.enforcement);
  } else if (r.what != SessionEvent::What::kClosed) {
    // No column of the events table is a file's size and digest: they go in one JSON object
    // that names them, in the column whose JSON says what a sandbox held (the session_files
    // view takes them apart). The digest is hex, so the text needs no escaping.
    row.values[kColEnforcement] =
        "{\"bytes\":" + std::to_string(r.file_bytes) + ",\"sha256\":\"" + r.file_sha256 + "\"}";
  }
  return row;
}

std::string SessionExecPurposePrefix(std::string_view session_id) {
  return std::string(kSessionPurposePrefix) + std::string(session_id) + " exec ";
}

std::string SessionExecPurpose(const std::string& session_id, uint64_t index) {
  return SessionExecPurposePrefix(session_id) + std::to_string(index);
}

bool ParseSessionExecPurpose(std::string_view purpose, std::string* session_id, uint64_t* index) {
  if (!purpose.starts_with(kSessionPurposePrefix)) return false;
  purpose.remove_prefix(kSessionPurposePrefix.size());
  const size_t space = purpose.find(' ');
  if (space == std::string_view::npos || !IsValidRunId(purpose.substr(0, space))) return false;
  constexpr std::string_view kExec = " exec ";
  std::string_view number = purpose.substr(space);
  if (!number.starts_with(kExec)) return false;
  number.remove_prefix(kExec.size());
  // One spelling per index: no sign, no leading zero, nothing after the digits.
  if (number.empty() || number[0] < '1' || number[0] > '9') return false;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || end != number.data() + number.size()) return false;
  *session_id = std::string(purpose.substr(0, space));
  *index = n;
  return true;
}

}  // namespace safex::audit
