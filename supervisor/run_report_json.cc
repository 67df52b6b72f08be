// ReportToJson (declared in runner.h): the one-object JSON form of a run's report, as
// `safex run --json` prints it and the service answers it.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "supervisor/output/escape.h"
#include "supervisor/output/report_json.h"
#include "supervisor/runner.h"

namespace safex::supervisor {

nlohmann::json ReportToJson(const RunReport& report) {
  using nlohmann::json;
  json j;
  j["run_id"] = report.run_id;
  j["verdict"] = std::string(VerdictName(report.verdict));
  j["exit_status"] = report.exit_status;
  j["reason"] = output::EscapeForLog(report.reason);
  j["policy"] = report.policy_name;
  j["policy_source_digest"] = report.policy_source_digest;
  j["plan_digest"] = report.plan_digest;
  j["backend"] = report.backend;
  j["backend_mode"] = report.backend_mode;
  j["limits_fired"] = report.limits_fired;
  if (!report.diagnostics.empty()) j["diagnostics"] = output::EscapeForLog(report.diagnostics);
  if (!report.enforcement.is_null()) j["enforcement"] = report.enforcement;
  if (report.pooled) {
    j["sandbox"] = {{"pooled", true},
                    {"id", report.pooled->sandbox_id},
                    {"created_ns", report.pooled->created_ns},
                    {"idle_ms", report.pooled->idle_ns / 1'000'000}};
  }
  if (report.result) {
    const drivers::RunResult& r = *report.result;
    j["exit_code"] = r.term_signal == 0 && r.exit_code >= 0 ? json(r.exit_code) : json(nullptr);
    j["signal"] = r.term_signal != 0 ? json(r.term_signal) : json(nullptr);
    j["limit"] = drivers::LimitHitName(r.limit);
    j["limit_detail"] = r.limit_detail;
    j["wall_ns"] = r.wall_ns;
    j["cpu_ns"] = r.cpu_ns;
    j["peak_memory_bytes"] = r.peak_memory_bytes;
    j["denied_egress"] = r.denied_egress;
    auto stream = [](const drivers::CapturedStream& s,
                     const std::optional<output::ValidationReport>& v) {
      json o;
      o["bytes"] = s.total_bytes;
      o["captured_bytes"] = s.data.size();
      o["truncated"] = s.truncated || (v && v->truncated);
      if (v) {
        o["sha256"] = v->raw_sha256;
        o["delivered_sha256"] = v->delivered_sha256;
        o["rejected"] = v->rejected;
        // Delivered bytes may be any bytes the policy allowed; JSON needs UTF-8, so invalid
        // sequences are shown as U+FFFD here (the digest above is of the real bytes).
        o["text"] = v->delivered;
        o["validation"] = output::ReportToJson(*v);
      }
      return o;
    };
    j["stdout"] = stream(r.stdout_stream, report.stdout_report);
    j["stderr"] = stream(r.stderr_stream, report.stderr_report);
    if (report.files) j["files"] = *report.files;
  } else {
    j["exit_code"] = nullptr;
    j["signal"] = nullptr;
  }
  return j;
}

nlohmann::json EnforcementToJson(const drivers::Enforcement& e) {
  nlohmann::json fields = nlohmann::json::array();
  for (const drivers::EnforcedField& f : e.fields) {
    nlohmann::json o;
    o["name"] = f.name;
    o["state"] = drivers::EnforcedStateName(f.state);
    // Read from files and tools of the host: escaped like everything else that is logged.
    if (!f.expected.empty()) o["expected"] = output::EscapeForLog(f.expected);
    if (!f.observed.empty()) o["observed"] = output::EscapeForLog(f.observed);
    o["source"] = output::EscapeForLog(f.source);
    if (!f.probe.empty()) o["probe"] = f.probe;
    fields.push_back(std::move(o));
  }
  return nlohmann::json{{"fields", std::move(fields)}};
}

}  // namespace safex::supervisor
