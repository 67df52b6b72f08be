// The pure parts of `safex test`: expectations checked against a run's report, and the built-in
// probes derived from a plan. Unprivileged (the real runs are in safex_test_cli_test.cc).
#include "supervisor/policy_test_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/builtin_probes.h"

namespace safex::supervisor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

RunReport Ran(Verdict verdict, int exit_code, const std::string& out) {
  RunReport r;
  r.verdict = verdict;
  r.result = drivers::RunResult{};
  r.result->exit_code = exit_code;
  output::ValidationReport v;
  v.delivered = out;
  r.stdout_report = v;
  return r;
}

TEST(CheckExpectationsTest, EachExpectationIsChecked) {
  plan::TestExpectation e;
  e.exit_code = 0;
  e.stdout_regex = "^blocked$";
  EXPECT_THAT(CheckExpectations(e, Ran(Verdict::kOk, 0, "trying\nblocked\n")), IsEmpty())
      << "^ and $ match at line boundaries";
  EXPECT_THAT(CheckExpectations(e, Ran(Verdict::kOk, 0, "reached\n")),
              ElementsAre(HasSubstr("expected stdout to match /^blocked$/, got \"reached\\n\"")));
  EXPECT_THAT(CheckExpectations(e, Ran(Verdict::kNonzeroExit, 3, "blocked\n")),
              ElementsAre("expected exit 0, got exit 3"));

  plan::TestExpectation v;
  v.verdict = "memory-limit";
  RunReport refused;
  refused.verdict = Verdict::kRefused;
  refused.reason = "backend unavailable";
  EXPECT_THAT(CheckExpectations(v, refused),
              ElementsAre("expected verdict memory-limit, got refused: backend unavailable"));
  e.stdout_regex.reset();
  EXPECT_THAT(CheckExpectations(e, refused),
              ElementsAre(HasSubstr("the program did not run (refused)")));
  RunReport killed = Ran(Verdict::kNonzeroExit, -1, "");
  killed.result->term_signal = 31;
  EXPECT_THAT(CheckExpectations(e, killed), ElementsAre(HasSubstr("killed by signal 31")));
}

TEST(CheckExpectationsTest, FilesMustBeDeliveredOrAbsent) {
  RunReport r = Ran(Verdict::kOk, 0, "");
  r.files = nlohmann::json{{"rejected", false},
                           {"files", nlohmann::json::array({{{"path", "/out/a.json"}}})}};
  plan::TestExpectation e;
  e.files_present = {"/out/a.json"};
  e.files_absent = {"/out/secret"};
  EXPECT_THAT(CheckExpectations(e, r), IsEmpty());
  e.files_present = {"/out/b.json"};
  e.files_absent = {"/out/a.json"};
  EXPECT_THAT(CheckExpectations(e, r),
              ElementsAre(HasSubstr("expected file /out/b.json, which the run did not write"),
                          HasSubstr("expected no file /out/a.json, but the run wrote it")));
  r.verdict = Verdict::kValidatorRejected;
  (*r.files)["rejected"] = true;
  e.files_present = {"/out/a.json"};
  e.files_absent.clear();
  EXPECT_THAT(CheckExpectations(e, r), ElementsAre(HasSubstr("written but not delivered")));
}

int FakeResolve(const char* name) {
  if (std::string(name) == "ptrace") return 101;
  if (std::string(name) == "bpf") return 321;
  return -1;
}

plan::Plan ProbePlan() {
  plan::Plan p;
  p.limits.memory_bytes = 256ULL << 20;
  p.limits.pids = 32;
  p.limits.cpu_time_ns = 5'000'000'000ULL;
  p.limits.wall_time_ns = 10'000'000'000ULL;
  p.limits.output_bytes = 1 << 20;
  p.seccomp.rules = {{"bpf", plan::SyscallAction::kErrno, 1},
                     {"ptrace", plan::SyscallAction::kKill, 0}};
  plan::Mount etc;
  etc.target = "/etc";
  etc.source = "/etc";
  p.mounts.push_back(etc);
  return p;
}

TEST(BuiltinProbesTest, EveryClaimOfThePlanGetsAProbe) {
  std::vector<plan::PolicyTest> probes = ProbesFor(ProbePlan(), FakeResolve);
  std::vector<std::string> names;
  for (const auto& t : probes) names.push_back(t.name);
  EXPECT_THAT(
      names,
      ElementsAre("metadata address 169.254.169.254:80 is unreachable",
                  "egress outside the granted set (1.1.1.1:9) is refused",
                  "memory above the limit (256 MiB) is killed",
                  "processes past the limit (32) cannot be made",
                  "a CPU spin is stopped at the CPU-time limit",
                  "output past the cap (1048576 bytes) is cut", "the root file system is read-only",
                  "an unmounted host path (/root) is absent", "syscall bpf fails with errno 1",
                  "syscall ptrace kills the program"));
  for (const auto& t : probes) {
    EXPECT_EQ(t.argv[0], kProbeProgram);
    EXPECT_TRUE(plan::ExpectsDenial(t.expect)) << t.name << ": a probe always expects a denial";
  }
  EXPECT_THAT(probes[2].argv, ElementsAre(kProbeProgram, "alloc", std::to_string(320ULL << 20)));
  EXPECT_EQ(probes[2].expect.verdict, "memory-limit");
  EXPECT_THAT(probes[8].argv, ElementsAre(kProbeProgram, "syscall", "321", "1"));
  EXPECT_THAT(probes[9].argv, ElementsAre(kProbeProgram, "syscall", "101", "0"));
  EXPECT_EQ(probes[9].expect.verdict, "nonzero-exit");
}

TEST(BuiltinProbesTest, ThePlanDecidesWhichVerdictAProbeExpects) {
  plan::Plan p = ProbePlan();
  p.limits.cpu_time_ns = p.limits.wall_time_ns;  // the wall clock fires first
  p.seccomp.rules = {{"ptrace", plan::SyscallAction::kKill, 0}};
  p.network.egress = {{"1.1.1.1", 443, plan::Protocol::kTcp}};
  std::vector<plan::PolicyTest> probes = ProbesFor(p, FakeResolve);
  ASSERT_EQ(probes.size(), 9u);
  EXPECT_THAT(probes[1].argv, ElementsAre(kProbeProgram, "connect", "9.9.9.9", "9", "2000"));
  EXPECT_EQ(probes[4].expect.verdict, "timeout");
  EXPECT_EQ(probes[8].name, "syscall ptrace kills the program");
  EXPECT_EQ(probes[8].expect.verdict, "nonzero-exit");
}

}  // namespace
}  // namespace safex::supervisor
