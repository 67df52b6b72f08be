// A test a policy carries (`test "name" { run [...] expect { ... } }`, docs/policy-language.md):
// a run and what must come of it. Part of the plan (its digest covers them, `safex diff` compares
// them), ignored by drivers; `safex test` runs them for real under the plan they belong to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace safex::plan {

struct TestInputFile {
  std::string name;  // a file name in the plan's input mount (no '/')
  std::string data;
  bool operator==(const TestInputFile&) const = default;
};

// What must happen. An unset expectation is not checked; a test sets at least one.
struct TestExpectation {
  std::optional<int32_t> exit_code;         // the program's exit status
  std::optional<std::string> verdict;       // a verdict name: ok, nonzero-exit, memory-limit, ...
  std::optional<std::string> stdout_regex;  // RE2, must match somewhere in the delivered stdout
  std::optional<std::string> stderr_regex;
  std::vector<std::string> files_present;  // sandbox paths under an output mount: delivered
  std::vector<std::string> files_absent;   // ... not delivered
  // The test shows something being denied even though its expected outcome is a success (a
  // probe that prints "blocked" and exits 0): like any denial test, it cannot be weakened.
  bool denied = false;
  bool operator==(const TestExpectation&) const = default;
};

struct PolicyTest {
  std::string name;  // unique in the plan
  std::vector<std::string> argv;
  std::optional<std::string> stdin_data;
  std::vector<TestInputFile> files;
  TestExpectation expect;
  std::string defined_in;  // the policy that wrote it (inherited tests keep their author)
  bool operator==(const PolicyTest&) const = default;
};

// A denial test expects a refusal, a limit, a rejection or a failing program (or says `denied`).
// The tightening rule for inherited tests: a policy that extends another keeps every inherited
// test (there is no way to drop one). It may redefine an inherited success test at will (a
// tighter policy may turn what its parent allowed into a denial), but an inherited denial test
// only by narrowing it: the same run, every expectation kept, more may be added.
bool ExpectsDenial(const TestExpectation& e);

// "verdict memory-limit, exit 0, stdout /^blocked$/, file /data/out/x": for tables and reports.
std::string DescribeExpectation(const TestExpectation& e);

// The verdicts a test may expect (every verdict but interrupted and delivery-failed, which
// say nothing about the policy).
bool IsTestVerdict(std::string_view name);

// `narrower` runs the same thing as `test` and keeps every one of its expectations.
bool Narrows(const PolicyTest& narrower, const PolicyTest& test);

}  // namespace safex::plan
