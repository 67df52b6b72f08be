// common/proc_stat: the one /proc/PID/stat parser (recovery's "is the maker gone", the OCI
// runtime's recycled-pid check, the leak checker, the benchmarks' CPU time).
#include "common/proc_stat.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

namespace safex {
namespace {

// proc(5) fields 1..22, with a command name that holds what a hostile program can name itself.
std::string Line(const std::string& comm) {
  return "4242 (" + comm +
         ") S 17 4242 4242 0 -1 4194560 120 0 0 0 31 7 0 0 20 0 1 0 987654 10000 300\n";
}

TEST(ProcStatTest, FieldsCountFromTheLastParenthesis) {
  for (const std::string comm : {"sh", "a b", "x) R 1 2 (y", ")", "((", ""}) {
    std::optional<ProcStat> s = ParseProcStat(Line(comm));
    ASSERT_TRUE(s) << comm;
    EXPECT_EQ(s->comm, comm);
    EXPECT_EQ(s->state, 'S') << comm;
    EXPECT_EQ(s->ppid, 17) << comm;
    EXPECT_EQ(s->utime_ticks, 31u) << comm;
    EXPECT_EQ(s->stime_ticks, 7u) << comm;
    EXPECT_EQ(s->start_ticks, 987654u) << comm;
  }
}

TEST(ProcStatTest, WhatIsNotAStatLineIsNothing) {
  EXPECT_FALSE(ParseProcStat(""));
  EXPECT_FALSE(ParseProcStat("4242 sh S 17"));
  EXPECT_FALSE(ParseProcStat("4242 (sh) S 17 4242 4242 0 -1"));  // fewer than 22 fields
  EXPECT_FALSE(ParseProcStat("4242 (sh) S 17 4242 4242 0 -1 4194560 120 0 0 0 x 7 0 0 20 0 1 0 9"));
  EXPECT_FALSE(
      ParseProcStat("4242 (sh) SS 17 4242 4242 0 -1 4194560 120 0 0 0 1 7 0 0 20 0 1 0 9"));
}

TEST(ProcStatTest, ThisProcessIsReadAsItselfAndStartedAfterBoot) {
  std::optional<ProcStat> me = ReadProcStat(getpid());
  ASSERT_TRUE(me);
  EXPECT_EQ(me->ppid, getppid());
  EXPECT_EQ(me->state, 'R');
  std::optional<int64_t> boot = BootTimeSeconds();
  ASSERT_TRUE(boot);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t started = *boot * 1'000'000'000 + TicksToNs(me->start_ticks);
  EXPECT_LE(started, now.tv_sec * 1'000'000'000LL + now.tv_nsec + 1'000'000'000);
  EXPECT_GT(started, now.tv_sec * 1'000'000'000LL - 24LL * 3600 * 1'000'000'000 * 365);
  EXPECT_FALSE(ReadProcStat(0));
  EXPECT_FALSE(ReadProcStat(0x7ffffff0));  // above pid_max
}

// The bug common/small_file exists for: /proc/PID/stat opened while the process lives and read after
// it was reaped fails with ESRCH, which std::filebuf turned into a thrown std::ios_base::failure.
// Children are reaped by another thread while this one reads them; some reads land in that
// window. A read must give a parsed line or nothing, never an exception.
TEST(ProcStatTest, AProcessEndingWhileItIsReadIsNeverAnException) {
  int read_alive = 0;
  for (int i = 0; i < 300; ++i) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(0);
    std::atomic<bool> reaped{false};
    std::thread reaper([&] {
      waitpid(child, nullptr, 0);
      reaped = true;
    });
    try {
      while (!reaped) {
        if (ReadProcStat(child)) ++read_alive;
      }
    } catch (const std::exception& e) {
      reaper.join();
      FAIL() << "reading the stat of an ending process threw: " << e.what();
    }
    reaper.join();
  }
  EXPECT_GT(read_alive, 0);
}

}  // namespace
}  // namespace safex
