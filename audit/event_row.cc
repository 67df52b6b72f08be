#include "audit/event_row.h"

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

}  // namespace safex::audit
