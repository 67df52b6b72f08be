// The host's session with a guest, against a scripted fake guest on a socketpair: the happy path,
// deadlines, and a hostile guest (wrong phase, oversized frames, too much output, bad versions).
#include "drivers/microvm/vm_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/wire.h"

namespace safex::microvm {
namespace {

using std::chrono::milliseconds;

// Both ends of every channel RunSession watches. "pid" is a pipe standing in for QEMU's pidfd:
// readable (EOF) once its write end is closed, i.e. when "QEMU exits".
struct FakeVm {
  int host_ctl = -1, guest_ctl = -1, host_con = -1, guest_con = -1;
  int err_r = -1, err_w = -1, pid_r = -1, pid_w = -1;
  FakeVm() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    host_ctl = sv[0];
    guest_ctl = sv[1];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    host_con = sv[0];
    guest_con = sv[1];
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    err_r = p[0];
    err_w = p[1];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    pid_r = p[0];
    pid_w = p[1];
  }
  ~FakeVm() {
    for (int fd : {host_ctl, guest_ctl, host_con, guest_con, err_r, err_w, pid_r, pid_w}) {
      if (fd >= 0) close(fd);
    }
  }
  void Send(FrameType t, std::string_view payload) {
    std::string f = EncodeFrame(t, payload);
    ASSERT_EQ(write(guest_ctl, f.data(), f.size()), static_cast<ssize_t>(f.size()));
  }
  void SendRaw(const std::string& bytes) {
    ASSERT_EQ(write(guest_ctl, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void Hello(uint32_t version = kProtocolVersion) {
    Send(FrameType::kHello, EncodeHello({version, "6.1.0-test", 1000, 2000}));
  }
  // The workload's report before its exec, then its start (the host's kGo is not awaited: the
  // socket holds it).
  void Started() {
    Send(FrameType::kEvidence, "SAFEX-LAUNCH 1\n...");
    Send(FrameType::kStarted, "");
  }
  void Exit(int code) {
    ExitReport e;
    e.exit_code = code;
    e.stdout_total = 5;
    Send(FrameType::kExit, EncodeExit(e));
  }
  void Done() {
    Encoder e;
    e.U64(0);
    Send(FrameType::kOutputsDone, e.bytes());
  }
  void QemuExits() {
    close(pid_w);
    pid_w = -1;
  }
  SessionResult Run(const SessionConfig& c) {
    return RunSession(host_ctl, host_con, err_r, pid_r, c);
  }
  // Frames the host wrote to the guest.
  std::vector<Frame> Received() {
    fcntl(guest_ctl, F_SETFL, O_NONBLOCK);
    FrameReader r(kMaxSpecFrame);
    char buf[65536];
    ssize_t n;
    while ((n = read(guest_ctl, buf, sizeof buf)) > 0) r.Feed(buf, static_cast<size_t>(n));
    std::vector<Frame> out;
    while (auto f = r.Next()) out.push_back(*f);
    return out;
  }
};

SessionConfig Config() {
  SessionConfig c;
  c.spec_payload = "SPEC";
  c.output_cap = 100;
  c.boot_timeout = milliseconds(2000);
  c.wall_timeout = milliseconds(2000);
  c.collect_timeout = milliseconds(2000);
  return c;
}

TEST(VmSessionTest, HappyPathDeliversSpecAndStdinAndCollectsEverything) {
  FakeVm vm;
  SessionConfig c = Config();
  const std::string stdin_data(300000, 'i');  // several frames, more than a socket buffer
  c.stdin_data = &stdin_data;
  std::vector<Frame> got;
  // The guest as the agent behaves: hello, then nothing until the spec and stdin are in.
  std::thread guest([&] {
    vm.Hello();
    FrameReader reader(kMaxSpecFrame);
    char buf[65536];
    bool done = false;
    while (!done) {
      ssize_t n = read(vm.guest_ctl, buf, sizeof buf);
      if (n <= 0) return;
      reader.Feed(buf, static_cast<size_t>(n));
      while (auto f = reader.Next()) {
        got.push_back(*f);
        done = done || f->type == FrameType::kStdinEnd;
      }
    }
    vm.Started();
    vm.Send(FrameType::kStdout, "hello");
    vm.Send(FrameType::kStderr, "warn");
    vm.Exit(3);
    vm.Done();
  });
  SessionResult r = vm.Run(c);
  guest.join();
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_TRUE(r.violation.empty()) << r.violation;
  EXPECT_FALSE(r.timed_out);
  ASSERT_TRUE(r.hello.has_value());
  EXPECT_EQ(r.hello->kernel_release, "6.1.0-test");
  EXPECT_EQ(r.stdout_data, "hello");
  EXPECT_EQ(r.stderr_data, "warn");
  ASSERT_TRUE(r.exit.has_value());
  EXPECT_EQ(r.exit->exit_code, 3);
  EXPECT_TRUE(r.outputs_complete);
  EXPECT_LE(r.t_hello, r.t_started);
  EXPECT_LE(r.t_started, r.t_exit);

  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got[0].type, FrameType::kSpec);
  EXPECT_EQ(got[0].payload, "SPEC");
  std::string in;
  for (size_t i = 1; i + 1 < got.size(); ++i) {
    EXPECT_EQ(got[i].type, FrameType::kStdinData);
    EXPECT_LE(got[i].payload.size(), kMaxDataFrame);
    in += got[i].payload;
  }
  EXPECT_EQ(in, *c.stdin_data);
  EXPECT_EQ(got.back().type, FrameType::kStdinEnd);
}

TEST(VmSessionTest, TheEvidenceIsAnsweredBeforeTheProgramMayStart) {
  {
    FakeVm vm;
    vm.Hello();
    vm.Send(FrameType::kEvidence, "report");
    vm.Send(FrameType::kStarted, "");
    vm.Exit(0);
    vm.Done();
    SessionConfig c = Config();
    std::string seen;
    c.on_evidence = [&seen](std::string_view r) {
      seen = std::string(r);
      return true;
    };
    SessionResult r = vm.Run(c);
    EXPECT_TRUE(r.violation.empty()) << r.violation;
    EXPECT_EQ(seen, "report");
    EXPECT_FALSE(r.refused_by_evidence);
    bool go = false;
    for (const Frame& f : vm.Received()) go = go || f.type == FrameType::kGo;
    EXPECT_TRUE(go);
  }
  {
    // Refused: the session ends at once, nothing is answered, kStarted is never accepted.
    FakeVm vm;
    vm.Hello();
    vm.Send(FrameType::kEvidence, "report");
    vm.Send(FrameType::kStarted, "");
    SessionConfig c = Config();
    c.on_evidence = [](std::string_view) { return false; };
    SessionResult r = vm.Run(c);
    EXPECT_TRUE(r.refused_by_evidence);
    EXPECT_EQ(r.phase, Phase::kDone);
    EXPECT_EQ(r.t_started.count(), 0);
    for (const Frame& f : vm.Received()) EXPECT_NE(f.type, FrameType::kGo);
  }
  {
    // A guest that skips its report is not believed to have started anything.
    FakeVm vm;
    vm.Hello();
    vm.Send(FrameType::kStarted, "");
    SessionResult r = vm.Run(Config());
    EXPECT_NE(r.violation.find("unexpected frame type 3"), std::string::npos) << r.violation;
  }
}

TEST(VmSessionTest, ProbeBootStopsAtHello) {
  FakeVm vm;
  vm.Hello();
  SessionConfig c = Config();
  c.spec_payload.clear();
  SessionResult r = vm.Run(c);
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_TRUE(r.hello.has_value());
  EXPECT_TRUE(vm.Received().empty());  // no spec sent
}

// A pooled VM's preparation (stop_when_set_up) with a guest that says hello, then `then`.
SessionResult Preparation(FakeVm& vm, FrameType then, std::string_view payload) {
  vm.Hello();
  vm.Send(then, payload);
  SessionConfig c = Config();
  c.stop_when_set_up = true;
  return vm.Run(c);
}

// A pooled VM's preparation: hello, the spec ahead of its request, then the agent's kSetUp ends
// the session with the VM set up. Nothing else is sent: no stdin, no kGo.
TEST(VmSessionTest, APooledPreparationEndsAtSetUp) {
  FakeVm vm;
  SessionResult r = Preparation(vm, FrameType::kSetUp, "");
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_TRUE(r.violation.empty()) << r.violation;
  EXPECT_TRUE(r.set_up);
  std::vector<Frame> sent = vm.Received();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type, FrameType::kSpec);
  EXPECT_EQ(sent[0].payload, "SPEC");
}

// kSetUp only ends a preparation; and a preparation, whose spec has no program, takes no
// program's report: either is a violation, and no kGo is sent.
TEST(VmSessionTest, SetUpOutsideAPreparationAndAReportInsideOneAreViolations) {
  {
    FakeVm vm;
    vm.Hello();
    vm.Send(FrameType::kSetUp, "");
    SessionResult r = vm.Run(Config());
    EXPECT_NE(r.violation.find("unexpected frame type 13"), std::string::npos) << r.violation;
    EXPECT_FALSE(r.set_up);
  }
  {
    FakeVm vm;
    SessionResult r = Preparation(vm, FrameType::kEvidence, "SAFEX-LAUNCH 1\n...");
    EXPECT_NE(r.violation.find("unexpected frame type 11"), std::string::npos) << r.violation;
    for (const Frame& f : vm.Received()) EXPECT_NE(f.type, FrameType::kGo);
  }
}

// The hand-over of a VM set up earlier: its request and stdin go first, on a channel whose hello
// came in an earlier session (no spec again), then it is a cold run's session to the end.
TEST(VmSessionTest, AHandOverSendsTheRequestAndStdinThenRunsAsAColdRunDoes) {
  FakeVm vm;
  SessionConfig c = Config();
  c.resumed_hello = Hello{kProtocolVersion, "6.1.0-test", 1000, 2000};
  c.request_payload = "REQUEST";
  const std::string stdin_data = "in";
  c.stdin_data = &stdin_data;
  vm.Started();
  vm.Send(FrameType::kStdout, "hi");
  vm.Exit(0);
  vm.Done();
  SessionResult r = vm.Run(c);
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_TRUE(r.violation.empty()) << r.violation;
  EXPECT_EQ(r.stdout_data, "hi");
  ASSERT_TRUE(r.exit.has_value());
  EXPECT_EQ(r.exit->exit_code, 0);
  std::vector<Frame> sent = vm.Received();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].type, FrameType::kRequest);
  EXPECT_EQ(sent[0].payload, "REQUEST");
  EXPECT_EQ(sent[1].type, FrameType::kStdinData);
  EXPECT_EQ(sent[1].payload, "in");
  EXPECT_EQ(sent[2].type, FrameType::kStdinEnd);
  EXPECT_EQ(sent[3].type, FrameType::kGo);
}

TEST(VmSessionTest, NoHelloMeansABootTimeout) {
  FakeVm vm;
  SessionConfig c = Config();
  c.boot_timeout = milliseconds(200);
  auto t0 = std::chrono::steady_clock::now();
  SessionResult r = vm.Run(c);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.phase, Phase::kBooting);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(200));
}

TEST(VmSessionTest, WallTimeStartsAtStartedAndEndsTheRun) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kStdout, "partial");
  SessionConfig c = Config();
  c.wall_timeout = milliseconds(300);
  SessionResult r = vm.Run(c);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.phase, Phase::kRunning);
  EXPECT_EQ(r.stdout_data, "partial");
  EXPECT_GE(r.t_end - r.t_started, milliseconds(300));
}

// RunRequest::cancel: a silent guest (no fd ever becomes ready) is left within cancel_poll of the
// token being set, in the phase it was in, with what it sent so far; on_started fired once.
TEST(VmSessionTest, CancelTokenEndsARunningSessionPromptly) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kStdout, "partial");
  std::atomic<int> cancel{0};
  int started = 0;
  SessionConfig c = Config();
  c.wall_timeout = milliseconds(60000);
  c.cancel = &cancel;
  c.on_started = [&started] { ++started; };
  std::chrono::steady_clock::time_point set_at;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(300));
    set_at = std::chrono::steady_clock::now();
    cancel = 15;
  });
  SessionResult r = vm.Run(c);
  auto returned = std::chrono::steady_clock::now();
  t.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.phase, Phase::kRunning);
  EXPECT_EQ(r.stdout_data, "partial");
  EXPECT_EQ(started, 1);
  EXPECT_LT(returned - set_at, milliseconds(500));  // 20 ms poll; slack for a loaded host
}

TEST(VmSessionTest, CancelTokenEndsABootingSession) {
  FakeVm vm;
  std::atomic<int> cancel{2};
  SessionConfig c = Config();
  c.boot_timeout = milliseconds(60000);
  c.cancel = &cancel;
  auto t0 = std::chrono::steady_clock::now();
  SessionResult r = vm.Run(c);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.phase, Phase::kBooting);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5000));
}

TEST(VmSessionTest, GuestSetupErrorBeforeStartIsReported) {
  FakeVm vm;
  vm.Hello();
  vm.Send(FrameType::kSetupError, "mount erofs: \x1b[31mbad\x01");
  SessionResult r = vm.Run(Config());
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_EQ(r.guest_setup_error, "mount erofs: ?[31mbad?");  // sanitised
}

TEST(VmSessionTest, SetupErrorAfterTheProgramStartedIsAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kSetupError, "nothing ran, honest");
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("unexpected frame type 2 while running"), std::string::npos)
      << r.violation;
  EXPECT_TRUE(r.guest_setup_error.empty());
}

TEST(VmSessionTest, WrongProtocolVersionIsRefused) {
  FakeVm vm;
  vm.Hello(kProtocolVersion + 1);
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("rebuild the initramfs"), std::string::npos) << r.violation;
  EXPECT_TRUE(vm.Received().empty());  // the spec is never sent to a guest we do not understand
}

TEST(VmSessionTest, OutputBeforeStartIsAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Send(FrameType::kStdout, "early");
  SessionResult r = vm.Run(Config());
  EXPECT_FALSE(r.violation.empty());
  EXPECT_TRUE(r.stdout_data.empty());
}

TEST(VmSessionTest, OversizedFrameHeaderEndsTheSession) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.SendRaw(std::string("\x04\x00\x00\x00\x00\x00\x00\x40", 8));  // 1 GiB of stdout announced
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("announces"), std::string::npos) << r.violation;
}

TEST(VmSessionTest, PerTypeSizeLimitsApply) {
  FakeVm vm;
  vm.Hello();
  vm.Send(FrameType::kStarted, "x");  // kStarted carries nothing
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("oversized frame of type 3"), std::string::npos) << r.violation;
}

TEST(VmSessionTest, MoreOutputThanTheCapIsCutAndFlagged) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kStdout, std::string(60, 'a'));
  vm.Send(FrameType::kStderr, std::string(60, 'b'));
  vm.Exit(0);
  SessionResult r = vm.Run(Config());  // cap 100
  EXPECT_TRUE(r.output_cap_hit);
  EXPECT_EQ(r.stdout_data.size() + r.stderr_data.size(), 100u);
  EXPECT_EQ(r.stderr_data, std::string(40, 'b'));
  EXPECT_FALSE(r.exit.has_value());  // the session stopped at the cap
}

TEST(VmSessionTest, OutputFilesWithoutOutputMountsAreAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Exit(0);
  FileHeader h;
  h.path = "x";
  vm.Send(FrameType::kFileBegin, EncodeFileHeader(h));
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("without output mounts"), std::string::npos) << r.violation;
  EXPECT_TRUE(r.exit.has_value());
}

TEST(VmSessionTest, MalformedExitReportIsAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kExit, "short");
  SessionResult r = vm.Run(Config());
  EXPECT_EQ(r.violation, "malformed exit report");
}

// The agent's heartbeats while the program runs: the first and the latest are kept (with when they
// arrived), their text sanitised; they do not end the run or count as output.
TEST(VmSessionTest, HeartbeatsAreKeptForTheRecord) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kHeartbeat, EncodeHeartbeat({5'000'000'000ull, 10'000'000, false, "R"}));
  vm.Send(FrameType::kStdout, "out");
  vm.Send(FrameType::kHeartbeat,
          EncodeHeartbeat({6'000'000'000ull, 900'000'000, false, "S pipe_w\x1b[2Jrite"}));
  vm.Send(FrameType::kHeartbeat,
          EncodeHeartbeat({7'000'000'000ull, 950'000'000, false, "S pipe_w\x1brite"}));
  SessionConfig c = Config();
  c.wall_timeout = milliseconds(300);
  SessionResult r = vm.Run(c);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.stdout_data, "out");
  EXPECT_EQ(r.heartbeats, 3u);
  ASSERT_TRUE(r.first_heartbeat && r.last_heartbeat);
  EXPECT_EQ(r.first_heartbeat->beat.guest_ns, 5'000'000'000ull);
  EXPECT_EQ(r.first_heartbeat->beat.program_state, "R");
  EXPECT_EQ(r.last_heartbeat->beat.guest_ns, 7'000'000'000ull);
  EXPECT_EQ(r.last_heartbeat->beat.cpu_ns, 950'000'000u);
  EXPECT_EQ(r.last_heartbeat->beat.program_state, "S pipe_w?rite");
  EXPECT_GE(r.last_heartbeat->at, r.t_started);
  EXPECT_LE(r.last_heartbeat->at, r.t_end);
}

TEST(VmSessionTest, AMalformedHeartbeatIsAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kHeartbeat, "short");
  SessionResult r = vm.Run(Config());
  EXPECT_EQ(r.violation, "malformed heartbeat");
}

// Before kStarted the agent has nothing to beat for: the frame is out of phase.
TEST(VmSessionTest, AHeartbeatBeforeTheProgramStartedIsAViolation) {
  FakeVm vm;
  vm.Hello();
  vm.Send(FrameType::kHeartbeat, EncodeHeartbeat({1, 0, false, "R"}));
  SessionResult r = vm.Run(Config());
  EXPECT_NE(r.violation.find("unexpected frame type 12"), std::string::npos) << r.violation;
}

// A running guest that says nothing for 2 s gets an empty kNudge (its interrupt wakes a vCPU that
// idles for a lost timer interrupt), then one per 2 s; the silence is kept for the record.
TEST(VmSessionTest, ASilentRunningGuestIsNudged) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  SessionConfig c = Config();
  c.wall_timeout = milliseconds(4500);
  SessionResult r = vm.Run(c);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.nudges, 2u);
  EXPECT_GE(r.longest_silence, milliseconds(4500));
  int nudges = 0;
  for (const Frame& f : vm.Received()) {
    if (f.type == FrameType::kNudge) {
      EXPECT_EQ(f.payload, "");
      ++nudges;
    }
  }
  EXPECT_EQ(nudges, 2);
}

// A guest that beats every half second is never nudged, and its longest silence is a beat's gap.
TEST(VmSessionTest, ABeatingGuestIsNotNudged) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  std::thread guest([&vm] {
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(milliseconds(500));
      vm.Send(FrameType::kHeartbeat, EncodeHeartbeat({static_cast<uint64_t>(i), 0, false, "R"}));
    }
    vm.Exit(0);
    vm.Done();
  });
  SessionConfig c = Config();
  c.wall_timeout = milliseconds(10000);
  SessionResult r = vm.Run(c);
  guest.join();
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.phase, Phase::kDone);
  EXPECT_EQ(r.heartbeats, 6u);
  EXPECT_EQ(r.nudges, 0u);
  EXPECT_LT(r.longest_silence, milliseconds(1500));
  for (const Frame& f : vm.Received()) EXPECT_NE(f.type, FrameType::kNudge);
}

TEST(VmSessionTest, QemuExitingEndsTheSessionAfterDrainingTheChannel) {
  FakeVm vm;
  vm.Hello();
  vm.Started();
  vm.Send(FrameType::kStdout, "last words");
  const char msg[] = "qemu: something broke\n";
  ASSERT_EQ(write(vm.err_w, msg, sizeof msg - 1), static_cast<ssize_t>(sizeof msg - 1));
  vm.QemuExits();
  SessionResult r = vm.Run(Config());
  EXPECT_TRUE(r.vmm_exited);
  EXPECT_EQ(r.phase, Phase::kRunning);
  EXPECT_EQ(r.stdout_data, "last words");
  EXPECT_EQ(r.vmm_stderr, "qemu: something broke\n");
}

TEST(VmSessionTest, ConsoleKeepsOnlyASanitisedTail) {
  FakeVm vm;
  std::string noise(20000, 'n');
  noise += "\x07tail";
  ASSERT_EQ(write(vm.guest_con, noise.data(), noise.size()), static_cast<ssize_t>(noise.size()));
  SessionConfig c = Config();
  c.boot_timeout = milliseconds(300);
  c.console_tail_bytes = 64;
  SessionResult r = vm.Run(c);
  EXPECT_EQ(r.console_tail.size(), 64u);
  EXPECT_EQ(r.console_tail.substr(59), "?tail");
}

TEST(SanitizeTest, KeepsPrintableAsciiAndNewlines) {
  EXPECT_EQ(Sanitize("ok\n\ttab\x1b[0m\xff", 100), "ok\n\ttab?[0m?");
  EXPECT_EQ(Sanitize("abcdef", 3), "def");
}

}  // namespace
}  // namespace safex::microvm
