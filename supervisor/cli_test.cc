// `safex test POLICY... [--builtin] [--backend B|all] [--json]`: every test a policy carries (and,
// with --builtin, the probes derived from its plan) run for real, under each backend asked for
// that the policy may use and the host offers; a table (or JSON) of expected against observed;
// exit 0 when every test passed, 1 when one failed, 125 when nothing could be run. Each test's
// run is in the audit log with purpose "test POLICY/NAME" (or "probe ...").
#include "supervisor/cli.h"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "plan/plan_json.h"
#include "supervisor/builtin_probes.h"
#include "supervisor/policy_test_run.h"
#include "supervisor/private_dir.h"
#include "supervisor/run_setup.h"
#include "supervisor/runner.h"

namespace safex::cli {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitNothingRan = 125;

struct TestFlags {
  std::vector<std::string> policies;
  bool builtin = false;
  std::string backend;  // "" : the plan's own; a backend name; "all"
  bool json = false;
  std::vector<std::string> search_path;
  std::string probe_dir;  // "" : found (builtin_probes.h)
  supervisor::RunSetupFlags setup;
  plan::Ceilings ceilings;  // the host's, once loaded
};

// A row that is not a run: a policy that does not compile, a backend that does not apply.
supervisor::TestOutcome NotRun(const std::string& policy, const std::string& test,
                               const std::string& backend, const std::string& why, bool failed) {
  supervisor::TestOutcome o;
  o.policy = policy;
  o.test = test;
  o.kind = failed ? "error" : "skipped";
  o.backend = backend;
  o.observed = why;
  if (failed) o.failures.push_back(why);
  return o;
}

// The backends to run `plan` under: its own, the one asked for, or every one the host offers.
std::vector<plan::Backend> BackendsFor(const plan::Plan& plan, const std::string& asked,
                                       const compiler::HostConfig& host) {
  if (asked.empty()) return {plan.backend};
  if (asked != "all") return {*plan::BackendFromName(asked)};
  return {host.ceilings.allowed_backends.begin(), host.ceilings.allowed_backends.end()};
}

// `prepared` moved to `backend` and verified again: the policy may not be allowed there (native
// is for trusted code only), which is a skipped row, not a failure.
Result<supervisor::PreparedPlan> OnBackend(const supervisor::PreparedPlan& prepared,
                                           plan::Backend backend,
                                           const compiler::HostConfig& host) {
  if (backend == prepared.plan.backend) return prepared;
  plan::Plan moved = prepared.plan;
  moved.backend = backend;
  return supervisor::VerifyPlanJson(plan::ToCanonicalJson(moved), host.ceilings);
}

void RunTests(const supervisor::PreparedPlan& prepared, const TestFlags& f,
              const supervisor::TestRunContext& ctx, std::vector<supervisor::TestOutcome>* out) {
  for (const plan::PolicyTest& t : prepared.plan.tests) {
    out->push_back(supervisor::RunPolicyTest(prepared, t, "test", ctx));
  }
  if (!f.builtin) return;
  Result<supervisor::BuiltinProbes> probes =
      supervisor::MakeBuiltinProbes(prepared, f.ceilings, f.probe_dir);
  if (!probes.ok()) {
    out->push_back(NotRun(prepared.plan.policy_name, "built-in probes",
                          plan::BackendName(prepared.plan.backend), probes.status().message(),
                          true));
    return;
  }
  for (const plan::PolicyTest& t : probes->probes) {
    out->push_back(supervisor::RunPolicyTest(probes->plan, t, "probe", ctx));
  }
}

// A policy that compiles except that it names a backend this host does not offer (E062) cannot
// be tested here: that is a skipped row, not a failure (any other error is one).
std::optional<std::string> BackendNotOffered(const std::string& path, const TestFlags& f,
                                             const plan::Ceilings& ceilings) {
  compiler::CompileOptions options;
  options.search_path = f.search_path;
  options.ceilings = ceilings;
  const compiler::CompileResult r = compiler::CompileFile(path, options);
  if (r.errors() == 0) return std::nullopt;
  for (const dsl::Diagnostic& d : r.diagnostics) {
    if (d.severity == dsl::Severity::kError && d.code != "E062") return std::nullopt;
  }
  return r.diagnostics.front().message;
}

void RunPolicy(const std::string& path, const TestFlags& f, const supervisor::RunSetup& setup,
               const supervisor::TestRunContext& ctx, std::vector<supervisor::TestOutcome>* out) {
  if (auto why = BackendNotOffered(path, f, setup.host.ceilings)) {
    out->push_back(NotRun(path, "*", "-", *why, false));
    return;
  }
  supervisor::RunReport refusal;
  auto prepared = supervisor::PreparePlan(path, f.search_path, setup.host.ceilings, &refusal);
  if (!prepared.ok()) {
    if (!refusal.diagnostics.empty()) std::cerr << refusal.diagnostics;
    out->push_back(NotRun(path, "(compile)", "-", refusal.reason, true));
    return;
  }
  if (prepared->plan.tests.empty() && !f.builtin) {
    out->push_back(NotRun(prepared->plan.policy_name, "(no tests)", "-",
                          "the policy has no tests (add `test` blocks, or use --builtin)", false));
    return;
  }
  for (plan::Backend b : BackendsFor(prepared->plan, f.backend, setup.host)) {
    const std::string name = plan::BackendName(b);
    if (setup.host.ceilings.allowed_backends.count(b) == 0) {
      out->push_back(NotRun(prepared->plan.policy_name, "*", name,
                            "this host does not offer the " + name + " backend",
                            !f.backend.empty() && f.backend != "all"));
      continue;
    }
    auto moved = OnBackend(*prepared, b, setup.host);
    if (!moved.ok()) {
      out->push_back(NotRun(prepared->plan.policy_name, "*", name,
                            "the policy may not run on " + name + ": " + moved.status().message(),
                            false));
      continue;
    }
    RunTests(*moved, f, ctx, out);
  }
}

std::string Cell(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 3) + "...";
  return s + std::string(width - s.size(), ' ');
}

void PrintTable(const std::vector<supervisor::TestOutcome>& rows) {
  std::cout << Cell("TEST", 40) << " " << Cell("BACKEND", 8) << " " << Cell("EXPECTED", 34) << " "
            << Cell("OBSERVED", 34) << " RESULT\n";
  size_t passed = 0, failed = 0, skipped = 0;
  for (const supervisor::TestOutcome& r : rows) {
    const std::string result = r.kind == "skipped" ? "skip" : r.passed() ? "pass" : "FAIL";
    (r.kind == "skipped" ? skipped : r.passed() ? passed : failed)++;
    const std::string name = r.policy + "/" + r.test + (r.kind == "probe" ? " (probe)" : "");
    std::cout << Cell(name, 40) << " " << Cell(r.backend, 8) << " " << Cell(r.expected, 34) << " "
              << Cell(r.observed, 34) << " " << result << "\n";
    for (const std::string& why : r.failures) std::cout << "    " << why << "\n";
    if (!r.passed() && !r.run_id.empty()) std::cout << "    run " << r.run_id << "\n";
  }
  std::cout << fmt::format("{} passed, {} failed, {} skipped\n", passed, failed, skipped);
}

void PrintJson(const std::vector<supervisor::TestOutcome>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const supervisor::TestOutcome& r : rows) {
    out.push_back({{"policy", r.policy},
                   {"test", r.test},
                   {"kind", r.kind},
                   {"backend", r.backend},
                   {"expected", r.expected},
                   {"observed", r.observed},
                   {"passed", r.passed()},
                   {"failures", r.failures},
                   {"run_id", r.run_id}});
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int DoTest(TestFlags& f) {
  supervisor::RunSetup setup;
  auto log = supervisor::OpenAuditLogForRuns(f.setup);
  if (!log.ok()) {
    std::cerr << "safex test: " << log.status().message() << "\n";
    return kExitNothingRan;
  }
  setup.log = std::move(*log);
  if (geteuid() != 0) {
    std::cerr << "safex test: needs root (the tests run in real sandboxes)\n";
    return kExitNothingRan;
  }
  const std::string scratch = supervisor::PrivateRootFor(f.setup.state_root);
  Status ready = supervisor::PrepareRunSetup(f.setup, &setup);
  if (ready.ok()) ready = supervisor::EnsurePrivateDir(scratch);
  if (!ready.ok()) {
    std::cerr << "safex test: " << ready.message() << "\n";
    return kExitNothingRan;
  }
  f.ceilings = setup.host.ceilings;
  supervisor::TestRunContext ctx;
  ctx.runner = setup.runner.get();
  ctx.log = setup.log.get();
  ctx.scratch_dir = scratch;
  ctx.requester = {getuid(), getgid(), getpid()};
  std::vector<supervisor::TestOutcome> rows;
  for (const std::string& p : f.policies) RunPolicy(p, f, setup, ctx, &rows);
  f.json ? PrintJson(rows) : PrintTable(rows);
  for (const auto& r : rows) {
    if (!r.passed()) return kExitFailed;
  }
  return 0;
}

}  // namespace

void RegisterTestCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<TestFlags>();
  CLI::App* cmd = app.add_subcommand(
      "test", "Run policies' tests (and, with --builtin, probes of every claim) for real (root)");
  cmd->add_option("policies", flags->policies, "Policy files (.policy)")->required();
  cmd->add_flag("--builtin", flags->builtin,
                "Also run the probes derived from the plan: each tries to break one claim");
  cmd->add_option("--backend", flags->backend,
                  "gvisor, microvm, native, or all (every backend the host offers); default: the "
                  "policy's own")
      ->check(CLI::IsMember({"gvisor", "microvm", "native", "all"}));
  cmd->add_flag("--json", flags->json, "Print the results as one JSON array");
  cmd->add_option("--search-path", flags->search_path, "Directory searched for `extends`");
  cmd->add_option("--probe-dir", flags->probe_dir,
                  "Directory holding safex-probe (default: probe-bin/ next to safex, else "
                  "/usr/local/lib/safex/probe)");
  AddRunSetupOptions(cmd, &flags->setup);
  cmd->callback([flags, exit_code] { *exit_code = DoTest(*flags); });
}

}  // namespace safex::cli
