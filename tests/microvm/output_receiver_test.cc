// OutputReceiver against hostile output streams: traversal, symlink tricks, duplicates, caps.
// Needs root (fsopen of a tmpfs); no VM.
#include "drivers/microvm/output_receiver.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/test_support.h"

namespace safex::microvm {
namespace {

constexpr uint32_t kMount = 3;  // the plan index of the output mount in these tests

FileHeader Dir(const std::string& path, uint32_t mode = 0755) {
  FileHeader h;
  h.mount_index = kMount;
  h.kind = FileKind::kDirectory;
  h.path = path;
  h.mode = mode;
  return h;
}

FileHeader File(const std::string& path, uint64_t size, uint32_t mode = 0644) {
  FileHeader h;
  h.mount_index = kMount;
  h.kind = FileKind::kRegular;
  h.path = path;
  h.size = size;
  h.mode = mode;
  return h;
}

FileHeader Link(const std::string& path, const std::string& target) {
  FileHeader h;
  h.mount_index = kMount;
  h.kind = FileKind::kSymlink;
  h.path = path;
  h.link_target = target;
  return h;
}

std::string ReadAt(int dirfd, const char* name) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "<missing>";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

class OutputReceiverTest : public ::testing::Test {
 protected:
  void SetUp() override { SAFEX_REQUIRE_ROOT(); }
  OutputReceiver Make(uint64_t size = 1 << 20, OutputReceiver::Caps caps = {}) {
    auto r = OutputReceiver::Create({{kMount, size}}, caps);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(*r);
  }
};

TEST_F(OutputReceiverTest, UnpacksDirectoriesFilesLinksAndFifos) {
  OutputReceiver r = Make();
  ASSERT_TRUE(r.Begin(Dir("sub")).ok());
  ASSERT_TRUE(r.Begin(File("sub/a.txt", 5, 04755)).ok());
  ASSERT_TRUE(r.Data("hel").ok());
  ASSERT_TRUE(r.Data("lo").ok());
  ASSERT_TRUE(r.End().ok());
  ASSERT_TRUE(r.Begin(Link("l", "/etc/shadow")).ok());
  FileHeader fifo;
  fifo.mount_index = kMount;
  fifo.kind = FileKind::kFifo;
  fifo.path = "p";
  fifo.mode = 0600;
  ASSERT_TRUE(r.Begin(fifo).ok());
  int root = r.RootFd(kMount);
  ASSERT_GE(root, 0);
  EXPECT_EQ(r.RootFd(0), -1);
  EXPECT_EQ(ReadAt(root, "sub/a.txt"), "hello");
  struct stat st;
  ASSERT_EQ(fstatat(root, "sub/a.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // setuid never reaches the host
  ASSERT_EQ(fstatat(root, "l", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(fstatat(root, "p", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(r.entries(), 4u);
  EXPECT_EQ(r.bytes_written(), 5u);
}

TEST_F(OutputReceiverTest, RefusesEveryTraversalShape) {
  OutputReceiver r = Make();
  for (const char* bad :
       {"", ".", "..", "../x", "a/../../x", "/abs", "a//b", "a/", "./a", "a/./b"}) {
    EXPECT_FALSE(r.Begin(File(bad, 0)).ok()) << "'" << bad << "'";
  }
  EXPECT_FALSE(r.Begin(File(std::string("a\0b", 3), 0)).ok());
  EXPECT_FALSE(r.Begin(File(std::string(256, 'n'), 0)).ok());
  std::string deep;
  for (int i = 0; i < 33; ++i) deep += "d/";
  deep += "f";
  EXPECT_FALSE(r.Begin(File(deep, 0)).ok());
  EXPECT_EQ(r.entries(), 0u);
}

TEST_F(OutputReceiverTest, NeverWritesThroughASymlink) {
  OutputReceiver r = Make();
  ASSERT_TRUE(r.Begin(Link("escape", "/tmp")).ok());
  Status st = r.Begin(File("escape/owned", 1));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a directory sent earlier"), std::string::npos) << st.message();
  // And a file can never replace the link (or anything else) either.
  EXPECT_FALSE(r.Begin(File("escape", 1)).ok());
  EXPECT_NE(access("/tmp/owned", F_OK), 0);
}

TEST_F(OutputReceiverTest, ParentsMustComeFirstAndNamesAreNeverReplaced) {
  OutputReceiver r = Make();
  EXPECT_FALSE(r.Begin(File("nodir/f", 1)).ok());
  ASSERT_TRUE(r.Begin(File("f", 0)).ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_FALSE(r.Begin(File("f", 0)).ok());
  EXPECT_FALSE(r.Begin(Dir("f")).ok());
}

TEST_F(OutputReceiverTest, StreamOrderIsEnforced) {
  OutputReceiver r = Make();
  EXPECT_FALSE(r.Data("x").ok());
  EXPECT_FALSE(r.End().ok());
  ASSERT_TRUE(r.Begin(File("f", 2)).ok());
  EXPECT_FALSE(r.Begin(File("g", 0)).ok());  // no entry inside a file
  EXPECT_FALSE(r.Data("abc").ok());          // more than announced
  FileHeader other = File("x", 0);
  other.mount_index = 0;  // not an output mount
  ASSERT_TRUE(r.Data("ab").ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_FALSE(r.Begin(other).ok());
}

TEST_F(OutputReceiverTest, EntryCapIsEnforced) {
  OutputReceiver::Caps caps;
  caps.max_entries = 3;
  OutputReceiver r = Make(1 << 20, caps);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.Begin(Dir("d" + std::to_string(i))).ok());
  EXPECT_FALSE(r.Begin(Dir("d3")).ok());
}

TEST_F(OutputReceiverTest, CutFilesKeepTheirRealSizeAsSparseFiles) {
  OutputReceiver::Caps caps;
  caps.max_total_bytes = 4;
  OutputReceiver r = Make(1 << 20, caps);
  ASSERT_TRUE(r.Begin(File("big", 1ull << 40)).ok());  // the guest had a 1 TiB sparse file
  ASSERT_TRUE(r.Data("0123456789").ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_EQ(r.truncated_files(), 1u);
  EXPECT_EQ(r.bytes_written(), 4u);
  struct stat st;
  ASSERT_EQ(fstatat(r.RootFd(kMount), "big", &st, 0), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 1ull << 40);
  EXPECT_LT(st.st_blocks, 64);  // no host memory behind it
  int fd = openat(r.RootFd(kMount), "big", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char head[5] = {};
  EXPECT_EQ(pread(fd, head, 4, 0), 4);
  close(fd);
  EXPECT_STREQ(head, "0123");
}

TEST_F(OutputReceiverTest, TheHostTmpfsSizeCapHolds) {
  OutputReceiver r = Make(64 * 1024);  // + 1 MiB metadata slack
  ASSERT_TRUE(r.Begin(File("f", 4u << 20)).ok());
  std::string chunk(64 * 1024, 'x');
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(r.Data(chunk).ok());
  ASSERT_TRUE(r.End().ok());
  EXPECT_EQ(r.truncated_files(), 1u);
  EXPECT_LE(r.bytes_written(), (64u + 1024u) * 1024u + 4096u);
}

TEST_F(OutputReceiverTest, TheTmpfsIsInNoMountTable) {
  OutputReceiver r = Make();
  ASSERT_TRUE(r.Begin(File("marker-5af3", 0)).ok());
  ASSERT_TRUE(r.End().ok());
  std::ifstream mi("/proc/self/mountinfo");
  std::stringstream ss;
  ss << mi.rdbuf();
  std::string before = ss.str();
  // The tmpfs has no mount point: nothing in mountinfo names it, and it goes with the object.
  EXPECT_EQ(before.find("marker-5af3"), std::string::npos);
  struct stat st;
  ASSERT_EQ(fstat(r.RootFd(kMount), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

}  // namespace
}  // namespace safex::microvm
