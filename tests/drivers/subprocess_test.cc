// common/subprocess: spawn through execve with an explicit environment and fd map, pidfd waits
// and kills, the {step, errno} report of a failed child, RAII kill-and-reap.
#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/unique_fd.h"

namespace safex {
namespace {

using namespace std::chrono_literals;

// Runs argv with stdout captured; returns {status, stdout}.
struct Ran {
  ExitStatus status;
  std::string out;
};

Ran RunCapture(SpawnOptions so) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (so.fds.empty()) so.fds = {{0, devnull.get()}, {1, w.get()}, {2, w.get()}};
  auto child = Subprocess::Spawn(so);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) return {};
  w.Reset();
  Ran ran;
  char buf[4096];
  ssize_t n;
  while ((n = read(r.get(), buf, sizeof buf)) > 0) ran.out.append(buf, static_cast<size_t>(n));
  auto st = child->Wait();
  EXPECT_TRUE(st.ok() && st->has_value());
  if (st.ok() && st->has_value()) ran.status = **st;
  return ran;
}

TEST(SubprocessTest, ArgvIsPassedVerbatimWithoutAShell) {
  SpawnOptions so;
  so.argv = {"/bin/echo", "$HOME", "`id`", "a;b", "|", "*", "'q'", "\"d\"", "$(true)", ""};
  Ran r = RunCapture(so);
  EXPECT_EQ(r.out, "$HOME `id` a;b | * 'q' \"d\" $(true) \n");
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 0);
}

TEST(SubprocessTest, EnvironmentIsExactlyWhatWasGiven) {
  setenv("SAFEX_SHOULD_NOT_LEAK", "1", 1);
  SpawnOptions so;
  so.argv = {"/usr/bin/env"};
  so.env = {"A=1", "B=two words"};
  Ran r = RunCapture(so);
  EXPECT_EQ(r.out, "A=1\nB=two words\n");
  unsetenv("SAFEX_SHOULD_NOT_LEAK");
}

TEST(SubprocessTest, OnlyMappedDescriptorsReachTheChild) {
  // A descriptor without O_CLOEXEC would survive a plain fork+exec; it must not here.
  UniqueFd stray(open("/dev/null", O_RDONLY));
  ASSERT_TRUE(stray.valid());
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  SpawnOptions so;
  // /proc/self/fd of the `ls` process: 0, 1, 2, 5 and the directory fd ls itself opens (3).
  so.argv = {"/bin/ls", "/proc/self/fd"};
  so.fds = {{0, devnull.get()}, {1, w.get()}, {2, devnull.get()}, {5, devnull.get()}};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  w.Reset();
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(r.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ASSERT_TRUE(child->Wait().ok());
  EXPECT_EQ(out, "0\n1\n2\n3\n5\n");
}

TEST(SubprocessTest, FdMapHandlesSwapsAndHighSources) {
  // Map two pipes onto each other's numbers (1 <- b, 2 <- a) to exercise the two-phase shuffle.
  int a[2], b[2];
  ASSERT_EQ(pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(b, O_CLOEXEC), 0);
  UniqueFd ar(a[0]), aw(a[1]), br(b[0]), bw(b[1]);
  int high = fcntl(aw.get(), F_DUPFD_CLOEXEC, 900);
  ASSERT_GE(high, 900);
  UniqueFd high_w(high);
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "echo out; echo err >&2"};
  so.fds = {{1, bw.get()}, {2, high_w.get()}};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  aw.Reset();
  bw.Reset();
  high_w.Reset();
  char buf[64];
  ssize_t n = read(br.get(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "out\n");
  n = read(ar.get(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "err\n");
  ASSERT_TRUE(child->Wait().ok());
}

TEST(SubprocessTest, ExecFailureIsReportedWithStepAndErrno) {
  SpawnOptions so;
  so.argv = {"/nonexistent/program"};
  auto child = Subprocess::Spawn(so);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kNotFound);
  EXPECT_NE(child.status().message().find("execve"), std::string::npos)
      << child.status().ToString();

  char tmpl[] = "/tmp/safex-noexec-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  chmod(tmpl, 0644);
  so.argv = {tmpl};  // exists, not executable (root too needs an x bit)
  child = Subprocess::Spawn(so);
  unlink(tmpl);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kPermissionDenied);

  so.argv = {"/bin/true"};
  so.cwd = "/nonexistent-dir";
  child = Subprocess::Spawn(so);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("chdir"), std::string::npos);
}

TEST(SubprocessTest, RejectsBadArguments) {
  SpawnOptions so;
  so.argv = {"true"};
  EXPECT_EQ(Subprocess::Spawn(so).status().code(), Status::Code::kInvalidArgument);
  so.argv = {"/bin/true"};
  so.env = {"NOEQUALS"};
  EXPECT_EQ(Subprocess::Spawn(so).status().code(), Status::Code::kInvalidArgument);
  so.env = {};
  so.fds = {{1, 0}, {1, 0}};
  EXPECT_EQ(Subprocess::Spawn(so).status().code(), Status::Code::kInvalidArgument);
  so.argv = {};
  so.fds = {};
  EXPECT_EQ(Subprocess::Spawn(so).status().code(), Status::Code::kInvalidArgument);
}

TEST(SubprocessTest, ExitCodesAndSignals) {
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "exit 7"};
  Ran r = RunCapture(so);
  EXPECT_TRUE(r.status.exited);
  EXPECT_EQ(r.status.code, 7);
  EXPECT_EQ(r.status.ShellCode(), 7);

  so.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
  r = RunCapture(so);
  EXPECT_FALSE(r.status.exited);
  EXPECT_EQ(r.status.signal, SIGSEGV);
  EXPECT_EQ(r.status.ShellCode(), 128 + SIGSEGV);
}

TEST(SubprocessTest, WaitHonoursTheDeadlineAndSignalUsesThePidfd) {
  SpawnOptions so;
  so.argv = {"/bin/sleep", "30"};
  auto child = Subprocess::Spawn(so);
  ASSERT_TRUE(child.ok());
  auto t0 = Subprocess::Clock::now();
  auto st = child->Wait(t0 + 100ms);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->has_value());
  EXPECT_GE(Subprocess::Clock::now() - t0, 100ms);
  ASSERT_TRUE(child->Signal(SIGTERM).ok());
  st = child->Wait(Subprocess::Clock::now() + 5s);
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_EQ((*st)->signal, SIGTERM);
  // Signalling a reaped child is harmless.
  EXPECT_TRUE(child->Signal(SIGKILL).ok());
}

TEST(SubprocessTest, ChildIgnoringSignalsStillDiesOnKill) {
  // An ignored SIGTERM in the parent must not be inherited (dispositions are reset), and a child
  // that traps SIGTERM itself still dies by KillAndWait.
  struct sigaction ign = {};
  struct sigaction old = {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGTERM, &ign, &old);
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 30"};
  auto child = Subprocess::Spawn(so);
  sigaction(SIGTERM, &old, nullptr);
  ASSERT_TRUE(child.ok());
  ExitStatus st = child->KillAndWait();
  EXPECT_EQ(st.signal, SIGKILL);
}

TEST(SubprocessTest, NewSessionHasNoControllingTerminal) {
  SpawnOptions so;
  so.argv = {"/usr/bin/python3", "-c",
             "import os\ntry:\n os.open('/dev/tty', os.O_RDWR); print('tty')\nexcept OSError: "
             "print('none', os.getsid(0) == os.getpid())"};
  Ran r = RunCapture(so);
  EXPECT_EQ(r.out, "none True\n");
}

TEST(SubprocessTest, DestructorKillsAndReaps) {
  pid_t pid;
  {
    SpawnOptions so;
    so.argv = {"/bin/sleep", "30"};
    auto child = Subprocess::Spawn(so);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
    ASSERT_EQ(kill(pid, 0), 0);
  }
  // Reaped: the pid is gone (not even a zombie of ours).
  EXPECT_NE(access(("/proc/" + std::to_string(pid)).c_str(), F_OK), 0);
}

TEST(SubprocessTest, ParentDeathSignalFiresWhenTheSpawningThreadEnds) {
  // PR_SET_PDEATHSIG is tied to the thread that spawned the child: when it exits, the child gets
  // the signal. Ownership moves to this thread, which then reaps it.
  Subprocess child;
  std::thread t([&] {
    SpawnOptions so;
    so.argv = {"/bin/sleep", "30"};
    auto c = Subprocess::Spawn(so);
    ASSERT_TRUE(c.ok());
    child = std::move(*c);
  });
  t.join();
  ASSERT_TRUE(child.valid());
  auto st = child.Wait(Subprocess::Clock::now() + 5s);
  ASSERT_TRUE(st.ok() && st->has_value()) << "child survived its spawning thread";
  EXPECT_EQ((*st)->signal, SIGKILL);
}

TEST(SubprocessTest, ManySpawnsLeakNoDescriptors) {
  auto count_fds = [] {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
    return n;
  };
  int before = count_fds();
  for (int i = 0; i < 50; ++i) {
    SpawnOptions so;
    so.argv = {"/bin/true"};
    auto c = Subprocess::Spawn(so);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->Wait().ok());
  }
  EXPECT_EQ(count_fds(), before);
}

// The child shares the parent's memory until execve (no go barrier, subprocess.h): what it
// resets is its own. The parent's signal handlers stay installed, and spawns from several
// threads at once each run their own program with their own arguments and descriptors.
void CountingHandler(int) {}

TEST(SubprocessTest, TheChildsSignalResetDoesNotReachTheParent) {
  struct sigaction mine = {};
  struct sigaction old = {};
  struct sigaction now = {};
  mine.sa_handler = CountingHandler;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &mine, &old), 0);
  SpawnOptions so;
  so.argv = {"/bin/true"};
  Ran r = RunCapture(so);
  EXPECT_TRUE(r.status.exited && r.status.code == 0);
  ASSERT_EQ(sigaction(SIGUSR2, &old, &now), 0);
  EXPECT_EQ(now.sa_handler, &CountingHandler) << "the child's reset to SIG_DFL reached the parent";
}

TEST(SubprocessTest, SpawnsFromManyThreadsAtOnceRunTheirOwnPrograms) {
  constexpr int kThreads = 4, kEach = 25;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < kEach; ++i) {
        SpawnOptions so;
        const std::string word = "t" + std::to_string(t) + "-" + std::to_string(i);
        so.argv = {"/bin/echo", word};
        Ran r = RunCapture(so);
        if (r.out != word + "\n" || !r.status.exited || r.status.code != 0) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace safex
