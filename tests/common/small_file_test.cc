// common/small_file: the exception-free whole-file reader behind /proc reads (proc_stat, the
// sweep's boot id, the containment suite's leak check).
#include "common/small_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

namespace safex {
namespace {

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sxsmallfile.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    unlink((dir_ + "/f").c_str());
    rmdir(dir_.c_str());
  }
  void Write(const std::string& text) {
    FILE* f = fopen((dir_ + "/f").c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fwrite(text.data(), 1, text.size(), f), text.size());
    fclose(f);
  }
  std::string dir_;
};

TEST_F(SmallFileTest, ReadsAllOfAFileLongerThanOneBuffer) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += std::to_string(i) + (i % 7 == 0 ? '\0' : '\n');
  Write(text);
  EXPECT_EQ(ReadSmallFile(dir_ + "/f"), text);
}

TEST_F(SmallFileTest, StopsAtTheCap) {
  Write(std::string(10000, 'a') + "tail");
  EXPECT_EQ(ReadSmallFile(dir_ + "/f", 5000), std::string(5000, 'a'));
  EXPECT_EQ(ReadSmallFile(dir_ + "/f", 0), "");
}

TEST_F(SmallFileTest, AnEmptyFileIsEmptyNotAbsent) {
  Write("");
  EXPECT_EQ(ReadSmallFile(dir_ + "/f"), "");
}

TEST_F(SmallFileTest, WhatCannotBeReadIsNothing) {
  EXPECT_FALSE(ReadSmallFile(dir_ + "/absent"));
  EXPECT_FALSE(ReadSmallFile(dir_));  // a directory: open succeeds, read fails (EISDIR)
}

}  // namespace
}  // namespace safex
