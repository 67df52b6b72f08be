// `safex run` end to end, as a user runs it: the built binary, real runsc, a real SQLite audit
// log. Every test also checks that nothing is left on the machine (LeakCheckedTest).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "tests/support/leak_check.h"
#include "tests/support/other_user.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using ::testing::HasSubstr;
using testing::ProcessOutput;
using testing::RunSafex;
using testing::TempDir;

std::string Example(const std::string& name) {
  return testing::SourceDir() + "/policies/examples/" + name + ".policy";
}

class RunCliTest : public testing::LeakCheckedTest {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
    LeakCheckedTest::SetUp();
  }

  std::vector<std::string> RunArgs(const std::string& policy) {
    return {"run",
            "--policy",
            policy,
            "--audit-db",
            dir_.Join("audit.db"),
            "--audit-key",
            dir_.Join("audit.key")};
  }

  // safex run --policy POLICY [extra...] -- argv...
  ProcessOutput Run(const std::string& policy, const std::vector<std::string>& argv,
                    const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = RunArgs(policy);
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return RunSafex(args);
  }

  nlohmann::json RunJson(const std::string& policy, const std::vector<std::string>& argv,
                         std::vector<std::string> extra = {}) {
    extra.push_back("--json");
    ProcessOutput r = Run(policy, argv, extra);
    last_status_ = r.status;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    if (!j.is_discarded()) {
      EXPECT_EQ(j["exit_status"], r.status);
    }
    return j;
  }

  audit::RunDetail AuditOf(const std::string& run_id) {
    audit::AuditOptions o;
    o.read_only = true;
    auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
    EXPECT_TRUE(log.ok()) << log.status().message();
    if (!log.ok()) return {};
    auto detail = (*log)->GetRun(run_id);
    EXPECT_TRUE(detail.ok()) << detail.status().message();
    return detail.ok() ? *detail : audit::RunDetail{};
  }

  TempDir dir_;
  int last_status_ = -1;
};

TEST_F(RunCliTest, PythonPrintsFortyTwo) {
  ProcessOutput r = Run(Example("python-untrusted"), {"python3", "-c", "print(6*7)"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "42\n");
}

TEST_F(RunCliTest, JsonResultIsRecordedInTheAuditLog) {
  nlohmann::json j = RunJson(Example("python-untrusted"), {"python3", "-c", "print(6*7)"});
  EXPECT_EQ(last_status_, 0);
  EXPECT_EQ(j["verdict"], "ok");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["stdout"]["text"], "42\n");
  EXPECT_EQ(j["stdout"]["bytes"], 3);
  EXPECT_EQ(j["stdout"]["truncated"], false);
  EXPECT_EQ(j["policy"], "python-untrusted");
  EXPECT_EQ(j["backend"], "gvisor");
  EXPECT_EQ(j["plan_digest"].get<std::string>().size(), 64u);
  EXPECT_GT(j["wall_ns"].get<uint64_t>(), 0u);
  EXPECT_GT(j["cpu_ns"].get<uint64_t>(), 0u);
  EXPECT_GT(j["peak_memory_bytes"].get<uint64_t>(), 0u);

  audit::RunDetail d = AuditOf(j["run_id"]);
  EXPECT_EQ(d.run.state, "finished");
  EXPECT_EQ(d.run.verdict, "ok");
  EXPECT_EQ(d.run.plan_digest, j["plan_digest"]);
  EXPECT_EQ(d.run.policy_name, "python-untrusted");
  EXPECT_EQ(d.run.argv, (std::vector<std::string>{"python3", "-c", "print(6*7)"}));
  ASSERT_TRUE(d.run.exit_code.has_value());
  EXPECT_EQ(*d.run.exit_code, 0);
  ASSERT_TRUE(d.run.stdout_summary.has_value());
  EXPECT_EQ(d.run.stdout_summary->sha256, j["stdout"]["sha256"]);
  EXPECT_EQ(d.events.size(), 2u);  // start, end
}

TEST_F(RunCliTest, ProgramExitStatusIsPassedThrough) {
  nlohmann::json j =
      RunJson(Example("python-untrusted"), {"python3", "-c", "import sys; sys.exit(3)"});
  EXPECT_EQ(last_status_, 3);
  EXPECT_EQ(j["verdict"], "nonzero-exit");
  EXPECT_EQ(j["exit_code"], 3);
}

TEST_F(RunCliTest, NotFoundAndNotExecutable) {
  ProcessOutput r = Run(Example("python-untrusted"), {"/no/such/program"});
  EXPECT_EQ(r.status, 127) << r.err;
  r = Run(Example("python-untrusted"), {"/usr"});
  EXPECT_EQ(r.status, 126) << r.err;
}

TEST_F(RunCliTest, WallTimeKillsAt124) {
  nlohmann::json j =
      RunJson(Example("python-untrusted"), {"python3", "-c",
                                            "import signal,time\n"
                                            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                            "while True: time.sleep(1)"});
  EXPECT_EQ(last_status_, 124);
  EXPECT_EQ(j["verdict"], "timeout");
  EXPECT_EQ(j["limit"], "wall_time");
  EXPECT_EQ(AuditOf(j["run_id"]).run.verdict, "timeout");
}

TEST_F(RunCliTest, MemoryLimitKillsAt137) {
  nlohmann::json j =
      RunJson(Example("python-untrusted"),
              {"python3", "-c", "b = []\nwhile True: b.append(bytearray(16 << 20))"});
  EXPECT_EQ(last_status_, 137);
  EXPECT_EQ(j["verdict"], "memory-limit");
  EXPECT_EQ(j["limit"], "memory");
}

TEST_F(RunCliTest, CpuLimitKills) {
  nlohmann::json j = RunJson(Example("python-untrusted"), {"python3", "-c", "while True: pass"});
  // Either limit may fire first on a loaded machine (wall 10s, cpu 5s); both kill and say so.
  EXPECT_TRUE(j["verdict"] == "cpu-limit" || j["verdict"] == "timeout") << j.dump();
  if (j["verdict"] == "cpu-limit") {
    EXPECT_EQ(last_status_, 152);
  }
}

TEST_F(RunCliTest, OutputFloodIsCappedAndStopped) {
  // 1 GiB to stdout against a 1 MiB output limit.
  nlohmann::json j = RunJson(
      Example("python-untrusted"),
      {"python3", "-c",
       "import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024): sys.stdout.buffer.write(b)"});
  EXPECT_EQ(last_status_, 123) << j.dump();
  EXPECT_EQ(j["verdict"], "output-limit");
  EXPECT_EQ(j["stdout"]["truncated"], true);
  EXPECT_LE(j["stdout"]["captured_bytes"].get<uint64_t>(), 1u << 20);
}

TEST_F(RunCliTest, EnvironmentIsExactlyThePolicys) {
  setenv("SAFEX_TEST_SECRET", "leak", 1);
  nlohmann::json j = RunJson(Example("python-untrusted"),
                             {"python3", "-c", "import os; print(' '.join(sorted(os.environ)))"});
  unsetenv("SAFEX_TEST_SECRET");
  EXPECT_EQ(j["stdout"]["text"],
            "HOME LANG PATH PYTHONDONTWRITEBYTECODE PYTHONNOUSERSITE PYTHONUNBUFFERED\n");
}

TEST_F(RunCliTest, ArgvIsPassedVerbatim) {
  std::vector<std::string> hostile = {"$(id)", "; rm -rf /", "`uname`", "*", "a b", "'\"", "$HOME"};
  std::vector<std::string> argv = {"python3", "-c",
                                   "import sys, json; print(json.dumps(sys.argv[1:]))"};
  argv.insert(argv.end(), hostile.begin(), hostile.end());
  nlohmann::json j = RunJson(Example("python-untrusted"), argv);
  EXPECT_EQ(nlohmann::json::parse(j["stdout"]["text"].get<std::string>()), nlohmann::json(hostile));
}

TEST_F(RunCliTest, StdinInputAndOutputFiles) {
  TempDir in, out_parent;
  in.Write("script.py",
           "import json, sys\n"
           "data = sys.stdin.read()\n"
           "json.dump({'len': len(data)}, open('/data/out/result.json', 'w'))\n"
           "print('done')\n");
  // The caller's directory is private (mkdtemp: 0700); the run sees a readable snapshot of it.
  std::string stdin_file = dir_.Write("stdin.txt", "hello");
  std::string out = out_parent.Join("out");
  ProcessOutput r = Run(Example("python-untrusted"), {"python3", "/data/in/script.py"},
                        {"--input", in.path(), "--output", out, "--stdin", stdin_file});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "done\n");
  std::ifstream f(out + "/result.json");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{\"len\": 5}");
}

TEST_F(RunCliTest, InputIsASnapshotOfPlainFilesOnly) {
  TempDir in;
  in.Write("data.txt", "payload");
  ProcessOutput r =
      Run(Example("python-untrusted"),
          {"python3", "-c",
           "import os\n"
           "print(open('/data/in/data.txt').read())\n"
           "try:\n  open('/data/in/new', 'w')\nexcept OSError as e:\n  print(e.errno)"},
          {"--input", in.path()});
  EXPECT_EQ(r.status, 0) << r.err;
  // EACCES (read-only snapshot) or EROFS (read-only mount): either way the input cannot change.
  EXPECT_TRUE(r.out == "payload\n13\n" || r.out == "payload\n30\n") << r.out;
  // A symlink in the input is refused before anything runs, and nothing is left behind.
  ASSERT_EQ(symlink("/etc/shadow", in.Join("link").c_str()), 0);
  nlohmann::json j =
      RunJson(Example("python-untrusted"), {"python3", "-c", "print(1)"}, {"--input", in.path()});
  EXPECT_EQ(last_status_, 125);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("symbolic link"));
}

// Regression (staged input readable by every local user): the snapshot of a caller's 0700 input
// directory was made 0555/0444 under the 0755 state root, and `su nobody -c 'cat STATE/input-*/*'`
// printed the caller's secret while the run went on. Another uid must see nothing of it.
TEST_F(RunCliTest, AnotherLocalUserCannotReadStagedInputDuringTheRun) {
  TempDir in, state;
  ASSERT_EQ(chmod(state.path().c_str(), 0755), 0);  // as /run/safex: the socket lives there
  const std::string secret = "caller-secret-8c1f2e";
  in.Write("secret.txt", secret);
  auto run = std::async(std::launch::async, [&] {
    return Run(Example("python-untrusted"),
               {"python3", "-c",
                "import time; d = open('/data/in/secret.txt').read(); time.sleep(4); print(d)"},
               {"--input", in.path(), "--state-root", state.path()});
  });
  // Wait until the snapshot exists (root can see it), then look as uid 65534.
  bool staged = false;
  for (int i = 0; i < 400 && !staged; ++i) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(state.path(), ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == "secret.txt") staged = true;
    }
    if (!staged) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(staged) << "the input was never staged under " << state.path();
  testing::OtherUserView view = testing::ViewAs(65534, 65534, state.path(), secret);
  ProcessOutput r = run.get();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, secret + "\n");  // the sandbox user could read it
  EXPECT_TRUE(view.ran);
  EXPECT_TRUE(view.with_needle.empty())
      << "uid 65534 read the secret from: " << testing::JoinLines(view.with_needle);
  EXPECT_THAT(view.listable, ::testing::Not(::testing::Contains(HasSubstr("/private"))));
}

TEST_F(RunCliTest, RejectedOutputFileIsNotDelivered) {
  TempDir out_parent;
  std::string out = out_parent.Join("out");
  nlohmann::json j =
      RunJson(Example("python-untrusted"),
              {"python3", "-c", "open('/data/out/result.json', 'w').write('{not json')"},
              {"--output", out});
  EXPECT_EQ(last_status_, 122);
  EXPECT_EQ(j["verdict"], "validator-rejected");
  EXPECT_FALSE(std::filesystem::exists(out + "/result.json"));
}

TEST_F(RunCliTest, SecretShapedStdoutIsRejected) {
  nlohmann::json j =
      RunJson(Example("python-untrusted"), {"python3", "-c", "print('key: AKIA' + 'B' * 16)"});
  EXPECT_EQ(last_status_, 122);
  EXPECT_EQ(j["verdict"], "validator-rejected");
  EXPECT_EQ(j["stdout"]["text"], "");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("reject"));
  EXPECT_EQ(AuditOf(j["run_id"]).run.verdict, "validator-rejected");
}

TEST_F(RunCliTest, FreshFilesystemEveryRun) {
  ProcessOutput a = Run(Example("python-untrusted"),
                        {"python3", "-c", "open('/tmp/marker', 'w').write('x'); print('wrote')"});
  EXPECT_EQ(a.out, "wrote\n") << a.err;
  ProcessOutput b = Run(Example("python-untrusted"),
                        {"python3", "-c", "import os; print(os.path.exists('/tmp/marker'))"});
  EXPECT_EQ(b.out, "False\n") << b.err;
}

TEST_F(RunCliTest, BadPolicyIsRefusedAndAudited) {
  std::string bad = dir_.Write("bad.policy", "policy \"x\" {\n  limits { memroy = 1MiB }\n}\n");
  ProcessOutput r = Run(bad, {"/bin/true"});
  EXPECT_EQ(r.status, 125);
  EXPECT_THAT(r.err, HasSubstr("error[E0"));
  audit::AuditOptions o;
  o.read_only = true;
  auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
  ASSERT_TRUE(log.ok());
  audit::RunFilter filter;
  filter.state = "refused";
  auto runs = (*log)->ListRuns(filter);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_THAT(runs->front().reason, HasSubstr("does not compile"));
}

TEST_F(RunCliTest, MissingRunscIsRefusedNeverRunElsewhere) {
  TempDir out_parent;
  std::string out = out_parent.Join("out");
  nlohmann::json j = RunJson(Example("python-untrusted"),
                             {"python3", "-c", "open('/data/out/ran', 'w').write('x')"},
                             {"--runsc", "/nonexistent/runsc", "--output", out});
  EXPECT_EQ(last_status_, 125);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("runsc"));
  EXPECT_FALSE(std::filesystem::exists(out + "/ran"));
  EXPECT_EQ(AuditOf(j["run_id"]).run.state, "refused");
}

// The plan asks for 256 MiB; the operator's delegated cgroup allows every sandbox 64 MiB, so the
// kernel would enforce less than the plan says (a run could be OOM-killed early and look like its
// own fault, or a looser ancestor could be the only limit). The read-back sees it and refuses.
TEST_F(RunCliTest, AHostThatDoesNotEnforceThePlanRefusesBeforeTheProgramStarts) {
  const std::string parent = "safex-evidence-test-" + std::to_string(getpid());
  const std::string host = dir_.Join("host.policy");
  std::ofstream(host) << "host {\n  backends { gvisor { } }\n  cgroups { parent = \"" << parent
                      << "\"  memory = 64MiB }\n}\n";
  TempDir out_parent;
  const std::string out = out_parent.Join("out");
  nlohmann::json j = RunJson(Example("python-untrusted"),
                             {"python3", "-c", "open('/data/out/ran', 'w').write('x')"},
                             {"--host-config", host, "--output", out});
  // The delegated cgroup is the operator's state, made by the run; this test's own goes now.
  for (const auto& h : std::filesystem::directory_iterator("/sys/fs/cgroup")) {
    rmdir((h.path().string() + "/" + parent).c_str());
  }
  EXPECT_EQ(last_status_, 125);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(),
              HasSubstr("the host does not enforce the plan: cgroup.memory_bytes: the plan asks "
                        "for 268435456"));
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("shows 67108864"));
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_FALSE(std::filesystem::exists(out + "/ran"));
  // Recorded: a start, and an end refused with the evidence that refused it.
  audit::RunDetail d = AuditOf(j["run_id"]);
  EXPECT_EQ(d.run.verdict, "refused");
  EXPECT_EQ(d.events.size(), 2u);
  nlohmann::json recorded = nlohmann::json::parse(d.run.enforcement, nullptr, false);
  ASSERT_TRUE(recorded.is_object()) << d.run.enforcement;
  EXPECT_EQ(recorded, j["enforcement"]);
  bool differs = false;
  for (const auto& f : recorded["fields"]) {
    if (f["name"] == "cgroup.memory_bytes") differs = f["state"] == "differs";
  }
  EXPECT_TRUE(differs) << recorded.dump();
  // And shown to the auditor.
  ProcessOutput show = RunSafex(
      {"audit", "show", "--audit-db", dir_.Join("audit.db"), j["run_id"].get<std::string>()});
  EXPECT_EQ(show.status, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("cgroup.memory_bytes: differs, plan 268435456, seen 67108864"));
}

// A run that went ahead has its evidence: the cgroup limits as the kernel reports them, the
// runtime's version, and what the host cannot see named with the probe that tests it.
TEST_F(RunCliTest, EveryRunRecordsWhatItEnforced) {
  nlohmann::json j = RunJson(Example("python-untrusted"), {"python3", "-c", "print(1)"});
  ASSERT_EQ(last_status_, 0) << j.dump();
  std::map<std::string, nlohmann::json> fields;
  for (const auto& f : j["enforcement"]["fields"]) fields[f["name"].get<std::string>()] = f;
  EXPECT_EQ(fields["cgroup.memory_bytes"]["state"], "matches");
  EXPECT_EQ(fields["cgroup.memory_bytes"]["observed"], "268435456");
  EXPECT_THAT(fields["cgroup.memory_bytes"]["source"].get<std::string>(),
              HasSubstr("host kernel: /sys/fs/cgroup/"));
  EXPECT_EQ(fields["cgroup.pids_max"]["state"], "matches");
  EXPECT_EQ(fields["cgroup.cpu_millis"]["state"], "matches");
  EXPECT_THAT(fields["runtime"]["observed"].get<std::string>(), HasSubstr("runsc"));
  // The runtime binary itself, as sha256sum would name it.
  std::ifstream runsc("/usr/local/bin/runsc", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(runsc)),
                          std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(fields["runtime.sha256"]["observed"], Sha256Hex(bytes));
  // From the launcher inside the sandbox, just before the program's exec.
  for (const char* name :
       {"process.identity", "process.capabilities", "seccomp.mode", "rlimits", "mounts"}) {
    EXPECT_EQ(fields[name]["state"], "matches") << name << ": " << fields[name].dump();
    EXPECT_THAT(fields[name]["source"].get<std::string>(),
                HasSubstr("launcher inside the sandbox"));
  }
  EXPECT_EQ(fields["process.identity"]["observed"], "uid 65534 gid 65534, no supplementary groups");
  EXPECT_EQ(fields["seccomp.mode"]["observed"], "filter");
  EXPECT_THAT(fields["mounts"]["observed"].get<std::string>(), HasSubstr("/usr ro"));
  EXPECT_EQ(fields["platform"]["state"], "matches") << fields["platform"].dump();
  EXPECT_EQ(fields["platform"]["observed"], "systrap");
  EXPECT_EQ(fields["seccomp.filter"]["state"], "not-observed");
  EXPECT_FALSE(fields["seccomp.filter"]["probe"].get<std::string>().empty());
  audit::RunDetail d = AuditOf(j["run_id"]);
  EXPECT_EQ(nlohmann::json::parse(d.run.enforcement), j["enforcement"]);
  ProcessOutput show = RunSafex(
      {"audit", "show", "--audit-db", dir_.Join("audit.db"), j["run_id"].get<std::string>()});
  EXPECT_THAT(show.out, HasSubstr("enforced:"));
  EXPECT_THAT(show.out, HasSubstr("cgroup.memory_bytes: matches 268435456"));
}

TEST_F(RunCliTest, UnwritableAuditLogRefusesBeforeAnythingRuns) {
  TempDir out_parent;
  std::string out = out_parent.Join("out");
  std::vector<std::string> args = {"run",
                                   "--policy",
                                   Example("python-untrusted"),
                                   "--audit-db",
                                   "/proc/safex-no-such-dir/audit.db",
                                   "--output",
                                   out,
                                   "--",
                                   "python3",
                                   "-c",
                                   "open('/data/out/ran', 'w').write('x')"};
  ProcessOutput r = RunSafex(args);
  EXPECT_EQ(r.status, 125);
  EXPECT_THAT(r.err, HasSubstr("audit log"));
  EXPECT_FALSE(std::filesystem::exists(out + "/ran"));
}

// Regression (option injection): after a repeatable option, CLI11 used to take "--" as the end of
// its values and parse the program's own arguments as safex options, so root executed the
// program's `--runsc`, read its `--stdin` and staged its `--input`. Everything after the first
// "--" is the program's argv.
TEST_F(RunCliTest, ProgramArgvThatLooksLikeSafexOptionsIsTheProgramsOwn) {
  TempDir work;
  const std::string marker = work.Join("evil-ran");
  const std::string evil = work.Join("evil");
  {
    std::ofstream f(evil);
    f << "#!/bin/sh\necho ran > " << marker << "\nexec /usr/local/bin/runsc \"$@\"\n";
  }
  ASSERT_EQ(chmod(evil.c_str(), 0755), 0);
  const std::string secret_dir = work.Join("root-only");
  ASSERT_EQ(mkdir(secret_dir.c_str(), 0700), 0);
  { std::ofstream(secret_dir + "/secret") << "root's secret"; }
  const std::string out = work.Join("out");
  const std::string stdin_file = work.Join("stdin");
  { std::ofstream(stdin_file) << "root's stdin"; }

  std::vector<std::string> args = RunArgs(Example("python-untrusted"));
  for (const std::string& a :
       {std::string("--search-path"), testing::SourceDir() + "/policies/examples",
        std::string("--json"), std::string("--")}) {
    args.push_back(a);
  }
  for (const std::string& a :
       {std::string("python3"), std::string("-c"),
        std::string("import os,sys; print(sys.argv[1:]); print(repr(sys.stdin.read())); "
                    "print(os.listdir('/data/in'))"),
        std::string("--runsc"), evil, std::string("--stdin"), stdin_file, std::string("--input"),
        secret_dir, std::string("--output"), out, std::string("--state-root"), work.path()}) {
    args.push_back(a);
  }
  ProcessOutput r = RunSafex(args);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
  EXPECT_EQ(j["verdict"], "ok") << r.out;
  const std::string text = j["stdout"]["text"];
  EXPECT_THAT(text, HasSubstr("'--runsc', '" + evil + "', '--stdin', '" + stdin_file +
                              "', '--input', '" + secret_dir + "', '--output', '" + out));
  EXPECT_THAT(text, HasSubstr("\n''\n[]\n"));  // no stdin, an empty input mount
  EXPECT_THAT(text, ::testing::Not(HasSubstr("root's")));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the program's --runsc was executed";
  EXPECT_FALSE(std::filesystem::exists(out)) << "the program's --output was used";
  EXPECT_EQ(AuditOf(j["run_id"]).run.argv.size(), 13u);
}

// Regression (non-UTF-8 argv aborted `safex run` with an uncaught JSON type_error in the gVisor
// driver, leaving a mount, cgroups, the state dir, the run record and a `running` audit row). Bytes
// are legal in argv on Linux; gVisor's JSON configuration cannot carry them, so the run is
// refused before anything is created, with a reason that says so.
TEST_F(RunCliTest, NonUtf8ArgvIsRefusedBeforeAnythingExists) {
  nlohmann::json j = RunJson(Example("python-untrusted"), {"/bin/echo", "x\xff"});
  EXPECT_EQ(last_status_, 125);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("not valid UTF-8"));
  audit::RunDetail d = AuditOf(j["run_id"]);
  EXPECT_EQ(d.run.state, "refused");
  EXPECT_EQ(d.run.argv, (std::vector<std::string>{"/bin/echo", "x\xff"}));  // the bytes, as given
  // Nothing is left: LeakCheckedTest checks the machine; the records directory holds no record
  // (only the sweep's boot marker, kept on purpose: supervisor/sweep.h).
  if (std::filesystem::exists(dir_.Join("runs"))) {
    for (const auto& e : std::filesystem::directory_iterator(dir_.Join("runs"))) {
      EXPECT_TRUE(e.path().filename().string().starts_with(".boot-swept-")) << e.path();
    }
  }
}

// Regression (a failed delivery reported as success): an existing name in --output (here a
// symlink) let the files before it be written, verdict ok, exit 0, nothing said. Now nothing is
// delivered, the verdict is delivery-failed (exit 121), plain mode says why, and the audit log
// records it.
TEST_F(RunCliTest, AFailedDeliveryIsItsOwnVerdictAndDeliversNothing) {
  TempDir policies, out_parent;
  policies.Write("two-files.policy",
                 "policy \"two-files\" extends \"python-untrusted\" {\n"
                 "  validate file \"/data/out/*.txt\" { max = 1KiB }\n}\n");
  const std::string out = out_parent.Join("out");
  ASSERT_EQ(mkdir(out.c_str(), 0700), 0);
  ASSERT_EQ(symlink("/etc/passwd", (out + "/b.txt").c_str()), 0);
  std::vector<std::string> argv = {
      "python3", "-c",
      "[open('/data/out/%s.txt' % n, 'w').write(n) for n in 'abc']; print('wrote')"};
  std::vector<std::string> extra = {"--search-path", testing::SourceDir() + "/policies/examples",
                                    "--output", out};
  ProcessOutput plain = Run(policies.Join("two-files.policy"), argv, extra);
  EXPECT_EQ(plain.status, 121) << plain.err;
  EXPECT_EQ(plain.out, "wrote\n");
  EXPECT_THAT(plain.err, HasSubstr("safex: delivery-failed"));
  EXPECT_THAT(plain.err, HasSubstr("\"b.txt\" already exists"));
  EXPECT_FALSE(std::filesystem::exists(out + "/a.txt"));
  EXPECT_FALSE(std::filesystem::exists(out + "/c.txt"));
  EXPECT_TRUE(std::filesystem::is_symlink(out + "/b.txt"));

  nlohmann::json j = RunJson(policies.Join("two-files.policy"), argv, extra);
  EXPECT_EQ(last_status_, 121);
  EXPECT_EQ(j["verdict"], "delivery-failed");
  audit::RunDetail d = AuditOf(j["run_id"]);
  EXPECT_EQ(d.run.verdict, "delivery-failed");
  EXPECT_THAT(d.run.reason, HasSubstr("could not be delivered"));

  // With the name free, all three arrive.
  ASSERT_EQ(unlink((out + "/b.txt").c_str()), 0);
  ProcessOutput ok = Run(policies.Join("two-files.policy"), argv, extra);
  EXPECT_EQ(ok.status, 0) << ok.err;
  for (const char* n : {"a", "b", "c"}) {
    std::ifstream f(out + "/" + n + ".txt");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, n);
  }
}

// Regression (nothing reclaimed a killed `safex run`): after SIGKILL of the CLI, its tmpfs mount,
// cgroups, state dir, run record and `running` audit row stayed until a `safex serve` started.
// The next `safex run` on the same audit log sweeps them (the owner lock proves the owner dead).
TEST_F(RunCliTest, TheNextRunSweepsWhatAKilledRunLeft) {
  TempDir state;
  std::vector<std::string> args = RunArgs(Example("python-untrusted"));
  for (const std::string& a :
       {std::string("--state-root"), state.path(), std::string("--"), std::string("python3"),
        std::string("-c"), std::string("import time; time.sleep(20)")}) {
    args.push_back(a);
  }
  args.insert(args.begin(), testing::SafexBinary());
  SpawnOptions so;
  so.argv = args;
  so.parent_death_signal = SIGKILL;
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  so.fds = {{0, devnull.get()}, {1, devnull.get()}, {2, devnull.get()}};
  auto cli = Subprocess::Spawn(so);
  ASSERT_TRUE(cli.ok()) << cli.status().message();
  // Wait for the run to be going: a running row and its sandbox's directory under the state root.
  std::string lost;
  for (int i = 0; i < 300 && lost.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    audit::AuditOptions o;
    o.read_only = true;
    auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
    if (!log.ok()) continue;
    auto runs = (*log)->UnfinishedRuns();
    if (runs.ok() && !runs->empty() && std::filesystem::exists(state.Join((*runs)[0] + "/state"))) {
      lost = (*runs)[0];
    }
  }
  ASSERT_FALSE(lost.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the sandbox is up
  ASSERT_TRUE(cli->Signal(SIGKILL).ok());
  cli->KillAndWait();
  testing::LeakCheckOptions where;
  where.state_root = state.path();
  EXPECT_FALSE(testing::ResourcesNamingRun(lost, where).empty()) << "the kill left nothing";

  ProcessOutput next =
      Run(Example("python-untrusted"), {"/bin/echo", "next"}, {"--state-root", state.path()});
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
  std::vector<std::string> left = testing::ResourcesNamingRun(lost, where);
  EXPECT_TRUE(left.empty()) << testing::JoinLines(left);
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("runs/" + lost + ".run")));
  audit::RunDetail d = AuditOf(lost);
  EXPECT_EQ(d.run.state, "interrupted");
  EXPECT_THAT(d.run.reason, HasSubstr("ended before the run did"));
}

// Regression: a 64 MiB --stdin cost about 200 MB of the supervisor's memory (three copies). It is
// now read once into memory of its exact size and moved, not copied, into the driver.
TEST_F(RunCliTest, ALargeStdinIsHeldOnce) {
  const std::string big = dir_.Join("big-stdin");
  {
    std::ofstream f(big, std::ios::binary);
    std::string mib(1 << 20, 's');
    for (int i = 0; i < 64; ++i) f << mib;
  }
  rusage before{};
  getrusage(RUSAGE_CHILDREN, &before);
  ProcessOutput r =
      Run(Example("python-untrusted"),
          {"python3", "-c", "import sys; print(len(sys.stdin.buffer.read()))"}, {"--stdin", big});
  rusage after{};
  getrusage(RUSAGE_CHILDREN, &after);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "67108864\n");
  // ru_maxrss (KiB) of the largest child so far: this run's `safex run`.
  EXPECT_LT(after.ru_maxrss, 120 * 1024) << "KiB";
  // A FIFO is refused at once, never waited on.
  const std::string fifo = dir_.Join("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  nlohmann::json j = RunJson(Example("python-untrusted"), {"/bin/true"}, {"--stdin", fifo});
  EXPECT_EQ(last_status_, 125);
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("not a regular file"));
}

// Regression (a corrupted audit log was used and signed): runs went ahead over a damaged log. Each
// run checks the events since the last check, and does a full check when the last one is missing
// or old; a log that does not verify refuses the run (fail closed).
TEST_F(RunCliTest, ADamagedAuditLogRefusesRuns) {
  const std::string db = dir_.Join("audit.db");
  ProcessOutput first = Run(Example("python-untrusted"), {"/bin/echo", "one"});
  ASSERT_EQ(first.status, 0) << first.err;
  // An edit of the newest event (an attacker with write access drops the append-only trigger).
  ProcessOutput edit = testing::RunProcess(
      {"/usr/bin/sqlite3", db,
       "DROP TRIGGER events_no_update; UPDATE events SET verdict = 'timeout' WHERE seq = "
       "(SELECT max(seq) FROM events);"});
  ASSERT_EQ(edit.status, 0) << edit.err;
  nlohmann::json j = RunJson(Example("python-untrusted"), {"/bin/echo", "two"});
  EXPECT_EQ(last_status_, 125);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("does not verify"));
  EXPECT_EQ(j["stdout"], nullptr);  // nothing ran

  // Random bytes over an interior page of another log, with no integrity marker left: the next
  // run's check is a full one and refuses.
  TempDir other;
  const std::string db2 = other.Join("audit.db");
  std::vector<std::string> args = {"run",
                                   "--policy",
                                   Example("python-untrusted"),
                                   "--audit-db",
                                   db2,
                                   "--audit-key",
                                   other.Join("audit.key"),
                                   "--",
                                   "/bin/echo",
                                   std::string(3000, 'x')};
  for (int i = 0; i < 12; ++i) ASSERT_EQ(RunSafex(args).status, 0);
  ASSERT_EQ(testing::RunProcess({"/usr/bin/sqlite3", db2,
                                 "PRAGMA wal_checkpoint(TRUNCATE); DELETE FROM integrity_marker;"})
                .status,
            0);
  {
    std::fstream f(db2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 8 * 4096);
    // The whole page: how much of a page holds data depends on the rows' sizes (a leaf keeps
    // its cells at its end, free space in the middle), and any byte of it is the log's.
    f.seekp((size / 4096 / 2) * 4096);
    std::string noise(4096, '\0');
    for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919) & 0xff);
    f.write(noise.data(), static_cast<std::streamsize>(noise.size()));
  }
  ProcessOutput refused = RunSafex(args);
  EXPECT_EQ(refused.status, 125) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("does not verify"));
}

TEST_F(RunCliTest, EightConcurrentRuns) {
  std::vector<std::future<ProcessOutput>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(std::async(std::launch::async, [this, i] {
      return Run(Example("python-untrusted"),
                 {"python3", "-c", "print(" + std::to_string(i) + " * 7)"});
    }));
  }
  for (int i = 0; i < 8; ++i) {
    ProcessOutput r = runs[i].get();
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, std::to_string(i * 7) + "\n");
  }
  audit::AuditOptions o;
  o.read_only = true;
  auto log = audit::AuditLog::Open(dir_.Join("audit.db"), o);
  ASSERT_TRUE(log.ok());
  auto report = (*log)->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok) << report->problem;
  EXPECT_EQ(report->events, 16u);
}

}  // namespace
}  // namespace safex
