// The input snapshot (supervisor/input_stage.h) without root: what it copies and what it refuses.
#include "supervisor/input_stage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace safex::supervisor {
namespace {

using ::testing::HasSubstr;

TEST(StagedInputTest, CopiesPlainFilesReadOnly) {
  testing::TempDir src, parent;
  src.Write("a.txt", "A");
  ASSERT_EQ(mkdir(src.Join("sub").c_str(), 0700), 0);
  src.Write("sub/b.txt", "BB");
  InputLimits limits;
  limits.max_bytes = 1 << 20;
  auto staged = StagedInput::Create(src.path(), parent.Join("in"), limits);
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_EQ(staged->bytes(), 3u);
  struct stat st {};
  ASSERT_EQ(stat(parent.Join("in/sub/b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
}

// Regression: staging opened files without O_NONBLOCK, so a file swapped for a FIFO between the
// listing and the open blocked root in open(2) forever.
TEST(StagedInputTest, AFileSwappedForAFifoIsRefusedWithoutBlocking) {
  testing::TempDir src, parent;
  src.Write("a.txt", "A");
  InputLimits limits;
  limits.max_bytes = 1 << 20;
  limits.before_open = [&](const std::string&) {
    unlink(src.Join("a.txt").c_str());
    ASSERT_EQ(mkfifo(src.Join("a.txt").c_str(), 0600), 0);
  };
  auto result = std::async(std::launch::async, [&] {
    return StagedInput::Create(src.path(), parent.Join("in"), limits).status();
  });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Unblock the stuck open so that the test can end, then fail.
    int w = open(src.Join("a.txt").c_str(), O_WRONLY | O_NONBLOCK);
    ADD_FAILURE() << "staging blocked on a FIFO";
    if (w >= 0) close(w);
  }
  Status st = result.get();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("changed while it was copied"));
  EXPECT_FALSE(std::filesystem::exists(parent.Join("in")));
}

}  // namespace
}  // namespace safex::supervisor
