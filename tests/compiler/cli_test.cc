// The policy verbs of the built `safex` binary: exit statuses and output shape.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan/plan_json.h"
#include "tests/compiler/compiler_test_util.h"
#include "tests/support/test_support.h"

namespace safex::compiler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Policy;
using testing::TempDir;

struct CliRun {
  int status = -1;
  std::string out, err;
};

// Runs `safex args...` in `cwd` (argv only, no shell), capturing stdout and stderr.
CliRun Safex(std::vector<std::string> args, const std::string& cwd = "") {
  CliRun r;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return r;
  std::string bin = safex::testing::SafexBinary();
  args.insert(args.begin(), bin);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0 && poll(fds, 2, 30000) > 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

std::string Src() { return safex::testing::SourceDir(); }

TEST(PolicyCliTest, CheckExamples) {
  std::vector<std::string> args = {"check", "--host-config", "policies/host.policy"};
  for (const char* n : {"base-untrusted", "python-untrusted", "node-untrusted", "compile-and-test",
                        "notebook-egress", "trusted-tool"}) {
    args.push_back(std::string("policies/examples/") + n + ".policy");
  }
  CliRun r = Safex(args, Src());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("policies/examples/python-untrusted.policy: ok, plan "));
  EXPECT_EQ(r.err, "");
}

TEST(PolicyCliTest, CheckReportsErrorsWithExitOne) {
  TempDir dir;
  std::string good = dir.Write("good.policy", Policy("good"));
  std::string bad = dir.Write("bad.policy", "policy \"bad\" {\n  trust = untrustd\n}\n");
  CliRun r = Safex({"check", good, bad});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr(bad + ":2:11: error[E026]: unknown trust level `untrustd`"));
  EXPECT_THAT(r.err, HasSubstr("did you mean `untrusted`?"));
  EXPECT_THAT(r.out, HasSubstr(good + ": ok"));
  EXPECT_THAT(r.out, HasSubstr(bad + ": "));
}

TEST(PolicyCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Safex({"check"}).status, 2);
  EXPECT_EQ(Safex({"check", "/nonexistent.policy"}).status, 2);
  EXPECT_EQ(Safex({"compile"}).status, 2);
  EXPECT_EQ(Safex({"diff", "a.policy"}).status, 2);
  EXPECT_EQ(Safex({"check", "--no-such-flag", "x"}).status, 2);
  TempDir dir;
  std::string p = dir.Write("p.policy", Policy("p"));
  CliRun r = Safex({"check", "--host-config", "/nonexistent/host.policy", p});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("does not exist"));
  std::string bad_host = dir.Write("host.policy", "host {\n  ceilings { memroy = 1GiB }\n}\n");
  r = Safex({"check", "--host-config", bad_host, p});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("E020"));
}

// Regression: `safex check` of a host config failed with E028 (it was read as a policy), so an
// operator had no way to check one before restarting the service.
TEST(PolicyCliTest, CheckTakesAHostConfigOnItsOwn) {
  // The shipped example names the group `safex`, which packaging/install.sh creates.
  const std::string shipped = Src() + "/packaging/host.policy";
  CliRun r = Safex({"check", shipped});
  if (getgrnam("safex") != nullptr) {
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(": ok, host config (backends "));
  } else {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("no group named 'safex'"));
  }
  TempDir dir;
  std::string good =
      dir.Write("host.policy",
                "host {\n  backends = [gvisor]\n  service {\n    allow \"*\" { users = "
                "[\"root\", 1001] }\n  }\n}\n");
  CliRun alone = Safex({"check", "--host-config", good});
  EXPECT_EQ(alone.status, 0) << alone.err;
  EXPECT_THAT(alone.out, HasSubstr("ok, host config (backends gvisor; "));

  std::string typo =
      dir.Write("typo.policy", "# comment first\nhost {\n  service { max_conections = 3 }\n}\n");
  CliRun bad = Safex({"check", typo});
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("E020"));
  EXPECT_THAT(bad.err, HasSubstr("max_connections"));  // the did-you-mean
  std::string nobody_known =
      dir.Write("users.policy",
                "host {\n  service {\n    allow \"*\" { users = [\"no-such-user-sx\"] }\n  }\n}\n");
  CliRun unknown = Safex({"check", nobody_known});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no user named 'no-such-user-sx'"));
}

TEST(PolicyCliTest, HostConfigCeilingsApply) {
  TempDir dir;
  std::string p = dir.Write("p.policy", Policy("p"));
  std::string host =
      dir.Write("host.policy", "host {\n  ceilings {\n    memory = 128MiB\n  }\n}\n");
  CliRun r = Safex({"check", "--host-config", host, p});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("error[E064]"));
}

TEST(PolicyCliTest, CompilePrintsCanonicalJsonWithDigest) {
  CliRun r = Safex({"compile", "policies/examples/python-untrusted.policy"}, Src());
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  auto plan = plan::PlanFromJson(r.out.substr(0, r.out.size() - 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan::ToCanonicalJsonWithDigest(*plan) + "\n", r.out);
  EXPECT_THAT(r.out, HasSubstr("\"plan_digest\":\"" + plan::PlanDigest(*plan) + "\""));
  // Same bytes as the golden file.
  CliRun again = Safex({"compile", "policies/examples/python-untrusted.policy"}, Src());
  EXPECT_EQ(again.out, r.out);
}

TEST(PolicyCliTest, CompileRefusesABrokenPolicy) {
  TempDir dir;
  CliRun r =
      Safex({"compile",
             dir.Write("p.policy", Policy("p", "  env {\n    set LD_PRELOAD = \"x\"\n  }\n"))});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
}

TEST(PolicyCliTest, ExplainSummarises) {
  CliRun r = Safex({"explain", "policies/examples/notebook-egress.policy"}, Src());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("untrusted"));
  EXPECT_THAT(r.out, HasSubstr("pypi.org:443 (tcp)"));
  EXPECT_THAT(r.out, HasSubstr("memory 1GiB"));
  EXPECT_THAT(r.out, HasSubstr("plan digest "));
}

TEST(PolicyCliTest, ExplainAndCheckFlagOverrides) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  std::string child = dir.Write(
      "child.policy",
      Policy("child", "  limits {\n    @override(\"SEC-7: big model\") memory = 1GiB\n  }\n",
             "base"));
  CliRun r = Safex({"check", child});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("warning[E053]"));
  EXPECT_THAT(r.out, HasSubstr("1 warning"));
  r = Safex({"explain", child});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.err, HasSubstr("warning[E053]"));
  EXPECT_THAT(r.out, HasSubstr("WARNING limits.memory_bytes"));
  EXPECT_THAT(r.out, HasSubstr("SEC-7: big model"));
}

TEST(PolicyCliTest, FmtCheckAndRewrite) {
  TempDir dir;
  std::string p = dir.Write("p.policy", "policy \"p\" {\ntrust=untrusted\n}\n");
  CliRun r = Safex({"fmt", "--check", p});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("not formatted"));
  r = Safex({"fmt", p});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Safex({"fmt", "--check", p});
  EXPECT_EQ(r.status, 0) << r.out;
  std::string broken = dir.Write("b.policy", "policy \"p\" {\n  memory = 5MB\n}\n");
  r = Safex({"fmt", "--check", broken});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("error[E0"));
}

TEST(PolicyCliTest, ExamplesAreFormatted) {
  CliRun r = Safex(
      {"fmt", "--check", "policies/examples/base-untrusted.policy",
       "policies/examples/python-untrusted.policy", "policies/examples/node-untrusted.policy",
       "policies/examples/compile-and-test.policy", "policies/examples/notebook-egress.policy",
       "policies/examples/trusted-tool.policy", "policies/host.policy"},
      Src());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

TEST(PolicyCliTest, DiffSaysWhatLoosens) {
  TempDir dir;
  std::string a = dir.Write("a.policy", Policy("p"));
  std::string text = Policy("p");
  text.replace(text.find("memory = 512MiB"), 15, "memory = 1GiB");
  text.replace(text.find("pids = 64"), 9, "pids = 32");
  std::string b = dir.Write("b.policy", text);
  CliRun r = Safex({"diff", a, b});
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("LOOSENS   memory raised from 512MiB to 1GiB"));
  EXPECT_THAT(r.out, HasSubstr("tightens  pids lowered from 64 to 32"));
  r = Safex({"diff", b, a});
  EXPECT_EQ(r.status, 1);  // the reverse raises pids
  r = Safex({"diff", a, a});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("no changes"));
  std::string tighter = Policy("p");
  tighter.replace(tighter.find("pids = 64"), 9, "pids = 32");
  r = Safex({"diff", a, dir.Write("c.policy", tighter)});
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("nothing is loosened"));
  r = Safex({"diff", a, dir.Write("d.policy", "policy \"p\" {\n}\n")});
  EXPECT_EQ(r.status, 2);
}

TEST(PolicyCliTest, HostileTextDoesNotReachTheTerminalRaw) {
  TempDir dir;
  std::string p = dir.Write("p.policy", "policy \"p\" {\n  trust = untrusted\x1b[31m\n}\n");
  CliRun r = Safex({"check", p});
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.err, Not(HasSubstr("\x1b[31m")));
}

}  // namespace
}  // namespace safex::compiler
