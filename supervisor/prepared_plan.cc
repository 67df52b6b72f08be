// PreparePlan and VerifyPlanJson (declared in runner.h): a policy becomes a plan that is verified
// again from its own canonical JSON before anything runs it.
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "plan/plan_json.h"
#include "plan/verify.h"
#include "supervisor/runner.h"

namespace safex::supervisor {

Result<PreparedPlan> PreparePlan(const std::string& policy_path,
                                 const std::vector<std::string>& search_path,
                                 const plan::Ceilings& ceilings, RunReport* report) {
  compiler::CompileOptions options;
  options.search_path = search_path;
  options.ceilings = ceilings;
  compiler::CompileResult compiled = compiler::CompileFile(policy_path, options);
  if (!compiled.ok()) {
    report->verdict = Verdict::kRefused;
    report->exit_status = kExitRefused;
    report->diagnostics = compiler::RenderAll(compiled);
    report->reason = "policy " + policy_path + " does not compile (" +
                     std::to_string(compiled.errors()) + " errors)";
    return Status::InvalidArgument(report->reason);
  }
  report->policy_name = compiled.plan->policy_name;
  report->policy_source_digest = compiled.plan->source_digest;
  auto prepared = VerifyPlanJson(plan::ToCanonicalJson(*compiled.plan), ceilings);
  if (!prepared.ok()) {
    report->verdict = Verdict::kRefused;
    report->exit_status = kExitRefused;
    report->reason = prepared.status().message();
    return prepared.status();
  }
  report->plan_digest = prepared->digest;
  return prepared;
}

Result<PreparedPlan> VerifyPlanJson(std::string_view json, const plan::Ceilings& ceilings) {
  auto read_back = plan::PlanFromJson(json);
  if (!read_back.ok()) return read_back.status().With("plan refused");
  std::vector<plan::Violation> violations = plan::Verify(*read_back, ceilings);
  if (!violations.empty()) {
    std::string msg = "plan refused: ";
    for (size_t i = 0; i < violations.size(); ++i) {
      if (i > 0) msg += "; ";
      msg += violations[i].code + " " + violations[i].field + ": " + violations[i].message;
    }
    return Status::FailedPrecondition(msg);
  }
  PreparedPlan out{std::move(read_back).value(), ""};
  out.digest = plan::PlanDigest(out.plan);
  return out;
}

}  // namespace safex::supervisor
