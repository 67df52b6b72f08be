// A writer SIGKILLed at random moments loses no committed event: after >= 100 kills, every event
// the writer reported as committed is present with the same hash, PRAGMA integrity_check is ok,
// and the chain verifies.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "audit/audit_log.h"
#include "common/unique_fd.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::TempDir;

constexpr int kTrials = 120;

struct Writer {
  pid_t pid = -1;
  UniqueFd report;  // read end
};

Writer SpawnWriter(const std::string& db, const std::string& prefix) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) abort();
  Writer w;
  std::string bin = testing::WriterBinary();
  w.pid = fork();
  if (w.pid == 0) {
    dup2(p[1], 3);  // dup2 clears close-on-exec on fd 3
    const char* args[] = {bin.c_str(), db.c_str(), prefix.c_str(), "0", "3", nullptr};
    execv(args[0], const_cast<char* const*>(args));
    _exit(127);
  }
  close(p[1]);
  w.report.Reset(p[0]);
  return w;
}

// Reads what is available (or everything, once the writer is dead and the pipe is closed).
std::string Drain(int fd, int timeout_ms) {
  std::string out;
  char buf[65536];
  pollfd pfd{fd, POLLIN, 0};
  while (poll(&pfd, 1, timeout_ms) > 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    timeout_ms = 0;
  }
  return out;
}

TEST(CrashTest, SigkilledWriterLosesNoCommittedEvent) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  { ASSERT_TRUE(AuditLog::Open(db, testing::TestOptions(dir)).ok()); }

  std::mt19937_64 rng(20261129);
  std::map<int64_t, std::string> committed;  // seq -> hash, as reported by the writers
  int kills_mid_write = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Writer w = SpawnWriter(db, "t" + std::to_string(trial));
    std::string reported;
    if (trial % 2 == 1) {
      // Wait for the first commit, so the kill lands while the writer is busy appending.
      reported = Drain(w.report.get(), 30000);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 8000));
    ASSERT_EQ(kill(w.pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(w.pid, &status, 0), w.pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited on its own: status " << status;
    reported += Drain(w.report.get(), 0);
    std::istringstream lines(reported);
    int64_t seq;
    std::string hash;
    int n = 0;
    while (lines >> seq >> hash) {
      committed[seq] = hash;
      ++n;
    }
    if (n > 0) ++kills_mid_write;

    // After every kill: each reported event is there, byte for byte.
    AuditOptions ro;
    ro.read_only = true;
    auto log = AuditLog::Open(db, ro);
    ASSERT_TRUE(log.ok()) << "trial " << trial << ": " << log.status().message();
    std::map<int64_t, std::string> present;
    ASSERT_TRUE((*log)
                    ->ForEachEvent([&](const EventRow& e) {
                      present[e.seq()] = e.hash;
                      return Status::Ok();
                    })
                    .ok());
    for (const auto& [s, h] : committed) {
      auto it = present.find(s);
      ASSERT_NE(it, present.end()) << "trial " << trial << ": committed event " << s << " lost";
      ASSERT_EQ(it->second, h) << "trial " << trial << ": event " << s << " changed";
    }
  }
  EXPECT_GE(kills_mid_write, kTrials / 2) << "too few kills landed while the writer was writing";

  EXPECT_EQ(testing::RawQuery(db, "PRAGMA integrity_check"), "ok");
  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto rep = (*log)->Verify();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->ok) << rep->problem;
  EXPECT_GE(rep->events, committed.size());
  // The log is still appendable after all that.
  EXPECT_TRUE((*log)->RecordStart(testing::SampleStart("after-the-crashes")).ok());
  std::printf("crash test: %d trials, %zu committed events reported, %llu in the log\n", kTrials,
              committed.size(), static_cast<unsigned long long>(rep->events));
}

}  // namespace
}  // namespace safex::audit
