#include "supervisor/output/report_json.h"

#include "supervisor/output/escape.h"

namespace safex::output {

nlohmann::json FindingToJson(const Finding& f) {
  nlohmann::json j = {
      {"subject", f.subject}, {"validator", f.validator},
      {"check", f.check},     {"outcome", CheckOutcomeName(f.outcome)},
      {"detail", f.detail},
  };
  j["validator_index"] = f.validator_index == kOutputsBlock ? nlohmann::json(nullptr)
                                                            : nlohmann::json(f.validator_index);
  if (f.offset) j["offset"] = *f.offset;
  if (f.line) j["line"] = *f.line;
  if (!f.json_path.empty()) j["json_path"] = f.json_path;
  return j;
}

nlohmann::json ReportToJson(const ValidationReport& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : r.findings) findings.push_back(FindingToJson(f));
  return {
      {"subject", r.subject},
      {"rejected", r.rejected},
      {"total_bytes", r.total_bytes},
      {"captured_bytes", r.captured_bytes},
      {"delivered_bytes", r.delivered_bytes},
      {"truncated", r.truncated},
      {"raw_sha256", r.raw_sha256},
      {"delivered_sha256", r.delivered_sha256},
      {"findings", std::move(findings)},
  };
}

nlohmann::json OutputFilesToJson(const OutputFiles& files) {
  nlohmann::json list = nlohmann::json::array();
  for (const OutputFiles::File& f : files.files()) {
    list.push_back({
        {"path", EscapeForLog(f.sandbox_path, {.max_output = 300})},
        {"size", f.size},
        {"read_sha256", f.read_sha256},
        {"report", ReportToJson(f.report)},
    });
  }
  nlohmann::json refusals = nlohmann::json::array();
  for (const Refusal& r : files.refusals()) {
    refusals.push_back(
        {{"path", r.path}, {"reason", RefusalReasonName(r.reason)}, {"detail", r.detail}});
  }
  nlohmann::json absent = nlohmann::json::array();
  for (const std::string& a : files.absent())
    absent.push_back(EscapeForLog(a, {.max_output = 300}));
  return {
      {"rejected", files.rejected()},           {"files", std::move(list)},
      {"refusals", std::move(refusals)},        {"absent", std::move(absent)},
      {"fallback_walk", files.used_fallback()},
  };
}

}  // namespace safex::output
