// common/subprocess: the options only root can use, as the VMM and the guest image builder use
// them: credentials with no_new_privs, bind mounts in the child's own mount namespace, and the
// "go" barrier that puts the child in its cgroup before it execs. Root; skipped outside CI only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

namespace fs = std::filesystem;

struct Ran {
  ExitStatus status;
  std::string out;
};

// Runs `so` with stdout and stderr captured.
Ran RunCapture(SpawnOptions so) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  so.fds = {{0, devnull.get()}, {1, w.get()}, {2, w.get()}};
  auto child = Subprocess::Spawn(so);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) return {};
  w.Reset();
  Ran ran;
  char buf[4096];
  ssize_t n;
  while ((n = read(r.get(), buf, sizeof buf)) > 0) ran.out.append(buf, static_cast<size_t>(n));
  auto st = child->Wait();
  EXPECT_TRUE(st.ok() && st->has_value());
  if (st.ok() && st->has_value()) ran.status = **st;
  return ran;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SubprocessPrivilegedTest, CredentialsAndNoNewPrivsHoldFromTheFirstInstruction) {
  SAFEX_REQUIRE_ROOT();
  SpawnOptions so;
  so.argv = {"/bin/sh", "-c", "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status"};
  so.credentials = SpawnOptions::Credentials{65534, 65534, {65534}};
  so.no_new_privs = true;
  Ran r = RunCapture(so);
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out;
  EXPECT_EQ(r.out, "65534\n65534\n65534\nNoNewPrivs:\t1\n");
}

TEST(SubprocessPrivilegedTest, AGroupListIsExactlyTheOneGiven) {
  SAFEX_REQUIRE_ROOT();
  SpawnOptions so;
  so.argv = {"/usr/bin/id", "-G"};
  so.credentials = SpawnOptions::Credentials{65534, 65534, {}};  // root's groups must not survive
  Ran r = RunCapture(so);
  EXPECT_EQ(r.out, "65534\n");
}

TEST(SubprocessPrivilegedTest, BindMountsAreTheChildsOwn) {
  SAFEX_REQUIRE_ROOT();
  testing::TempDir dir;
  const std::string from = dir.path() + "/from", onto = dir.path() + "/onto";
  fs::create_directories(from);
  fs::create_directories(onto);
  std::ofstream(from + "/marker") << "x";
  SpawnOptions so;
  so.argv = {"/bin/ls", onto};
  so.bind_mounts = {{from, onto}};
  Ran r = RunCapture(so);
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out;
  EXPECT_EQ(r.out, "marker\n");
  // The caller's namespace never saw the mount.
  EXPECT_TRUE(fs::is_empty(onto));
  EXPECT_EQ(ReadFile("/proc/self/mountinfo").find(onto), std::string::npos);

  so.bind_mounts = {{dir.path() + "/missing", onto}};
  auto failed = Subprocess::Spawn(so);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("mount(MS_BIND)"), std::string::npos)
      << failed.status().message();
}

// A cgroup of this test in the pids hierarchy (v1) or the unified one (v2); removed at the end.
class ScratchCgroup {
 public:
  ScratchCgroup() {
    const bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
    dir_ = std::string(v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/pids") + "/safex-subprocess-test-" +
           std::to_string(getpid());
    fs::create_directory(dir_);
  }
  ~ScratchCgroup() { rmdir(dir_.c_str()); }
  const std::string& dir() const { return dir_; }
  // The path of the cgroup as /proc/PID/cgroup names it (relative to the hierarchy's root).
  std::string name() const { return dir_.substr(dir_.rfind('/')); }

 private:
  std::string dir_;
};

TEST(SubprocessPrivilegedTest, TheProgramStartsInsideItsCgroup) {
  SAFEX_REQUIRE_ROOT();
  ScratchCgroup cg;
  SpawnOptions so;
  so.argv = {"/bin/cat", "/proc/self/cgroup"};
  so.cgroup_procs_files = {cg.dir() + "/cgroup.procs"};
  Ran r = RunCapture(so);
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out;
  EXPECT_NE(r.out.find(cg.name() + "\n"), std::string::npos) << r.out;
}

TEST(SubprocessPrivilegedTest, AChildThatCannotBePlacedNeverRuns) {
  SAFEX_REQUIRE_ROOT();
  testing::TempDir dir;
  const std::string ran_marker = dir.path() + "/ran";
  SpawnOptions so;
  so.argv = {"/usr/bin/touch", ran_marker};
  so.cgroup_procs_files = {dir.path() + "/no-such-cgroup/cgroup.procs"};
  auto child = Subprocess::Spawn(so);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("in its cgroup"), std::string::npos)
      << child.status().message();
  EXPECT_FALSE(fs::exists(ran_marker)) << "the program ran outside its cgroup";
}

}  // namespace
}  // namespace safex
