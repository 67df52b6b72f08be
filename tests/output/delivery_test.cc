// All-or-nothing delivery of output files (supervisor/output/delivery.h). Regression: an existing
// name in the destination (a symlink, correctly not followed) let the files before it be written
// while the run was reported ok.
#include "supervisor/output/delivery.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"

namespace safex::output {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class DeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dest_.Reset(open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dest_.valid());
  }
  size_t Entries() {
    size_t n = 0;
    for (auto it = fs::recursive_directory_iterator(dir_.path()); it != fs::end(it); ++it) ++n;
    return n;
  }
  testing::TempDir dir_;
  UniqueFd dest_;
};

TEST_F(DeliveryTest, WritesEveryFileBelowTheDestination) {
  auto d = Delivery::Write(dest_.get(), {{"a.txt", "A"}, {"sub/dir/b.txt", "B"}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->files(), 2u);
  EXPECT_EQ(Read(dir_.Join("a.txt")), "A");
  EXPECT_EQ(Read(dir_.Join("sub/dir/b.txt")), "B");
  struct stat st {};
  ASSERT_EQ(stat(dir_.Join("a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(DeliveryTest, AnExistingNameWritesNothingAtAll) {
  ASSERT_EQ(symlink("/etc/passwd", dir_.Join("b.txt").c_str()), 0);
  auto d = Delivery::Write(dest_.get(), {{"a.txt", "A"}, {"b.txt", "B"}, {"c.txt", "C"}});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("\"b.txt\" already exists"));
  EXPECT_THAT(d.status().message(), HasSubstr("nothing was written"));
  EXPECT_FALSE(fs::exists(dir_.Join("a.txt")));
  EXPECT_FALSE(fs::exists(dir_.Join("c.txt")));
  EXPECT_TRUE(fs::is_symlink(dir_.Join("b.txt")));
  EXPECT_NE(Read("/etc/passwd"), "B");
}

TEST_F(DeliveryTest, ASymlinkOnTheWayIsNeverFollowed) {
  testing::TempDir elsewhere;
  ASSERT_EQ(symlink(elsewhere.path().c_str(), dir_.Join("sub").c_str()), 0);
  auto d = Delivery::Write(dest_.get(), {{"a.txt", "A"}, {"sub/x.txt", "X"}});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("symlink on its way"));
  EXPECT_FALSE(fs::exists(elsewhere.Join("x.txt")));
  EXPECT_FALSE(fs::exists(dir_.Join("a.txt")));
}

TEST_F(DeliveryTest, EveryConflictIsCountedInTheMessage) {
  for (const char* n : {"1", "2", "3", "4", "5"}) dir_.Write(n, "old");
  auto d = Delivery::Write(
      dest_.get(), {{"1", "x"}, {"2", "x"}, {"3", "x"}, {"4", "x"}, {"5", "x"}, {"6", "x"}});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("and 2 more"));
  EXPECT_FALSE(fs::exists(dir_.Join("6")));
  EXPECT_EQ(Read(dir_.Join("1")), "old");
}

TEST_F(DeliveryTest, AFailureWhileWritingRemovesWhatWasWritten) {
  DeliveryOptions o;
  o.before_write = [](size_t i) {
    return i == 2 ? Status::ResourceExhausted("disk full (simulated)") : Status::Ok();
  };
  auto d =
      Delivery::Write(dest_.get(), {{"a.txt", "A"}, {"new/dir/b.txt", "B"}, {"c.txt", "C"}}, o);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("disk full"));
  EXPECT_THAT(d.status().message(), HasSubstr("were removed"));
  EXPECT_EQ(Entries(), 0u) << "the destination must be as it was";
}

TEST_F(DeliveryTest, RollbackRemovesOnlyWhatItCreated) {
  ASSERT_EQ(mkdir(dir_.Join("keep").c_str(), 0700), 0);
  dir_.Write("keep/mine.txt", "caller's");
  auto d = Delivery::Write(dest_.get(), {{"keep/a.txt", "A"}, {"fresh/b.txt", "B"}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  // The caller replaces one delivered file with its own before the rollback.
  ASSERT_EQ(unlink(dir_.Join("keep/a.txt").c_str()), 0);
  dir_.Write("keep/a.txt", "replaced by the caller");
  ASSERT_TRUE(d->Rollback().ok());
  EXPECT_EQ(Read(dir_.Join("keep/a.txt")), "replaced by the caller");
  EXPECT_EQ(Read(dir_.Join("keep/mine.txt")), "caller's");
  EXPECT_FALSE(fs::exists(dir_.Join("fresh")));
  EXPECT_TRUE(d->Rollback().ok());  // idempotent
}

TEST_F(DeliveryTest, BadPathsAndDuplicatesAreRefused) {
  for (const char* bad : {"", "../x", "a//b", "./a", "a/"}) {
    auto d = Delivery::Write(dest_.get(), {{bad, "x"}});
    EXPECT_FALSE(d.ok()) << bad;
  }
  auto dup = Delivery::Write(dest_.get(), {{"a", "x"}, {"a", "y"}});
  EXPECT_FALSE(dup.ok());
  EXPECT_EQ(Entries(), 0u);
}

}  // namespace
}  // namespace safex::output
