// Several processes append at once (creating the log together, too) and the chain stays linear;
// readers query and verify while a writer appends.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::TempDir;

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ConcurrencyTest, ManyWriterProcessesKeepOneLinearChain) {
  TempDir dir;
  const std::string db = dir.File("audit.db");  // does not exist: the writers race to create it
  constexpr int kWriters = 4;
  constexpr int kRunsEach = 150;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    // A short pause between each run's start and end, as a real run has.
    pids.push_back(Spawn({testing::WriterBinary(), db, "w" + std::to_string(w),
                          std::to_string(kRunsEach), "-1", "2000"}));
  }
  for (pid_t p : pids) EXPECT_EQ(Wait(p), 0);

  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto rep = (*log)->Verify();
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->ok) << rep->problem;
  EXPECT_EQ(rep->events, 2u * kWriters * kRunsEach);
  RunFilter f;
  f.state = "finished";
  EXPECT_EQ((*log)->ListRuns(f)->size(), static_cast<size_t>(kWriters * kRunsEach));
  // The writers really interleaved (otherwise this test proves little).
  std::string first_writer;
  int switches = 0;
  ASSERT_TRUE((*log)
                  ->ForEachEvent([&](const EventRow& e) {
                    std::string w(e.text(kColRunId).substr(0, 2));
                    if (w != first_writer) ++switches;
                    first_writer = w;
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_GT(switches, kWriters);
}

// Writers appending back to back (the worst case for lock fairness) all get through.
TEST(ConcurrencyTest, BackToBackWritersAllFinish) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  constexpr int kWriters = 3;
  constexpr int kRunsEach = 100;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pids.push_back(
        Spawn({testing::WriterBinary(), db, "b" + std::to_string(w), std::to_string(kRunsEach)}));
  }
  for (pid_t p : pids) EXPECT_EQ(Wait(p), 0);
  auto log = AuditLog::Open(db, testing::TestOptions(dir));
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto rep = (*log)->Verify();
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->ok) << rep->problem;
  EXPECT_EQ(rep->events, 2u * kWriters * kRunsEach);
}

TEST(ConcurrencyTest, ReadersQueryAndVerifyWhileAWriterAppends) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  { ASSERT_TRUE(AuditLog::Open(db, testing::TestOptions(dir)).ok()); }
  pid_t writer = Spawn({testing::WriterBinary(), db, "w", "400"});
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<int> iterations(3, 0);
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      AuditOptions ro;
      ro.read_only = true;
      ro.busy_timeout_ms = 10000;
      auto log = AuditLog::Open(db, ro);
      if (!log.ok()) {
        ++failures;
        return;
      }
      uint64_t last = 0;
      while (!done.load()) {
        RunFilter f;
        f.limit = 10;
        auto runs = (*log)->ListRuns(f);
        VerifyOptions vo;
        vo.integrity_check = false;
        auto rep = (*log)->Verify(vo);
        if (!runs.ok() || !rep.ok() || !rep->ok || rep->events < last) {
          ++failures;
          ADD_FAILURE() << (runs.ok() ? "" : runs.status().message())
                        << (rep.ok() ? rep->problem : rep.status().message());
          return;
        }
        last = rep->events;
        ++iterations[r];
      }
    });
  }
  EXPECT_EQ(Wait(writer), 0);
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int n : iterations) EXPECT_GT(n, 0);
  EXPECT_EQ(testing::RawQuery(db, "SELECT count(*) FROM events"), "800");
}

}  // namespace
}  // namespace safex::audit
