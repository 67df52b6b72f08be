#include "audit/ocsf.h"

#include <cstdint>
#include <optional>
#include <string_view>

#include "audit/json_bytes.h"
#include "audit/records.h"
#include "audit/text_escape.h"
#include "audit/verdict.h"

namespace safex::audit {
namespace {

using nlohmann::json;

// OCSF base-event enums (1.1.0): the ids and their captions, which OCSF wants side by side.
constexpr int kStatusUnknown = 0;
constexpr int kStatusSuccess = 1;
constexpr int kStatusFailure = 2;
constexpr int kSeverityUnknown = 0;
constexpr int kSeverityInformational = 1;
constexpr int kSeverityLow = 2;
constexpr int kSeverityMedium = 3;
constexpr int kSeverityHigh = 4;

const char* StatusName(int id) {
  switch (id) {
    case kStatusSuccess:
      return "Success";
    case kStatusFailure:
      return "Failure";
    default:
      return "Unknown";
  }
}

const char* SeverityName(int id) {
  switch (id) {
    case kSeverityInformational:
      return "Informational";
    case kSeverityLow:
      return "Low";
    case kSeverityMedium:
      return "Medium";
    case kSeverityHigh:
      return "High";
    default:
      return "Unknown";
  }
}

// An OCSF text field: the bytes when they are UTF-8, else escaped (never invalid JSON text).
std::string Text(std::string_view bytes) {
  return IsValidUtf8(bytes) ? std::string(bytes) : EscapeForTerminal(bytes);
}

// OCSF timestamps are milliseconds since the epoch; the log keeps nanoseconds (also exported,
// exact, in unmapped).
int64_t Ms(int64_t ns) { return ns / 1'000'000; }

// How much a SOC should care, by verdict (docs/audit.md has the table). No default: a new
// verdict does not compile until it is placed here.
int SeverityOfVerdict(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return kSeverityInformational;
    // The program's or the host's trouble, not an attack on the sandbox.
    case Verdict::kNonzeroExit:
    case Verdict::kDeliveryFailed:
    case Verdict::kSetupError:
      return kSeverityLow;
    // Containment stepped in (a limit the policy set), the request was refused, or the
    // supervisor died mid-run so the run's end was never recorded.
    case Verdict::kTimeout:
    case Verdict::kCpuLimit:
    case Verdict::kMemoryLimit:
    case Verdict::kPidsLimit:
    case Verdict::kOutputLimit:
    case Verdict::kValidatorRejected:
    case Verdict::kRefused:
    case Verdict::kInterrupted:
      return kSeverityMedium;
  }
  return kSeverityUnknown;
}

std::string_view VerdictMeaning(Verdict v) {
  for (const auto& info : AllVerdicts()) {
    if (info.verdict == v) return info.meaning;
  }
  return {};
}

// status_id, status_code, status_detail, severity_id and their captions.
void AddOutcome(const RunSummary& run, json& event) {
  int status = kStatusUnknown;
  int severity = kSeverityInformational;  // running: nothing has gone wrong yet
  std::string detail = "started, not ended (yet)";
  if (!run.verdict.empty()) {
    std::optional<Verdict> v = ParseVerdict(run.verdict);
    // A verdict this build does not know (a newer writer's): say so rather than guess.
    status = !v ? kStatusUnknown : *v == Verdict::kOk ? kStatusSuccess : kStatusFailure;
    severity = v ? SeverityOfVerdict(*v) : kSeverityUnknown;
    detail = v ? std::string(VerdictMeaning(*v)) : "verdict unknown to this safex";
    event["status_code"] = Text(run.verdict);
  } else {
    event["status_code"] = "running";
  }
  if (!run.reason.empty()) detail += ": " + Text(run.reason);
  // A connection attempt the policy forbids is the clearest sign of hostile code in the log.
  if (!run.denied_egress.empty()) severity = kSeverityHigh;
  event["status_id"] = status;
  event["status"] = StatusName(status);
  event["status_detail"] = detail;
  event["severity_id"] = severity;
  event["severity"] = SeverityName(severity);
}

json ProductJson(const OcsfSource& source) {
  json product = {{"name", "safex"}, {"vendor_name", "safex"}};
  if (!source.product_version.empty()) product["version"] = source.product_version;
  return product;
}

json MetadataJson(const RunSummary& run, const OcsfSource& source) {
  json metadata = {{"version", kOcsfSchemaVersion},
                   {"uid", Text(run.run_id)},
                   {"product", ProductJson(source)},
                   {"log_name", "safex-audit"},
                   {"sequence", run.start_seq}};
  std::string session;
  uint64_t index = 0;
  // A session's commands correlate through the session id.
  if (ParseSessionExecPurpose(run.purpose, &session, &index)) {
    metadata["correlation_uid"] = session;
  }
  return metadata;
}

// The requester: the user (and process) that asked for the run.
json ActorJson(const RunSummary& run) {
  json actor = json::object();
  if (run.requester.uid) {
    actor["user"] = {{"uid", std::to_string(*run.requester.uid)}};
  }
  if (run.requester.pid) actor["process"] = {{"pid", *run.requester.pid}};
  return actor;
}

json DeviceJson(const OcsfSource& source) {
  // type_id 0: the log does not say what kind of machine ran it.
  json device = {{"type_id", 0}, {"type", "Unknown"}};
  if (!source.hostname.empty()) device["hostname"] = Text(source.hostname);
  return device;
}

// The sandboxed program. No pid (the log does not record the sandbox's pids) and no user (it
// runs as the sandbox's identity, which the log does not record either; the requester is
// actor.user): the run id is the process uid, which OCSF accepts in place of a pid.
json ProcessJson(const RunSummary& run) {
  json process = {{"uid", Text(run.run_id)}, {"cmd_line", ArgvForDisplay(run.argv)}};
  // A refused run never had a process; an interrupted run's end is when crash recovery closed
  // it, not when its process ended (unknown).
  if (run.state != "refused") process["created_time"] = Ms(run.start_ns);
  if (run.state == "finished" && run.end_ns) process["terminated_time"] = Ms(*run.end_ns);
  if (!run.argv.empty()) {
    std::string_view argv0 = run.argv[0];
    size_t slash = argv0.rfind('/');
    if (slash != std::string_view::npos) argv0.remove_prefix(slash + 1);
    if (!argv0.empty()) process["name"] = Text(argv0);
  }
  if (!run.policy_name.empty()) process["sandbox"] = Text(run.policy_name);
  return process;
}

void AddTimes(const RunSummary& run, json& event) {
  event["time"] = Ms(run.start_ns);
  event["start_time"] = Ms(run.start_ns);
  if (!run.end_ns) return;
  event["end_time"] = Ms(*run.end_ns);
  event["duration"] = Ms(*run.end_ns - run.start_ns);
}

json StringsJson(const std::vector<std::string>& list) {
  json out = json::array();
  for (const auto& s : list) out.push_back(JsonFromBytes(s));
  return out;
}

void PutIf(json& j, const char* key, const std::optional<int64_t>& v) {
  if (v) j[key] = *v;
}

void PutStream(json& j, const char* key, const std::optional<StreamSummary>& s) {
  if (!s) return;
  j[key] = {{"bytes", s->bytes}, {"sha256", JsonFromBytes(s->sha256)}, {"truncated", s->truncated}};
}

json ValidatorsJson(const std::vector<ValidatorResult>& results) {
  json out = json::array();
  for (const auto& v : results) {
    out.push_back({{"name", JsonFromBytes(v.name)},
                   {"outcome", JsonFromBytes(v.outcome)},
                   {"detail", JsonFromBytes(v.detail)}});
  }
  return out;
}

json EgressJson(const std::vector<DeniedEgress>& denied) {
  json out = json::array();
  for (const auto& d : denied) {
    out.push_back({{"destination", JsonFromBytes(d.destination)}, {"count", d.count}});
  }
  return out;
}

// What the run was allowed (policy, plan, backend) and who asked, byte-exact.
json UnmappedIdentity(const RunSummary& run) {
  json u = {{"state", run.state},
            {"policy",
             {{"name", JsonFromBytes(run.policy_name)},
              {"source_digest", JsonFromBytes(run.policy_source_digest)}}},
            {"plan_digest", JsonFromBytes(run.plan_digest)},
            {"backend", JsonFromBytes(run.backend)},
            {"backend_mode", JsonFromBytes(run.backend_mode)},
            {"argv", StringsJson(run.argv)},
            {"start_ns", run.start_ns},
            {"start_seq", run.start_seq}};
  if (!run.verdict.empty()) u["verdict"] = JsonFromBytes(run.verdict);
  if (!run.reason.empty()) u["reason"] = JsonFromBytes(run.reason);
  if (run.requester.gid) u["requester_gid"] = *run.requester.gid;
  if (!run.purpose.empty()) u["purpose"] = JsonFromBytes(run.purpose);
  std::string session;
  uint64_t index = 0;
  if (ParseSessionExecPurpose(run.purpose, &session, &index)) {
    u["session_id"] = session;
    u["session_exec"] = index;
  }
  return u;
}

// How the run ended and what it used, produced and was denied.
void AddUnmappedEnd(const RunSummary& run, json& u) {
  PutIf(u, "end_ns", run.end_ns);
  PutIf(u, "end_seq", run.end_seq);
  PutIf(u, "signal", run.signal);
  PutIf(u, "wall_ns", run.wall_ns);
  PutIf(u, "cpu_ns", run.cpu_ns);
  PutIf(u, "peak_memory_bytes", run.peak_memory_bytes);
  PutStream(u, "stdout", run.stdout_summary);
  PutStream(u, "stderr", run.stderr_summary);
  u["limits_fired"] = StringsJson(run.limits_fired);
  u["validator_results"] = ValidatorsJson(run.validator_results);
  u["denied_egress"] = EgressJson(run.denied_egress);
}

// One line for a SIEM's event list: "safex run under policy P: memory-limit".
std::string Message(const RunSummary& run, const std::string& status_code) {
  // A refusal may come before the policy could even be named.
  if (run.policy_name.empty()) return "safex run: " + status_code;
  return "safex run under policy " + Text(run.policy_name) + ": " + status_code;
}

}  // namespace

std::string ArgvForDisplay(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    std::string e = EscapeForTerminal(a);
    if (e.empty() || e.find_first_of(" '\"") != std::string::npos) {
      std::string q = "'";
      for (char ch : e) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      e = q + "'";
    }
    out += e;
  }
  return out;
}

json OcsfEventFromRun(const RunSummary& run, const OcsfSource& source) {
  json event = {
      {"class_uid", kOcsfProcessActivityClass},
      {"class_name", "Process Activity"},
      {"category_uid", 1},
      {"category_name", "System Activity"},
      {"activity_id", kOcsfActivityLaunch},
      {"activity_name", "Launch"},
      {"type_uid", kOcsfProcessActivityClass * 100 + kOcsfActivityLaunch},
      {"type_name", "Process Activity: Launch"},
      {"metadata", MetadataJson(run, source)},
      {"actor", ActorJson(run)},
      {"device", DeviceJson(source)},
      {"process", ProcessJson(run)},
  };
  AddTimes(run, event);
  AddOutcome(run, event);
  event["message"] = Message(run, event["status_code"].get<std::string>());
  if (run.exit_code) event["exit_code"] = *run.exit_code;
  json unmapped = UnmappedIdentity(run);
  AddUnmappedEnd(run, unmapped);
  event["unmapped"] = std::move(unmapped);
  return event;
}

}  // namespace safex::audit
