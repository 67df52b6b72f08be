// The command line split at "--" (supervisor/cli_args.h): the program's argv never reaches the
// option parser, and verbs that take no program refuse a "--". Regression for option injection:
// `safex run --policy P --search-path D -- /bin/echo hi --runsc /tmp/evil` made root run /tmp/evil.
#include "supervisor/cli_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "supervisor/cli.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SplitCommandLine Split(std::vector<const char*> argv) {
  return SplitAtSeparator(static_cast<int>(argv.size()), argv.data());
}

TEST(SplitAtSeparatorTest, EverythingAfterTheFirstSeparatorIsTheProgram) {
  SplitCommandLine s = Split({"safex", "run", "--policy", "p", "--search-path", "d", "--",
                              "/bin/echo", "hi", "--runsc", "/tmp/evil", "--", "--stdin", "x"});
  EXPECT_THAT(s.safex_args, ElementsAre("safex", "run", "--policy", "p", "--search-path", "d"));
  ASSERT_TRUE(s.program.has_value());
  EXPECT_THAT(*s.program,
              ElementsAre("/bin/echo", "hi", "--runsc", "/tmp/evil", "--", "--stdin", "x"));
}

TEST(SplitAtSeparatorTest, NoSeparatorMeansNoProgram) {
  SplitCommandLine s = Split({"safex", "check", "a.policy"});
  EXPECT_THAT(s.safex_args, ElementsAre("safex", "check", "a.policy"));
  EXPECT_FALSE(s.program.has_value());
}

TEST(SplitAtSeparatorTest, ASeparatorWithNothingAfterItIsAnEmptyProgram) {
  SplitCommandLine s = Split({"safex", "run", "--"});
  ASSERT_TRUE(s.program.has_value());
  EXPECT_TRUE(s.program->empty());
}

TEST(SplitAtSeparatorTest, ProgramNameIsNeverTheSeparator) {
  SplitCommandLine s = Split({"--", "run"});
  EXPECT_THAT(s.safex_args, ElementsAre("--", "run"));
  EXPECT_FALSE(s.program.has_value());
}

TEST(VerbOfTest, FirstNonOption) {
  EXPECT_EQ(VerbOf({"safex", "run", "--policy", "p"}), "run");
  EXPECT_EQ(VerbOf({"safex", "--help"}), "");
  EXPECT_EQ(VerbOf({"safex"}), "");
  EXPECT_TRUE(VerbTakesProgram("run"));
  EXPECT_TRUE(VerbTakesProgram("submit"));
  EXPECT_FALSE(VerbTakesProgram("check"));
  EXPECT_FALSE(VerbTakesProgram("audit"));
}

TEST(StartedAsOciRuntimeTest, ByTheLastComponentOfArgvZero) {
  auto started_as = [](const char* arg0) {
    const char* argv[] = {arg0, "state", "x"};
    return StartedAsOciRuntime(3, argv);
  };
  EXPECT_TRUE(started_as("safex-oci"));
  EXPECT_TRUE(started_as("/usr/local/bin/safex-oci"));
  EXPECT_FALSE(started_as("safex"));
  EXPECT_FALSE(started_as("/usr/local/bin/safex-oci/"));
  EXPECT_FALSE(started_as("/opt/safex-oci.d/safex"));
  EXPECT_FALSE(started_as("safex-oci2"));
  EXPECT_FALSE(StartedAsOciRuntime(0, nullptr));
}

// The executable and its core parse with one function (cli.h). A verb the registered set lacks
// is a usage error; an empty argv (execve with none) too, not a read before its start.
TEST(ParseAndRunTest, UsageErrorsAreStatusTwo) {
  auto none = [](CLI::App&, int*, const ProgramArgv*) {};
  std::string arg0 = "safex", arg1 = "check";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  EXPECT_EQ(ParseAndRun(0, argv + 2, none), 2);
  EXPECT_EQ(ParseAndRun(2, argv, none), 2);
}

TEST(ParseAndRunTest, TheChosenVerbsStatusIsTheProcesss) {
  auto register_verbs = [](CLI::App& app, int* exit_code, const ProgramArgv* program) {
    app.add_subcommand("echo")->callback([exit_code, program] {
      *exit_code = program->has_value() ? static_cast<int>((*program)->size()) : 99;
    });
  };
  std::vector<std::string> words = {"safex", "echo", "--", "a", "--json"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  EXPECT_EQ(ParseAndRun(5, argv.data(), register_verbs), 2);  // echo takes no program
  EXPECT_EQ(ParseAndRun(2, argv.data(), register_verbs), 99);
}

// The built binary, without root: usage errors come before anything else.
TEST(CliUsageTest, VerbsWithoutAProgramRefuseASeparator) {
  testing::TempDir dir;
  testing::ProcessOutput r = testing::RunSafex({"check", dir.Join("x.policy"), "--", "/bin/true"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("takes no program"));
}

TEST(CliUsageTest, RunAndSubmitWantTheProgramAfterTheSeparator) {
  testing::TempDir dir;
  for (const char* verb : {"run", "submit"}) {
    testing::ProcessOutput r = testing::RunSafex({verb, "--policy", "p", "/bin/echo", "hi"});
    EXPECT_EQ(r.status, 2) << verb << ": " << r.err;
    testing::ProcessOutput e = testing::RunSafex({verb, "--policy", "p", "--"});
    EXPECT_EQ(e.status, 2) << verb << ": " << e.err;
    EXPECT_THAT(e.err, HasSubstr("after \"--\"")) << verb;
  }
}

// The program's options are not safex's even right after a repeatable option: submit to a socket
// that does not exist is refused for the socket named before "--", never one named after it.
TEST(CliUsageTest, SubmitTakesNoOptionFromTheProgramsArgv) {
  testing::TempDir dir;
  testing::ProcessOutput r =
      testing::RunSafex({"submit", "--policy", "p", "--socket", dir.Join("real.sock"), "--",
                         "/bin/echo", "--socket", dir.Join("evil.sock"), "--json"});
  EXPECT_EQ(r.status, 125) << r.err;
  EXPECT_THAT(r.err, HasSubstr("real.sock"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("evil.sock")));
  EXPECT_EQ(r.out, "");  // --json after "--" is the program's, not a request for JSON output
}

}  // namespace
}  // namespace safex::cli
