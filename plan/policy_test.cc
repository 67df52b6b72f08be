#include "plan/policy_test.h"

#include <algorithm>

namespace safex::plan {
namespace {

template <typename T>
bool Keeps(const std::optional<T>& narrower, const std::optional<T>& base) {
  return !base || narrower == base;
}

bool Includes(const std::vector<std::string>& narrower, const std::vector<std::string>& base) {
  return std::all_of(base.begin(), base.end(), [&](const std::string& x) {
    return std::find(narrower.begin(), narrower.end(), x) != narrower.end();
  });
}

}  // namespace

// "exit 0, stdout /^blocked$/, no file /data/out/x"
std::string DescribeExpectation(const TestExpectation& e) {
  std::vector<std::string> parts;
  if (e.verdict) parts.push_back("verdict " + *e.verdict);
  if (e.exit_code) parts.push_back("exit " + std::to_string(*e.exit_code));
  if (e.stdout_regex) parts.push_back("stdout /" + *e.stdout_regex + "/");
  if (e.stderr_regex) parts.push_back("stderr /" + *e.stderr_regex + "/");
  for (const auto& f : e.files_present) parts.push_back("file " + f);
  for (const auto& f : e.files_absent) parts.push_back("no file " + f);
  std::string out;
  for (const auto& x : parts) out += (out.empty() ? "" : ", ") + x;
  return out;
}

bool IsTestVerdict(std::string_view name) {
  static constexpr std::string_view kVerdicts[] = {
      "ok",           "nonzero-exit",       "timeout", "cpu-limit",  "memory-limit", "pids-limit",
      "output-limit", "validator-rejected", "refused", "setup-error"};
  return std::find(std::begin(kVerdicts), std::end(kVerdicts), name) != std::end(kVerdicts);
}

bool ExpectsDenial(const TestExpectation& e) {
  if (e.denied) return true;
  if (e.exit_code && *e.exit_code != 0) return true;
  if (e.verdict && *e.verdict != "ok") return true;
  return !e.files_absent.empty();
}

bool Narrows(const PolicyTest& narrower, const PolicyTest& test) {
  const TestExpectation& n = narrower.expect;
  const TestExpectation& b = test.expect;
  return narrower.argv == test.argv && narrower.stdin_data == test.stdin_data &&
         narrower.files == test.files && Keeps(n.exit_code, b.exit_code) &&
         Keeps(n.verdict, b.verdict) && Keeps(n.stdout_regex, b.stdout_regex) &&
         Keeps(n.stderr_regex, b.stderr_regex) && Includes(n.files_present, b.files_present) &&
         Includes(n.files_absent, b.files_absent) && (n.denied || !b.denied);
}

}  // namespace safex::plan
