// drivers/gvisor/stdio_files.h on this host: the program's stdout and stderr as files on a private
// tmpfs, read as they grow, and everything of them gone after Close(): the mount at once, the
// inotify instance shortly after (its close, which waits for the kernel, runs on a thread of its
// own). Root (the tmpfs).
#include "drivers/gvisor/stdio_files.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/small_file.h"
#include "tests/support/test_support.h"

namespace safex::drivers::gvisor {
namespace {

using namespace std::chrono_literals;

bool IsInotify(const std::string& fd) {
  char target[PATH_MAX];
  const ssize_t len = readlink(("/proc/self/fd/" + fd).c_str(), target, sizeof target - 1);
  return len > 0 && std::string(target, static_cast<size_t>(len)) == "anon_inode:inotify";
}

// This process's inotify instances.
int InotifyFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += IsInotify(e->d_name) ? 1 : 0;
  closedir(d);
  return n;
}

bool Mounted(const std::string& dir) {
  auto info = ReadSmallFile("/proc/self/mountinfo", 1 << 20);
  return info && info->find(" " + dir + " ") != std::string::npos;
}

TEST(StdioFilesTest, OutputIsReadAsItGrowsAndNothingOfItOutlivesClose) {
  SAFEX_REQUIRE_ROOT();
  char tmpl[] = "/tmp/sxstdio.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const int before = InotifyFds();
  for (int round = 0; round < 20; ++round) {
    auto files = StdioFiles::Create(dir, 1 << 20);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_TRUE(IsInotify(std::to_string(files->notify_fd())));
    ASSERT_EQ(write(files->child_stdout(), "out", 3), 3);
    ASSERT_EQ(write(files->child_stderr(), "err", 3), 3);
    std::string got[2];
    EXPECT_TRUE(files->Read([&](int which, std::string_view bytes) { got[which] += bytes; }));
    EXPECT_EQ(got[0], "out");
    EXPECT_EQ(got[1], "err");
    ASSERT_TRUE(files->Close().ok());
    EXPECT_FALSE(Mounted(dir)) << "round " << round;
  }
  // The instances' closes finish on their own threads: every one of the 20 is gone soon after.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (InotifyFds() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(InotifyFds(), before);
  EXPECT_EQ(rmdir(dir.c_str()), 0);
}

}  // namespace
}  // namespace safex::drivers::gvisor
