// The run lifecycle (supervisor/runner.h) without root and without a real backend: a FakeDriver
// behind the registry (drivers/backends.h) pins what the Runner decides itself: the order of the
// audit events, how refusals are recorded, the precedence of verdicts (a limit over a validator's
// rejection), and that nothing the program produced is shown, or delivered, when its end event
// cannot be written. Runs under ASan+UBSan with the other unit tests.
#include "supervisor/runner.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex::supervisor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A backend that runs nothing: it returns what the test programs, and remembers what it was
// asked. `on_run` may collect output files or sabotage the audit log mid-run.
class FakeDriver : public drivers::Driver {
 public:
  const char* name() const override { return "fake"; }
  Status Probe() override {
    ++full_probes;
    return probe;
  }
  Status ProbeForMadeSandbox() override {
    ++made_probes;
    return probe_for_made;
  }
  Status CheckRequest(const plan::Plan& plan, const drivers::RunRequest& r) const override {
    SAFEX_RETURN_IF_ERROR(Driver::CheckRequest(plan, r));
    return check;
  }
  Result<drivers::RunResult> Run(const plan::Plan& plan, const drivers::RunRequest& r) override {
    ++runs;
    last_argv = r.argv;
    if (on_run) on_run(plan, r);
    return result;
  }
  Result<drivers::RunResult> RunPrepared(std::unique_ptr<drivers::PreparedSandbox>,
                                         const plan::Plan&, const drivers::RunRequest&) override {
    ++pooled_runs;
    return result;
  }
  Status CleanupStale(int* cleaned) override {
    *cleaned = 0;
    return Status::Ok();
  }
  Status CleanupStaleRun(const std::string&, bool* cleaned) override {
    *cleaned = false;
    return Status::Ok();
  }

  Status probe = Status::Ok();
  Status probe_for_made = Status::Ok();
  Status check = Status::Ok();
  Result<drivers::RunResult> result = drivers::RunResult{};
  std::function<void(const plan::Plan&, const drivers::RunRequest&)> on_run;
  int runs = 0;
  int pooled_runs = 0;
  int full_probes = 0;
  int made_probes = 0;
  std::vector<std::string> last_argv;
};

class FakeSandbox : public drivers::PreparedSandbox {
 public:
  explicit FakeSandbox(std::string digest)
      : PreparedSandbox("fake-sandbox", std::move(digest), "", drivers::RealtimeNs()) {}
  bool Healthy() override { return true; }
};

// One pooled sandbox of `digest`. `gone_before_take`: HasReady says one is there, but another
// run takes it first (Take finds none).
class OneSandboxSource : public SandboxSource {
 public:
  explicit OneSandboxSource(std::string digest) : digest_(std::move(digest)) {}
  std::unique_ptr<drivers::PreparedSandbox> Take(const std::string&, const std::string& digest,
                                                 bool) override {
    if (gone_before_take || taken || digest != digest_) return nullptr;
    taken = true;
    return std::make_unique<FakeSandbox>(digest_);
  }
  bool HasReady(const std::string&, const std::string& digest, bool) const override {
    return !taken && digest == digest_;
  }
  bool gone_before_take = false;
  bool taken = false;

 private:
  std::string digest_;
};

drivers::RunResult Exited(int code, std::string out = "") {
  drivers::RunResult r;
  r.exit_code = code;
  r.stdout_stream.data = out;
  r.stdout_stream.total_bytes = out.size();
  r.backend_mode = "fake";
  return r;
}

// A session whose commands all print "hi" and exit 0.
class FakeSession : public drivers::SessionSandbox {
 public:
  explicit FakeSession(std::string digest)
      : SessionSandbox("fake-session", std::move(digest), drivers::RealtimeNs()) {}
  Result<drivers::RunResult> Exec(const drivers::RunRequest&) override {
    ++execs;
    return Exited(0, "hi\n");
  }
  Status WriteFile(const std::string&, std::string_view, uint32_t) override {
    return Status::Unavailable("not used");
  }
  Result<std::string> ReadFile(const std::string&, uint64_t) override {
    return Status::Unavailable("not used");
  }
  bool Alive() override { return true; }
  int execs = 0;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(chmod(state_.path().c_str(), 0755), 0);
    // A policy of the language, compiled and verified as `safex run` does; its plan names gVisor,
    // which the registry maps to the fake.
    std::string policy = dir_.Write("fake.policy",
                                    "policy \"fake\" extends \"base-untrusted\" {\n"
                                    "  validate stdout { max = 64KiB  reject /SECRET-[0-9]+/ }\n"
                                    "  validate file \"/data/out/*.txt\" { max = 1KiB }\n"
                                    "}\n");
    RunReport refusal;
    auto prepared = PreparePlan(policy, {testing::SourceDir() + "/policies/examples"},
                                plan::DefaultCeilings(), &refusal);
    ASSERT_TRUE(prepared.ok()) << refusal.diagnostics << prepared.status().message();
    prepared_ = std::move(prepared).value();
    std::map<plan::Backend, std::unique_ptr<drivers::Driver>> drivers;
    auto fake = std::make_unique<FakeDriver>();
    fake_ = fake.get();
    drivers[plan::Backend::kGvisor] = std::move(fake);
    backends_ = std::make_unique<drivers::Backends>(std::move(drivers));
    audit::AuditOptions ao;
    ao.key_path = dir_.Join("audit.key");
    ao.busy_timeout_ms = 200;
    auto log = audit::AuditLog::Open(dir_.Join("audit.db"), ao);
    ASSERT_TRUE(log.ok()) << log.status().message();
    log_ = std::move(log).value();
  }

  RunReport Execute(std::vector<std::string> argv, std::string output_dir = "",
                    SandboxSource* sandboxes = nullptr) {
    RunSpec spec;
    spec.argv = std::move(argv);
    spec.output_dir = std::move(output_dir);
    return ExecuteSpec(std::move(spec), sandboxes);
  }
  RunReport ExecuteSpec(RunSpec spec, SandboxSource* sandboxes = nullptr) {
    RunnerOptions o;
    o.state_root = state_.path();
    o.backends = backends_.get();
    o.sandboxes = sandboxes;
    Runner runner(o);
    spec.requester.uid = 4242;
    return runner.Execute(prepared_, std::move(spec), *log_);
  }

  // How often the backend was probed so far: for a made sandbox's run, and fully.
  void ExpectProbes(int for_made_sandbox, int full) {
    EXPECT_EQ(fake_->made_probes, for_made_sandbox);
    EXPECT_EQ(fake_->full_probes, full);
  }

  // Refused before anything started: one refusal event, the reason says why.
  void ExpectRefusal(const RunReport& r, const std::string& reason) {
    EXPECT_EQ(r.verdict, Verdict::kRefused);
    EXPECT_THAT(r.reason, HasSubstr(reason));
    EXPECT_THAT(Events(r.run_id), ElementsAre("refusal"));
  }

  // The kinds of the events of `run_id`, in log order.
  std::vector<std::string> Events(const std::string& run_id) {
    std::vector<std::string> kinds;
    auto d = log_->GetRun(run_id);
    if (!d.ok()) return kinds;
    for (const auto& e : d->events) kinds.emplace_back(e.text(audit::kColKind));
    return kinds;
  }

  testing::TempDir dir_, state_;
  PreparedPlan prepared_;
  FakeDriver* fake_ = nullptr;
  std::unique_ptr<drivers::Backends> backends_;
  std::unique_ptr<audit::AuditLog> log_;
};

TEST_F(RunnerTest, ARunIsStartedThenEndedInTheLog) {
  fake_->result = Exited(0, "hello\n");
  RunReport r = Execute({"/bin/echo", "hello"});
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.exit_status, 0);
  ASSERT_TRUE(r.stdout_report.has_value());
  EXPECT_EQ(r.stdout_report->delivered, "hello\n");
  EXPECT_THAT(Events(r.run_id), ElementsAre("start", "end"));
  EXPECT_THAT(fake_->last_argv, ElementsAre("/bin/echo", "hello"));
  auto d = log_->GetRun(r.run_id);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->run.verdict, "ok");
  ASSERT_TRUE(d->run.requester.uid.has_value());
  EXPECT_EQ(*d->run.requester.uid, 4242u);
}

TEST_F(RunnerTest, EveryRefusalIsOneRecordedRefusalAndNothingRuns) {
  struct Case {
    const char* what;
    std::function<void()> arrange;
    std::vector<std::string> argv;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"empty argv", [] {}, {}, "empty argv"},
      {"the backend's probe fails",
       [this] { fake_->probe = Status::Unavailable("no runtime"); },
       {"/bin/true"},
       "backend unavailable: no runtime"},
      {"the backend cannot carry the request",
       [this] {
         fake_->probe = Status::Ok();
         fake_->check = Status::InvalidArgument("argv[1] is not valid UTF-8");
       },
       {"/bin/echo", "x\xff"},
       "not valid UTF-8"},
  };
  for (Case& c : cases) {
    c.arrange();
    RunReport r = Execute(c.argv);
    EXPECT_EQ(r.verdict, Verdict::kRefused) << c.what;
    EXPECT_EQ(r.exit_status, kExitRefused) << c.what;
    EXPECT_THAT(r.reason, HasSubstr(c.reason)) << c.what;
    EXPECT_THAT(Events(r.run_id), ElementsAre("refusal")) << c.what;
    EXPECT_FALSE(r.ran()) << c.what;
  }
  EXPECT_EQ(fake_->runs, 0);
  // A plan for a backend the registry does not have is refused the same way, never run elsewhere.
  prepared_.plan.backend = plan::Backend::kMicrovm;
  fake_->check = Status::Ok();
  ExpectRefusal(Execute({"/bin/true"}), "backend microvm is not available");
  EXPECT_EQ(fake_->runs, 0);
}

// A run a pooled sandbox is ready for makes nothing of what the backend's full probe checks
// (cgroups, state, the runtime's start): it asks only what that sandbox still depends on. A run
// that makes its own sandbox probes fully.
TEST_F(RunnerTest, ARunThatAPooledSandboxIsReadyForProbesOnlyWhatThatSandboxNeeds) {
  fake_->result = Exited(0, "hi\n");
  OneSandboxSource pool(prepared_.digest);
  RunReport pooled = Execute({"/bin/echo", "hi"}, "", &pool);
  EXPECT_EQ(pooled.verdict, Verdict::kOk);
  ASSERT_TRUE(pooled.pooled.has_value());
  EXPECT_EQ(fake_->pooled_runs, 1);
  ExpectProbes(1, 0);

  RunReport cold = Execute({"/bin/echo", "hi"}, "", &pool);  // the pool is empty now
  EXPECT_EQ(cold.verdict, Verdict::kOk);
  EXPECT_FALSE(cold.pooled.has_value());
  EXPECT_EQ(fake_->runs, 1);
  ExpectProbes(1, 1);

  // What the made sandbox depends on is gone: refused before anything is recorded as started.
  OneSandboxSource another(prepared_.digest);
  fake_->probe_for_made = Status::Unavailable("runtime replaced");
  ExpectRefusal(Execute({"/bin/echo", "hi"}, "", &another),
                "backend unavailable: runtime replaced");
  EXPECT_EQ(fake_->pooled_runs, 1);
}

// A session's command runs in the session's sandbox, made and checked when the session opened:
// it too probes only what that sandbox still depends on.
TEST_F(RunnerTest, ASessionsCommandProbesOnlyWhatItsSandboxNeeds) {
  FakeSession session(prepared_.digest);
  audit::SessionEvent opened;  // as the service records it when the session opens
  opened.session_id = "sess-1";
  opened.requester.uid = 4242;
  opened.plan_digest = prepared_.digest;
  ASSERT_TRUE(log_->RecordSession(opened).ok());
  RunSpec spec;
  spec.argv = {"/bin/echo", "hi"};
  spec.session = &session;
  spec.session_id = "sess-1";
  spec.session_exec = 1;
  RunReport r = ExecuteSpec(std::move(spec));
  EXPECT_EQ(r.verdict, Verdict::kOk) << r.reason;
  EXPECT_EQ(session.execs, 1);
  ExpectProbes(1, 0);
  EXPECT_EQ(fake_->runs, 0);
}

// The pooled sandbox the run was probed for was taken by another run first: the run makes its
// own, so it probes fully before it does, and a failing probe stops it before anything runs.
TEST_F(RunnerTest, ARunWhosePooledSandboxWasTakenFirstProbesFullyBeforeItMakesItsOwn) {
  fake_->result = Exited(0, "hi\n");
  OneSandboxSource raced(prepared_.digest);
  raced.gone_before_take = true;
  RunReport cold = Execute({"/bin/echo", "hi"}, "", &raced);
  EXPECT_EQ(cold.verdict, Verdict::kOk);
  EXPECT_FALSE(cold.pooled.has_value());
  ExpectProbes(1, 1);
  EXPECT_EQ(fake_->runs, 1);

  fake_->probe = Status::Unavailable("cgroups not writable");
  RunReport failed = Execute({"/bin/echo", "hi"}, "", &raced);
  EXPECT_EQ(failed.verdict, Verdict::kSetupError);
  EXPECT_THAT(failed.reason, HasSubstr("backend unavailable: cgroups not writable"));
  EXPECT_THAT(Events(failed.run_id), ElementsAre("start", "end"));
  EXPECT_EQ(fake_->full_probes, 2);
  EXPECT_EQ(fake_->runs, 1);
}

TEST_F(RunnerTest, ALimitThatStoppedTheRunOutranksAValidatorsRejection) {
  drivers::RunResult r = Exited(-1, "SECRET-42\n");
  r.limit = drivers::LimitHit::kWallTime;
  r.term_signal = 9;
  fake_->result = r;
  RunReport timed_out = Execute({"/bin/true"});
  EXPECT_EQ(timed_out.verdict, Verdict::kTimeout);
  EXPECT_EQ(timed_out.exit_status, kExitTimeout);
  EXPECT_THAT(timed_out.reason, HasSubstr("SECRET"));  // the rejection is still said
  EXPECT_THAT(timed_out.limits_fired, ElementsAre("wall_time"));
  ASSERT_TRUE(timed_out.stdout_report.has_value());
  EXPECT_TRUE(timed_out.stdout_report->rejected);  // and nothing of it is shown

  fake_->result = Exited(0, "SECRET-42\n");
  RunReport rejected = Execute({"/bin/true"});
  EXPECT_EQ(rejected.verdict, Verdict::kValidatorRejected);
  EXPECT_EQ(rejected.exit_status, kExitValidatorRejected);
  EXPECT_THAT(Events(rejected.run_id), ElementsAre("start", "end"));
}

TEST_F(RunnerTest, ASetupErrorOfTheDriverIsRecordedAsTheRunsEnd) {
  fake_->result = Status::Internal("the sandbox could not be started");
  RunReport r = Execute({"/bin/true"});
  EXPECT_EQ(r.verdict, Verdict::kSetupError);
  EXPECT_EQ(r.exit_status, kExitRefused);
  EXPECT_THAT(r.reason, HasSubstr("the sandbox could not be started"));
  EXPECT_THAT(Events(r.run_id), ElementsAre("start", "end"));
  EXPECT_EQ(log_->GetRun(r.run_id)->run.verdict, "setup-error");
}

TEST_F(RunnerTest, AnExceptionFromADriverNeverCrossesTheBoundary) {
  fake_->on_run = [](const plan::Plan&, const drivers::RunRequest&) {
    throw std::runtime_error("type_error.316");
  };
  RunReport r = Execute({"/bin/true"});
  EXPECT_EQ(r.verdict, Verdict::kSetupError);
  EXPECT_THAT(r.reason, HasSubstr("fake driver failed: type_error.316"));
  EXPECT_THAT(Events(r.run_id), ElementsAre("start", "end"));
}

// The end event cannot be written (another writer holds the log's lock past the busy timeout):
// the result is withheld, the delivered files are taken back, and the run stays open in the log
// for recovery to close.
TEST_F(RunnerTest, NothingIsShownOrDeliveredWhenTheEndCannotBeRecorded) {
  const std::string out = dir_.Join("out");
  sqlite3* blocker = nullptr;
  fake_->result = Exited(0, "visible only with a record\n");
  fake_->on_run = [&](const plan::Plan& plan, const drivers::RunRequest& r) {
    // The program wrote a file to its output mount ...
    testing::TempDir mount;
    mount.Write("result.txt", "payload");
    int fd = open(mount.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (const plan::Mount& m : plan.mounts) {
      if (m.kind == plan::MountKind::kOutput) r.collect_output(m, fd);
    }
    close(fd);
    // ... and before its end event another writer takes the log's write lock and keeps it.
    ASSERT_EQ(sqlite3_open(dir_.Join("audit.db").c_str(), &blocker), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  };
  RunReport r = Execute({"/bin/true"}, out);
  sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(blocker);
  EXPECT_EQ(r.verdict, Verdict::kSetupError);
  EXPECT_EQ(r.exit_status, kExitRefused);
  EXPECT_FALSE(r.ran());
  EXPECT_FALSE(r.stdout_report.has_value());
  EXPECT_FALSE(r.files.has_value());
  EXPECT_FALSE(std::filesystem::exists(out + "/result.txt")) << "delivered without a record";
  EXPECT_THAT(Events(r.run_id), ElementsAre("start"));
}

TEST_F(RunnerTest, OutputFilesAreDeliveredAfterValidation) {
  const std::string out = dir_.Join("out");
  fake_->result = Exited(0);
  fake_->on_run = [](const plan::Plan& plan, const drivers::RunRequest& r) {
    testing::TempDir mount;
    mount.Write("result.txt", "payload");
    int fd = open(mount.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (const plan::Mount& m : plan.mounts) {
      if (m.kind == plan::MountKind::kOutput) r.collect_output(m, fd);
    }
    close(fd);
  };
  RunReport r = Execute({"/bin/true"}, out);
  EXPECT_EQ(r.verdict, Verdict::kOk) << r.reason;
  std::ifstream f(out + "/result.txt");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "payload");
}

}  // namespace
}  // namespace safex::supervisor
