#include "compiler/policy_tests.h"

#include <algorithm>
#include <map>
#include <set>

#include "dsl/diagnostics.h"

namespace safex::compiler {
namespace {

using dsl::Statement;
using dsl::Value;
using dsl::ValueKind;

constexpr const char* kShape =
    "write `test \"name\" { run [\"program\", \"arg\"]  expect { exit = 0 } }`";

// `key = value` or `key VALUE` statements inside a test, at most once each unless repeatable.
bool Once(std::set<std::string>& seen, const std::string& kw, const Statement& x, Diags& d) {
  if (seen.insert(kw).second) return true;
  d.Error("E025", x.head[0].span, "`" + kw + "` is set twice in this test");
  return false;
}

std::optional<std::string> ReadRegex(const Value& v, Diags& d, const std::string& what) {
  if (v.kind != ValueKind::kRegex) {
    d.Error("E021", v.span, "`" + what + "` needs a /regex/, found " + DescribeValue(v));
    return std::nullopt;
  }
  return v.text;
}

// run ["program", "arg", ...]
void ReadRun(const Statement& x, Diags& d, plan::PolicyTest& t) {
  if (x.head.size() != 2 || x.has_assignment || x.has_block) {
    d.Error("E027", x.span, "write `run [\"program\", \"arg\", ...]`");
    return;
  }
  const auto* items = ReadList(x.head[1], d, "run");
  if (items == nullptr) return;
  for (const Value& item : *items) {
    auto s = ReadString(item, d, "an argument of `run`");
    if (!s) return;
    t.argv.push_back(*s);
  }
  if (t.argv.empty()) d.Error("E023", x.head[1].span, "`run` needs at least the program");
}

// input "name" = "content"
void ReadInput(const Statement& x, Diags& d, plan::PolicyTest& t) {
  if (x.head.size() != 2 || !x.has_assignment || x.has_block) {
    d.Error("E027", x.span, "write `input \"file name\" = \"content\"`");
    return;
  }
  auto name = ReadString(x.head[1], d, "an input file name");
  auto data = ReadString(x.assigned, d, "the input file's content");
  if (name && data) t.files.push_back(plan::TestInputFile{*name, *data});
}

// file "/data/out/x" | no_file "/data/out/x"
void ReadExpectedFile(const Statement& x, const std::string& kw, Diags& d,
                      plan::TestExpectation& e) {
  if (x.head.size() != 2 || x.has_assignment || x.has_block) {
    d.Error("E027", x.span, "write `" + kw + " \"/path/under/an/output/mount\"`");
    return;
  }
  auto path = ReadString(x.head[1], d, "an expected file");
  if (!path) return;
  (kw == "file" ? e.files_present : e.files_absent).push_back(*path);
}

// The value of `key = value` in `expect { }`.
void ReadExpectation(const std::string& kw, const Value& v, Diags& d, plan::TestExpectation& e) {
  if (kw == "exit") {
    if (auto n = ReadInteger(v, d, "exit", 0, 255)) e.exit_code = static_cast<int32_t>(*n);
  } else if (kw == "verdict") {
    if (auto name =
            ReadChoice(v, d, "verdict",
                       {"ok", "nonzero-exit", "timeout", "cpu-limit", "memory-limit", "pids-limit",
                        "output-limit", "validator-rejected", "refused", "setup-error"})) {
      e.verdict = *name;
    }
  } else if (kw == "stdout" || kw == "stderr") {
    if (auto re = ReadRegex(v, d, kw)) (kw == "stdout" ? e.stdout_regex : e.stderr_regex) = *re;
  } else if (auto on = ReadBool(v, d, kw)) {
    e.denied = *on;
  }
}

void ReadExpect(const Statement& x, Diags& d, plan::TestExpectation& e) {
  if (!ExpectBlock(x, d, "expect")) return;
  std::set<std::string> seen;
  static const std::vector<std::string_view> kKeys = {"exit",   "verdict", "stdout", "stderr",
                                                      "denied", "file",    "no_file"};
  for (const Statement& y : x.block) {
    const std::string kw = Keyword(y, d);
    if (kw.empty()) continue;
    if (std::find(kKeys.begin(), kKeys.end(), kw) == kKeys.end()) {
      const std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", y.head[0].span, "unknown expectation `" + kw + "`",
              near.empty() ? "expected one of: exit, verdict, stdout, stderr, denied, file, no_file"
                           : "did you mean `" + near + "`?");
      continue;
    }
    if (kw == "file" || kw == "no_file") {
      ReadExpectedFile(y, kw, d, e);
      continue;
    }
    if (!Once(seen, kw, y, d) || !ExpectAssignment(y, d, kw)) continue;
    ReadExpectation(kw, y.assigned, d, e);
  }
}

// The body of `test "name" { ... }`: run, stdin, input, expect.
void ReadBody(const Statement& s, Diags& d, plan::PolicyTest& t) {
  std::set<std::string> seen;
  bool has_run = false, has_expect = false;
  static const std::vector<std::string_view> kKeys = {"run", "stdin", "input", "expect"};
  for (const Statement& x : s.block) {
    const std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    if (std::find(kKeys.begin(), kKeys.end(), kw) == kKeys.end()) {
      const std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", x.head[0].span, "unknown keyword `" + kw + "` in a test",
              near.empty() ? "expected one of: run, stdin, input, expect"
                           : "did you mean `" + near + "`?");
      continue;
    }
    if (kw == "input") {
      ReadInput(x, d, t);
      continue;
    }
    if (!Once(seen, kw, x, d)) continue;
    if (kw == "run") {
      has_run = true;
      ReadRun(x, d, t);
    } else if (kw == "stdin") {
      if (ExpectAssignment(x, d, "stdin")) {
        if (auto text = ReadString(x.assigned, d, "stdin")) t.stdin_data = *text;
      }
    } else {
      has_expect = true;
      ReadExpect(x, d, t.expect);
    }
  }
  if (!has_run) d.Error("E024", s.head[0].span, "test \"" + t.name + "\" runs nothing", kShape);
  if (!has_expect) {
    d.Error("E024", s.head[0].span, "test \"" + t.name + "\" expects nothing",
            "add `expect { exit = 0 }` (or verdict, stdout, stderr, file, no_file)");
  }
}

// An inherited test redefined by a policy that extends its author: success tests may be
// redefined at will, denial tests only narrowed (plan/policy_test.h).
bool CheckRedefinition(const Set<plan::PolicyTest>& inherited, const plan::PolicyTest& t,
                       const Statement& s, Diags& d) {
  const plan::PolicyTest& old = inherited.value;
  if (!plan::ExpectsDenial(old.expect) || plan::Narrows(t, old)) return true;
  d.Error("E055", s.head[1].span,
          "test \"" + t.name + "\" of `" + old.defined_in +
              "` expects a denial; a policy that extends it may not weaken it",
          "keep its run and every expectation (defined at " + inherited.origin.loc +
              "); you may add expectations");
  return false;
}

}  // namespace

void LowerTest(const Statement& s, const std::string& policy_name, Diags& d, Draft& draft,
               const Origin& here) {
  if (s.head.size() != 2 || s.has_assignment || !s.has_block) {
    d.Error("E027", s.span, "malformed `test` statement", kShape);
    return;
  }
  auto name = ReadString(s.head[1], d, "a test name");
  if (!name) return;
  plan::PolicyTest t;
  t.name = *name;
  t.defined_in = policy_name;
  const size_t errors = d.errors();
  ReadBody(s, d, t);
  if (d.errors() != errors) return;
  for (Set<plan::PolicyTest>& existing : draft.tests) {
    if (existing.value.name != t.name) continue;
    if (existing.value.defined_in == policy_name) {
      d.Error("E025", s.head[1].span, "test \"" + t.name + "\" is defined twice",
              "first defined at " + existing.origin.loc);
      return;
    }
    if (CheckRedefinition(existing, t, s, d)) existing = Set<plan::PolicyTest>{t, here};
    return;
  }
  draft.tests.push_back(Set<plan::PolicyTest>{std::move(t), here});
}

}  // namespace safex::compiler
