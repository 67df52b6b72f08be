// Runs a program for the containment suite (argv only, never a shell) and watches it: captures
// stdout and stderr, kills it at a deadline, and samples its peak resident memory (VmHWM) while it
// runs, so a test can say "the supervisor's memory stayed bounded" about `safex` itself.
//
// Two deliberate hostilities, both for the probes to find:
//   - leaked_fds: descriptors the child inherits on purpose (not close-on-exec): `safex` gets a
//     host file and a host directory descriptor it must not pass into the sandbox (S1, C2);
//   - readonly_cgroups: the child runs in a private mount namespace in which every cgroup
//     filesystem is remounted read-only ("cgroups unwritable", S7). The host is not touched.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace safex::containment {

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0]: absolute path
  std::vector<std::string> env;   // the child's whole environment ("NAME=value")
  std::vector<int> leaked_fds;    // kept open in the child at their own numbers
  bool readonly_cgroups = false;
  // At the deadline the child gets SIGTERM (`safex run` then cancels the run and tears the sandbox
  // down), and SIGKILL if it is still there `kill_grace` later. If this process dies first, the
  // child gets SIGTERM (parent-death signal) for the same reason.
  std::chrono::seconds deadline{180};
  std::chrono::seconds kill_grace{15};
  std::string cwd;  // "" keeps the current directory
};

struct ProcessResult {
  int status = -1;  // exit status, or 128 + signal
  bool timed_out = false;
  bool spawn_failed = false;
  std::string out;
  std::string err;
  pid_t pid = 0;
  double wall_seconds = 0;
  uint64_t peak_rss_kib = 0;  // highest VmHWM seen while it ran (0 if never sampled)
};

ProcessResult RunWatched(const ProcessOptions& options);

// Mount points of cgroup filesystems in this mount namespace (v1 hierarchies, the v2 tree).
std::vector<std::string> CgroupMountPoints();

}  // namespace safex::containment
