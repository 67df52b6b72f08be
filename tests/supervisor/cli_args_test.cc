// The command line split at "--" (supervisor/cli_args.h): the program's argv never reaches the
// option parser, and verbs that take no program refuse a "--". Regression for option injection:
// `safex run --policy P --search-path D -- /bin/echo hi --runsc /tmp/evil` made root run /tmp/evil.
#include "supervisor/cli_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

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
