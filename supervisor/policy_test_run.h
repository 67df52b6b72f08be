// Running one policy test for real (`safex test`, docs/policy-language.md "Tests"): the test's
// run goes through the same Runner as `safex run` (fresh sandbox, limits, validators, audit log,
// recorded with purpose "test POLICY/NAME"), then its expectations are checked against what the
// caller of that run would have seen.
#pragma once

#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "plan/policy_test.h"
#include "supervisor/runner.h"

namespace safex::supervisor {

struct TestOutcome {
  std::string policy;                 // the policy name
  std::string test;                   // the test's name
  std::string kind;                   // "test" (the policy's own) or "probe" (built in)
  std::string backend;                // the backend it ran under
  std::string expected;               // plan::DescribeExpectation
  std::string observed;               // "verdict ok, exit 0, stdout 6 bytes"
  std::vector<std::string> failures;  // one line per expectation that did not hold
  std::string run_id;                 // its run in the audit log
  bool passed() const { return failures.empty(); }
};

struct TestRunContext {
  Runner* runner = nullptr;
  audit::AuditLog* log = nullptr;
  std::string scratch_dir;  // a private (0700, root's) directory for the tests' input files
  audit::Requester requester;
};

// Runs `test` under `prepared` and checks it. `kind` is "test" or "probe" (recorded in the
// purpose). Never throws; a run that could not be made is a failing outcome saying why.
TestOutcome RunPolicyTest(const PreparedPlan& prepared, const plan::PolicyTest& test,
                          const std::string& kind, const TestRunContext& context);

// The failures of `expect` against `report` (empty: every expectation holds). Pure.
std::vector<std::string> CheckExpectations(const plan::TestExpectation& expect,
                                           const RunReport& report);
// What `report` shows, in the words of the expectations.
std::string DescribeObserved(const RunReport& report);

}  // namespace safex::supervisor
