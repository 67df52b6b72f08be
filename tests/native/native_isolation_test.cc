// Two native runs at once cannot reach each other: a run cannot name the other's processes (its
// own pid namespace), and even by the other's host pid it can neither signal, ptrace nor read its
// /proc; each runs as a host uid of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "drivers/native/run_state.h"
#include "tests/native/native_test_fixture.h"

namespace safex::drivers::testing {
namespace {

using namespace std::chrono_literals;

// The host pids in a run's cgroup (any hierarchy that lists them).
std::vector<std::string> HostPids(const std::string& run_id) {
  std::vector<std::string> out;
  for (const char* base : {"/sys/fs/cgroup/pids/safex/", "/sys/fs/cgroup/safex/"}) {
    std::ifstream in(base + native::CgroupName(run_id) + "/cgroup.procs");
    for (std::string pid; in >> pid;) out.push_back(pid);
    if (!out.empty()) break;
  }
  return out;
}

std::string HostUidOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream w(line.substr(4));
      std::string uid;
      w >> uid;
      return uid;
    }
  }
  return "";
}

TEST_F(NativeTest, AConcurrentRunCannotSignalPtraceOrReadAnother) {
  plan::Plan p = NativePlan();
  p.seccomp.rules.clear();  // the kernel's separation alone, not a seccomp rule, is under test
  RunRequest victim;
  victim.run_id = NextNativeRunId() + "-victim";
  victim.argv = {"/bin/sh", "-c", "sleep 3; echo survived"};
  Result<RunResult> victim_result = Status::Internal("not run");
  std::thread t([&] { victim_result = driver_->Run(p, victim); });
  // The target is a process of the victim's that already runs as the victim's own host uid: a
  // process found earlier may still be root, between its placement in the run's cgroup and its
  // switch to the run's ids (CI once saw uid 0 there).
  std::string target, victim_uid;
  for (int i = 0; i < 150 && target.empty(); ++i) {
    std::this_thread::sleep_for(20ms);
    for (const std::string& pid : HostPids(victim.run_id)) {
      std::string uid = HostUidOf(pid);
      if (!uid.empty() && uid != "0") {
        target = pid;
        victim_uid = uid;
        break;
      }
    }
  }
  ASSERT_FALSE(target.empty()) << "the victim's sandbox never ran as its own uid";

  // The attacker knows the victim's host pid and tries everything a same-host process could.
  const std::string script =
      "import ctypes, os, signal, sys\n"
      "pid = int(sys.argv[1])\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def tryit(name, f):\n"
      "  try:\n    f(); print(name, 'reached')\n"
      "  except OSError as e: print(name, e.errno)\n"
      "tryit('kill', lambda: os.kill(pid, signal.SIGKILL))\n"
      "r = libc.ptrace(16, pid, 0, 0)\n"  // PTRACE_ATTACH
      "print('ptrace', ctypes.get_errno() if r != 0 else 'reached')\n"
      "tryit('proc', lambda: open('/proc/%d/status' % pid).read())\n"
      "tryit('killall', lambda: os.kill(-1, signal.SIGKILL))\n";
  auto attacker = Run(p, {"/usr/bin/python3", "-c", script, target});
  t.join();
  ASSERT_TRUE(attacker.ok()) << attacker.status().ToString();
  // ESRCH (3) and ENOENT (2): the victim does not exist in the attacker's world. kill(-1) only
  // reaches the attacker's own namespace (and kills it, as it asked).
  EXPECT_THAT(attacker->stdout_stream.data, ::testing::StartsWith("kill 3\nptrace 3\nproc 2\n"));
  ASSERT_TRUE(victim_result.ok()) << victim_result.status().ToString();
  EXPECT_EQ(victim_result->exit_code, 0);
  EXPECT_EQ(victim_result->stdout_stream.data, "survived\n");
  // And each ran as a host uid of its own.
  auto uid_of = [](const RunResult& r) {
    for (const EnforcedField& f : r.enforcement.fields) {
      if (f.name == "process.host_identity") return f.observed;
    }
    return std::string();
  };
  EXPECT_NE(uid_of(*victim_result), uid_of(*attacker));
  EXPECT_EQ(uid_of(*victim_result), "uid " + victim_uid + " gid " + victim_uid);
  EXPECT_NE(victim_uid, "65534");
}

}  // namespace
}  // namespace safex::drivers::testing
