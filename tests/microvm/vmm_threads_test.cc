// VmmThreads and PidOfPidfd (drivers/microvm/vmm_threads.h), on this test's own process: what the
// record of a silent guest says of its QEMU's threads.
#include "drivers/microvm/vmm_threads.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace safex::microvm {
namespace {

// A thread named like one of QEMU's, asleep in read(2) until its pipe is closed.
TEST(VmmThreadsTest, NamesEachThreadWithItsStateAndCpuTime) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  std::thread sleeper([fd = p[0]] {
    pthread_setname_np(pthread_self(), "CPU 0/TCG");
    char c;
    (void)!read(fd, &c, 1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string threads = VmmThreads(getpid());
  close(p[1]);
  sleeper.join();
  close(p[0]);
  EXPECT_NE(threads.find("CPU 0/TCG S "), std::string::npos) << threads;
  EXPECT_NE(threads.find(" ms"), std::string::npos) << threads;
  EXPECT_LE(VmmThreads(getpid(), 40).size(), 40u);
}

TEST(VmmThreadsTest, NoProcessNoThreads) {
  EXPECT_EQ(VmmThreads(0), "");
  EXPECT_EQ(VmmThreads(-1), "");
}

TEST(PidOfPidfdTest, APidfdNamesItsProcessAndAPipeNothing) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  ASSERT_GE(pidfd, 0);
  EXPECT_EQ(PidOfPidfd(pidfd), getpid());
  close(pidfd);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  EXPECT_EQ(PidOfPidfd(p[0]), 0);
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(PidOfPidfd(-1), 0);
}

}  // namespace
}  // namespace safex::microvm
