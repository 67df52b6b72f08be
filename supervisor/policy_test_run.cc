#include "supervisor/policy_test_run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/fs_tree.h"
#include "common/text_escape.h"
#include "common/unique_fd.h"
#include "supervisor/output/glob.h"
#include "supervisor/verdict.h"

namespace safex::supervisor {
namespace {

// The delivered text of a stream ("" when nothing ran).
std::string Delivered(const std::optional<output::ValidationReport>& r) {
  return r ? r->delivered : std::string();
}

bool Matches(const std::string& text, const std::string& pattern) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(8 << 20);
  // Multi-line: ^ and $ match at line boundaries, so /^42$/ matches the output "42\n"
  // (docs/policy-language.md, "Tests").
  RE2 re("(?m)" + pattern, o);  // the verifier compiled it already (E081)
  return re.ok() && RE2::PartialMatch(text, re);
}

// The first bytes of `text`, escaped, for a failure line.
std::string Excerpt(const std::string& text) {
  return "\"" + EscapeText(text, {.max_output = 120, .escape_double_quote = true}) + "\"";
}

// Whether the run collected `path` (a sandbox path) among its output files, and delivered them.
bool Collected(const RunReport& report, const std::string& path, bool* delivered) {
  *delivered = false;
  if (!report.files) return false;
  const nlohmann::json& files = *report.files;
  const bool rejected = files.value("rejected", false);
  for (const nlohmann::json& f : files.value("files", nlohmann::json::array())) {
    if (f.value("path", "") == path) {
      *delivered = !rejected && report.verdict == Verdict::kOk;
      return true;
    }
  }
  return false;
}

void CheckProgramExit(const plan::TestExpectation& e, const RunReport& report,
                      std::vector<std::string>* failures) {
  if (!e.exit_code) return;
  if (!report.result) {
    failures->push_back(fmt::format("expected exit {}, but the program did not run ({})",
                                    *e.exit_code, VerdictName(report.verdict)));
  } else if (report.result->term_signal != 0) {
    failures->push_back(fmt::format("expected exit {}, but the program was killed by signal {}",
                                    *e.exit_code, report.result->term_signal));
  } else if (report.result->exit_code != *e.exit_code) {
    failures->push_back(
        fmt::format("expected exit {}, got exit {}", *e.exit_code, report.result->exit_code));
  }
}

void CheckFiles(const plan::TestExpectation& e, const RunReport& report,
                std::vector<std::string>* failures) {
  for (const std::string& path : e.files_present) {
    bool delivered = false;
    if (!Collected(report, path, &delivered)) {
      failures->push_back("expected file " + path + ", which the run did not write");
    } else if (!delivered) {
      failures->push_back("expected file " + path + ", which was written but not delivered (" +
                          std::string(VerdictName(report.verdict)) + ")");
    }
  }
  for (const std::string& path : e.files_absent) {
    bool delivered = false;
    if (Collected(report, path, &delivered)) {
      failures->push_back("expected no file " + path + ", but the run wrote it");
    }
  }
}

// Writes the test's input files into a fresh directory below the scratch directory. The
// scratch directory is root's and 0700 (the caller checks): nobody else can name or swap these.
Result<std::string> StageInputs(const plan::PolicyTest& test, const std::string& scratch) {
  std::string dir = scratch + "/test-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Status::Errno("mkdtemp", dir, errno);
  for (const plan::TestInputFile& f : test.files) {
    const std::string path = dir + "/" + f.name;  // the verifier refused '/' and leading '.'
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) return Status::Errno("open", path, errno);
    size_t off = 0;
    while (off < f.data.size()) {
      const ssize_t n = write(fd.get(), f.data.data() + off, f.data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::Errno("write", path, n < 0 ? errno : EIO);
      off += static_cast<size_t>(n);
    }
  }
  return dir;
}

// Only files a `validate file` declares are ever collected (docs/output-validation.md): an
// expectation about any other file could never hold (`file`) or never fail (`no_file`).
std::vector<std::string> UndeclaredFiles(const plan::Plan& plan, const plan::TestExpectation& e) {
  std::vector<std::string> out;
  for (const auto* list : {&e.files_present, &e.files_absent}) {
    for (const std::string& path : *list) {
      bool declared = false;
      for (const plan::Validator& v : plan.validators) {
        declared |=
            v.target == plan::ValidatorTarget::kFile && output::PathGlob(v.path).Matches(path);
      }
      if (!declared) {
        out.push_back("expects something of " + path +
                      ", which no `validate file` declares: such a file is never collected");
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> CheckExpectations(const plan::TestExpectation& e,
                                           const RunReport& report) {
  std::vector<std::string> failures;
  if (e.verdict && *e.verdict != VerdictName(report.verdict)) {
    std::string got(VerdictName(report.verdict));
    if (!report.reason.empty()) got += ": " + report.reason;
    failures.push_back("expected verdict " + *e.verdict + ", got " + got);
  }
  CheckProgramExit(e, report, &failures);
  const std::pair<const std::optional<std::string>*, const char*> streams[] = {
      {&e.stdout_regex, "stdout"}, {&e.stderr_regex, "stderr"}};
  for (const auto& [pattern, name] : streams) {
    if (!*pattern) continue;
    const std::string text =
        Delivered(std::string(name) == "stdout" ? report.stdout_report : report.stderr_report);
    if (!Matches(text, **pattern)) {
      failures.push_back(
          fmt::format("expected {} to match /{}/, got {}", name, **pattern, Excerpt(text)));
    }
  }
  CheckFiles(e, report, &failures);
  return failures;
}

std::string DescribeObserved(const RunReport& report) {
  std::string s = "verdict " + std::string(VerdictName(report.verdict));
  if (report.result) {
    s += report.result->term_signal != 0 ? fmt::format(", signal {}", report.result->term_signal)
                                         : fmt::format(", exit {}", report.result->exit_code);
    s += fmt::format(", stdout {} bytes", Delivered(report.stdout_report).size());
  }
  if (!report.limits_fired.empty()) s += ", limit " + report.limits_fired.front();
  return s;
}

TestOutcome RunPolicyTest(const PreparedPlan& prepared, const plan::PolicyTest& test,
                          const std::string& kind, const TestRunContext& context) {
  TestOutcome out;
  out.policy = prepared.plan.policy_name;
  out.test = test.name;
  out.kind = kind;
  out.backend = plan::BackendName(prepared.plan.backend);
  out.expected = plan::DescribeExpectation(test.expect);

  out.failures = UndeclaredFiles(prepared.plan, test.expect);
  if (!out.failures.empty()) {
    out.observed = "not run";
    return out;
  }
  RunSpec spec;
  spec.argv = test.argv;
  spec.stdin_data = test.stdin_data;
  spec.requester = context.requester;
  spec.purpose = kind + " " + out.policy + "/" + test.name;
  std::string staged;
  if (!test.files.empty()) {
    Result<std::string> dir = StageInputs(test, context.scratch_dir);
    if (!dir.ok()) {
      out.observed = "not run";
      out.failures.push_back("staging the test's input files: " + dir.status().message());
      return out;
    }
    staged = *dir;
    spec.input_dir = staged;
  }
  RunReport report = context.runner->Execute(prepared, std::move(spec), *context.log);
  if (!staged.empty()) (void)RemoveTree(staged);
  out.run_id = report.run_id;
  out.observed = DescribeObserved(report);
  out.failures = CheckExpectations(test.expect, report);
  return out;
}

}  // namespace safex::supervisor
