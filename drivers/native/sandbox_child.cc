#include "drivers/native/sandbox_child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/exec_prep.h"
#include "common/raw_credentials.h"
#include "drivers/exec_candidates.h"
#include "drivers/sandbox_report_writer.h"

namespace safex::drivers::native {
namespace {

// The descriptors of the child once step 4 is done.
constexpr int kReportFd = 3;
constexpr int kChannelFd = 4;

[[noreturn]] void Fail(int report_fd, int32_t step, int err, int32_t index = -1) {
  ChildReport r{step, err, index};
  // Nothing useful can be done if this write fails: the parent then sees EOF and no go-ahead.
  (void)!write(report_fd, &r, sizeof r);
  _exit(127);
}

bool ReadByte(int fd, char* c) {
  ssize_t n;
  do {
    n = read(fd, c, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

bool WriteByte(int fd, char c) {
  ssize_t n;
  do {
    n = write(fd, &c, 1);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

int RunOp(const MountOp& op) {
  const char* data = op.data.empty() ? nullptr : op.data.c_str();
  int rc = 0;
  switch (op.kind) {
    case MountOp::Kind::kMakePrivate:
      rc = mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
      break;
    case MountOp::Kind::kBind:
      rc = mount(op.source.c_str(), op.target.c_str(), nullptr, MS_BIND, nullptr);
      if (rc == 0) {
        rc = mount(nullptr, op.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | op.flags, nullptr);
      }
      break;
    case MountOp::Kind::kAttach:
      // Security: the source is a detached clone of what the parent opened and checked
      // (sandbox_launch.cc), so the object mounted is the one checked, whatever the path names
      // now.
      rc = static_cast<int>(syscall(SYS_move_mount, op.source_fd, "", AT_FDCWD, op.target.c_str(),
                                    MOVE_MOUNT_F_EMPTY_PATH));
      if (rc == 0) {
        rc = mount(nullptr, op.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | op.flags, nullptr);
      }
      break;
    case MountOp::Kind::kMount:
      rc = mount(op.source.c_str(), op.target.c_str(), op.fstype.c_str(), op.flags, data);
      break;
    case MountOp::Kind::kRemount:
      rc = mount(nullptr, op.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | op.flags, nullptr);
      break;
    case MountOp::Kind::kMknod:
      rc = mknod(op.target.c_str(), S_IFCHR | op.mode, op.dev);
      break;
    case MountOp::Kind::kMkdir:
      rc = mkdir(op.target.c_str(), op.mode);
      break;
    case MountOp::Kind::kSymlink:
      rc = symlink(op.source.c_str(), op.target.c_str());
      break;
  }
  return rc == 0 ? 0 : errno;
}

// Step 1.
void ResetProcess(const ChildSpec& s) {
  if (prctl(PR_SET_PDEATHSIG, s.death_signal) != 0) Fail(s.report_fd, kStepDeathSignal, errno);
  // The parent may already be gone: then the channel is closed and step 7 ends this process.
  if (!ResetSignalsForExec()) Fail(s.report_fd, kStepSignals, errno);
  // No controlling terminal: nothing to inject into (TIOCSTI).
  if (setsid() < 0) Fail(s.report_fd, kStepSession, errno);
}

// Step 2: the run's own network namespace (egress), or the fresh one of clone3, whose loopback
// is brought up so that a program can talk to itself.
void EnterNetwork(const ChildSpec& s) {
  if (s.netns_fd >= 0) {
    if (setns(s.netns_fd, CLONE_NEWNET) != 0) Fail(s.report_fd, kStepNetns, errno);
    return;
  }
  const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) Fail(s.report_fd, kStepLoopback, errno);
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) Fail(s.report_fd, kStepLoopback, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) Fail(s.report_fd, kStepLoopback, errno);
  close(sock);
}

// Step 3.
void RunMountScript(const ChildSpec& s) {
  umask(0);  // the modes of the script's nodes and directories are exact
  for (size_t i = 0; i < s.nops; ++i) {
    if (int err = RunOp(s.ops[i])) Fail(s.report_fd, kStepMount, err, static_cast<int32_t>(i));
  }
}

// Step 4. Every source is moved above all targets first, so that no dup2 clobbers a source.
void ArrangeDescriptors(const ChildSpec& s) {
  const int src[5] = {s.stdin_fd, s.stdout_fd, s.stderr_fd, s.report_fd, s.channel_fd};
  int high[5];
  for (int i = 0; i < 5; ++i) {
    high[i] = fcntl(src[i], F_DUPFD_CLOEXEC, s.high_base);
    if (high[i] < 0) Fail(s.report_fd, kStepDescriptors, errno);
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(high[i], i) < 0) Fail(high[3], kStepDescriptors, errno);
  }
  for (int i = 3; i < 5; ++i) {
    if (dup3(high[i], i, O_CLOEXEC) < 0) Fail(high[3], kStepDescriptors, errno);
  }
  if (close_range(5, ~0U, 0) != 0) Fail(kReportFd, kStepDescriptors, errno);
}

// Step 5.
void EnterRoot(const ChildSpec& s) {
  if (chdir(s.root) != 0) Fail(kReportFd, kStepPivotRoot, errno);
  // pivot_root(".", ".") stacks the old root under the new one; detaching it leaves the program
  // with only its own root.
  if (syscall(SYS_pivot_root, ".", ".") != 0) Fail(kReportFd, kStepPivotRoot, errno);
  if (umount2(".", MNT_DETACH) != 0) Fail(kReportFd, kStepPivotRoot, errno);
  if (chdir("/") != 0) Fail(kReportFd, kStepPivotRoot, errno);
}

// Step 6.
void SetLimitsAndGroups(const ChildSpec& s) {
  if (sethostname(s.hostname, s.hostname_len) != 0) Fail(kReportFd, kStepHostname, errno);
  for (size_t i = 0; i < s.nrlimits; ++i) {
    const rlimit r{s.rlimits[i].value, s.rlimits[i].value};
    if (setrlimit(static_cast<__rlimit_resource>(s.rlimits[i].resource), &r) != 0) {
      Fail(kReportFd, kStepRlimit, errno, static_cast<int32_t>(i));
    }
  }
  if (RawSetgroups(0, nullptr) != 0) Fail(kReportFd, kStepGroups, errno);
}

// Step 7.
void EnterUserNamespace() {
  if (unshare(CLONE_NEWUSER) != 0) Fail(kReportFd, kStepUserns, errno);
  char answer = 0;
  if (!WriteByte(kChannelFd, kMsgUserns) || !ReadByte(kChannelFd, &answer) ||
      answer != kMsgMapped) {
    Fail(kReportFd, kStepMaps, errno != 0 ? errno : ECANCELED);
  }
}

// Step 8.
void DropPrivileges(const ChildSpec& s) {
  if (unshare(CLONE_NEWCGROUP) != 0) Fail(kReportFd, kStepCgroupns, errno);
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      Fail(kReportFd, kStepBoundingSet, errno, cap);
    }
  }
  if (RawSetresgid(s.gid) != 0) Fail(kReportFd, kStepGid, errno);
  if (RawSetresuid(s.uid) != 0) Fail(kReportFd, kStepUid, errno);
  // A non-root uid lost its capabilities with setresuid; uid 0 inside drops them here.
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2];
  std::memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &hdr, data) != 0) Fail(kReportFd, kStepCapabilities, errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    Fail(kReportFd, kStepCapabilities, errno);
  }
  // A credential change clears the parent-death signal.
  if (prctl(PR_SET_PDEATHSIG, s.death_signal) != 0) Fail(kReportFd, kStepDeathSignal, errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(kReportFd, kStepNoNewPrivs, errno);
}

// Steps 9-11.
void RestrictAndReport(const ChildSpec& s) {
  int rule = -1;
  if (int err =
          ApplyLandlock(s.landlock_abi, s.landlock_handled, s.landlock_rules, s.nlandlock, &rule)) {
    Fail(kReportFd, kStepLandlock, err, rule);
  }
  umask(022);
  if (chdir(s.cwd) != 0) Fail(kReportFd, kStepCwd, errno);
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &s.seccomp, 0, 0) != 0) {
    Fail(kReportFd, kStepSeccomp, errno);
  }
  if (!WriteSandboxReport(kChannelFd)) Fail(kReportFd, kStepReport, errno);
  char go = 0;
  if (!ReadByte(kChannelFd, &go) || go != kMsgGo) Fail(kReportFd, kStepGoAhead, EPERM);
  close(kChannelFd);
}

}  // namespace

const char* ChildStepName(int32_t step) {
  switch (step) {
    case kStepDeathSignal:
      return "prctl(PR_SET_PDEATHSIG)";
    case kStepSignals:
      return "sigprocmask";
    case kStepSession:
      return "setsid";
    case kStepNetns:
      return "setns(the run's network namespace)";
    case kStepLoopback:
      return "bringing up the loopback interface";
    case kStepMount:
      return "the mount script";
    case kStepDescriptors:
      return "arranging descriptors";
    case kStepPivotRoot:
      return "pivot_root";
    case kStepHostname:
      return "sethostname";
    case kStepRlimit:
      return "setrlimit";
    case kStepGroups:
      return "setgroups";
    case kStepUserns:
      return "unshare(CLONE_NEWUSER)";
    case kStepMaps:
      return "waiting for the uid/gid maps";
    case kStepCgroupns:
      return "unshare(CLONE_NEWCGROUP)";
    case kStepBoundingSet:
      return "prctl(PR_CAPBSET_DROP)";
    case kStepGid:
      return "setresgid";
    case kStepUid:
      return "setresuid";
    case kStepCapabilities:
      return "dropping capabilities";
    case kStepNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kStepLandlock:
      return "Landlock";
    case kStepCwd:
      return "chdir to the working directory";
    case kStepSeccomp:
      return "installing the seccomp filter";
    case kStepReport:
      return "the report of what the sandbox got";
    case kStepGoAhead:
      return "waiting for the go-ahead";
    case kStepExec:
      return "execve";
  }
  return "sandbox setup";
}

void SandboxChildMain(const ChildSpec& s) {
  ResetProcess(s);                                                               // 1
  EnterNetwork(s);                                                               // 2
  RunMountScript(s);                                                             // 3
  ArrangeDescriptors(s);                                                         // 4
  EnterRoot(s);                                                                  // 5
  SetLimitsAndGroups(s);                                                         // 6
  EnterUserNamespace();                                                          // 7
  DropPrivileges(s);                                                             // 8
  RestrictAndReport(s);                                                          // 9-11
  Fail(kReportFd, kStepExec, ExecFirstCandidate(s.candidates, s.argv, s.envp));  // 12
}

}  // namespace safex::drivers::native
