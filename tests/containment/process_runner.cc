#include "tests/containment/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace safex::containment {
namespace {

uint64_t ReadVmHwmKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

}  // namespace

std::vector<std::string> CgroupMountPoints() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    std::istringstream head(line);
    std::string id, parent, dev, root, point;
    head >> id >> parent >> dev >> root >> point;
    out.push_back(point);
  }
  return out;
}

ProcessResult RunWatched(const ProcessOptions& o) {
  ProcessResult r;
  int out[2], err[2], status_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    r.spawn_failed = true;
    r.err = std::string("pipe2: ") + strerror(errno);
    return r;
  }
  // Everything the child needs is built before fork: it only makes system calls afterwards.
  std::vector<std::string> args = o.argv, env = o.env;
  std::vector<char*> cargv, cenv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> cgroup_points;
  if (o.readonly_cgroups) cgroup_points = CgroupMountPoints();
  std::vector<const char*> cpoints;
  for (auto& p : cgroup_points) cpoints.push_back(p.c_str());
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();

  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    auto fail = [&](int step) {
      int report[2] = {step, errno};
      ssize_t ignored = write(status_pipe[1], report, sizeof report);
      (void)ignored;
      _exit(127);
    };
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dup2(devnull, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) fail(1);
    for (int fd : o.leaked_fds) {
      int flags = fcntl(fd, F_GETFD);
      if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) fail(2);
    }
    if (o.readonly_cgroups) {
      // Security: a private mount namespace for this child only; the remounts below never
      // propagate to the host (MS_PRIVATE first).
      if (unshare(CLONE_NEWNS) != 0) fail(3);
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail(4);
      for (const char* p : cpoints) {
        if (mount(nullptr, p, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) fail(5);
      }
    }
    if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) fail(6);
    execve(cargv[0], cargv.data(), cenv.data());
    fail(7);
  }
  close(out[1]);
  close(err[1]);
  close(status_pipe[1]);
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    r.spawn_failed = true;
    r.err = std::string("fork: ") + strerror(errno);
    close(out[0]);
    close(err[0]);
    close(status_pipe[0]);
    return r;
  }
  r.pid = pid;
  auto end = start + o.deadline;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    uint64_t hwm = ReadVmHwmKib(pid);
    if (hwm > r.peak_rss_kib) r.peak_rss_kib = hwm;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !r.timed_out) {
      kill(pid, SIGTERM);
      r.timed_out = true;
      left = std::chrono::duration_cast<std::chrono::milliseconds>(o.kill_grace);
      end = std::chrono::steady_clock::now() + o.kill_grace;
    } else if (left.count() <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 50)));
    if (n < 0 && errno != EINTR) break;
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(f.fd, buf, sizeof buf);
      if (got <= 0) {
        close(f.fd);
        f.fd = -1;
      } else {
        (&f == &fds[0] ? r.out : r.err).append(buf, static_cast<size_t>(got));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int report[2] = {0, 0};
  if (read(status_pipe[0], report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
    r.spawn_failed = true;
    r.err += "child setup step " + std::to_string(report[0]) + " failed: " + strerror(report[1]);
  }
  close(status_pipe[0]);
  // VmHWM is gone once the process has exited, so the loop above samples it every 50 ms.
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

}  // namespace safex::containment
