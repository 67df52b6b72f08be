// The executable and its core (supervisor/core_library.h): where the core is found, what is
// refused, and what the built files are (the executable loads none of the core's libraries; the
// core refuses another build's executable).
#include "supervisor/core_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex::cli {
namespace {

using ::testing::HasSubstr;

// The owners the process itself would trust (root, itself, and here no other executable owner).
CoreOwners Me() { return {geteuid(), geteuid()}; }

// Two places to look in, each a private temp dir (mode 0700).
class OpenCoreLibraryTest : public ::testing::Test {
 protected:
  std::string Put(const testing::TempDir& dir, const std::string& text = "core") {
    return dir.Write(kCoreLibraryName, text);
  }
  // The inode of what `fd` opened, to tell which file was found.
  static ino_t Inode(int fd) {
    struct stat st {};
    fstat(fd, &st);
    return st.st_ino;
  }
  static ino_t Inode(const std::string& path) {
    struct stat st {};
    lstat(path.c_str(), &st);
    return st.st_ino;
  }
  testing::TempDir first_, second_;
};

TEST_F(OpenCoreLibraryTest, TheFirstPlaceThatHasItWins) {
  const std::string a = Put(first_), b = Put(second_);
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path(), second_.path()}, Me());
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(Inode(fd->get()), Inode(a));
  ASSERT_EQ(unlink(a.c_str()), 0);
  fd = OpenCoreLibrary({first_.path(), second_.path()}, Me());
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(Inode(fd->get()), Inode(b));
}

TEST_F(OpenCoreLibraryTest, NowhereIsNotFoundAndSaysWhereItLooked) {
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path(), first_.Join("absent")}, Me());
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(fd.status().message(), HasSubstr(first_.Join("absent")));
}

TEST_F(OpenCoreLibraryTest, ACoreOthersMayWriteIsRefusedNotPassedOver) {
  const std::string a = Put(first_);
  Put(second_);
  for (mode_t mode : {0664, 0646}) {
    ASSERT_EQ(chmod(a.c_str(), mode), 0);
    Result<UniqueFd> fd = OpenCoreLibrary({first_.path(), second_.path()}, Me());
    ASSERT_FALSE(fd.ok()) << std::oct << mode;
    EXPECT_THAT(fd.status().message(), HasSubstr("writable by its group or by others"));
  }
}

TEST_F(OpenCoreLibraryTest, ACoreInADirectoryOthersMayWriteIsRefused) {
  Put(first_);
  ASSERT_EQ(chmod(first_.path().c_str(), 0777), 0);
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path()}, Me());
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr(first_.path() + ": writable by its group"));
}

TEST_F(OpenCoreLibraryTest, ASymlinkIsNeverFollowed) {
  const std::string real = Put(second_);
  ASSERT_EQ(symlink(real.c_str(), first_.Join(kCoreLibraryName).c_str()), 0);
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path(), second_.path()}, Me());
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().ToString(), HasSubstr(first_.Join(kCoreLibraryName)));
}

TEST_F(OpenCoreLibraryTest, ADirectoryInItsPlaceIsRefused) {
  ASSERT_EQ(mkdir(first_.Join(kCoreLibraryName).c_str(), 0755), 0);
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path()}, Me());
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr("not a regular file"));
}

// Owned by somebody who is neither root, the caller nor the executable's owner. As root the file
// is given to another uid; otherwise the caller's own file is judged for a caller of other uids.
TEST_F(OpenCoreLibraryTest, ACoreOfAnotherUserIsRefused) {
  const std::string a = Put(first_);
  CoreOwners owners = Me();
  if (geteuid() == 0) {
    ASSERT_EQ(chown(a.c_str(), 12345, 12345), 0);
  } else {
    owners = {geteuid() + 1, geteuid() + 2};
  }
  Result<UniqueFd> fd = OpenCoreLibrary({first_.path()}, owners);
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr("neither root, the caller nor the executable"));
  // The executable's owner is trusted as far as the executable itself.
  struct stat st {};
  ASSERT_EQ(stat(a.c_str(), &st), 0);
  owners.executable_owner = st.st_uid;
  EXPECT_TRUE(OpenCoreLibrary({first_.path()}, owners).ok());
}

// The built files.
std::string BuiltCore() { return testing::BuildDir() + "/" + kCoreLibraryName; }

TEST(CoreSplitTest, TheExecutableBindsNoneOfTheCoresLibraries) {
  testing::ProcessOutput r =
      testing::RunProcess({"/lib64/ld-linux-x86-64.so.2", "--list", testing::SafexBinary()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("libcrypto"));
  for (const char* lib : {"sqlite", "libnl", "seccomp", "re2", "spdlog", "fmt", "nftables", "pq",
                          "libcap"}) {
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr(lib))) << r.out;
  }
}

TEST(CoreSplitTest, SubmitRunsInTheExecutableAndOtherVerbsInTheCore) {
  // submit's usage error needs no core: the executable alone, copied where no core is.
  testing::TempDir dir;
  std::filesystem::copy_file(testing::SafexBinary(), dir.Join("safex"));
  testing::ProcessOutput submit = testing::RunProcess({dir.Join("safex"), "submit", "--help"});
  EXPECT_EQ(submit.status, 0) << submit.err;
  EXPECT_THAT(submit.out, HasSubstr("--policy"));
  // Any other verb wants the core; this copy finds the installed one or none. With the core
  // beside it, it runs.
  std::filesystem::copy_file(BuiltCore(), dir.Join(kCoreLibraryName));
  testing::ProcessOutput version = testing::RunProcess({dir.Join("safex"), "--version"});
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("safex "));
  // ...and refuses it once its group may write it (exit 125, nothing ran).
  ASSERT_EQ(chmod(dir.Join(kCoreLibraryName).c_str(), 0664), 0);
  testing::ProcessOutput refused = testing::RunProcess({dir.Join("safex"), "--version"});
  EXPECT_EQ(refused.status, 125);
  EXPECT_THAT(refused.err, HasSubstr("writable by its group or by others"));
}

// The core's dynamic symbol table defines its entry and nothing else (core_exports.map): nothing
// it holds, libstdc++'s template instances included, binds to or is bound by the executable's.
TEST(CoreSplitTest, TheCoreExportsItsEntryOnly) {
  testing::ProcessOutput r = testing::RunProcess({"/usr/bin/nm", "-D", "--defined-only", BuiltCore()});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> defined;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string address, type, name;
    fields >> address >> type >> name;
    if (!name.empty()) defined.push_back(name);
  }
  EXPECT_THAT(defined, ::testing::ElementsAre(kCoreEntryName)) << r.out;
}

// The core refuses an executable of another build: its entry called with another build id.
TEST(CoreSplitTest, TheCoreRefusesAnotherBuild) {
  void* core = dlopen(BuiltCore().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(core, nullptr) << dlerror();
  auto entry = reinterpret_cast<CoreEntry>(dlsym(core, kCoreEntryName));
  ASSERT_NE(entry, nullptr);
  std::string arg0 = "safex", arg1 = "--version";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  ::testing::internal::CaptureStderr();
  const int status = entry(2, argv, "0000000000000000");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 125);
  EXPECT_THAT(err, HasSubstr("another build"));
}

}  // namespace
}  // namespace safex::cli
