#include "bench/gvisor/raw_runsc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/gvisor/launch_report.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/rootfs.h"
#include "drivers/run_dir.h"

namespace safex::bench {

namespace gvisor = safex::drivers::gvisor;
using Clock = std::chrono::steady_clock;

plan::Plan WithPlainDirs(plan::Plan p, const std::string& dir) {
  for (plan::Mount& m : p.mounts) {
    if (m.kind == plan::MountKind::kInput || m.kind == plan::MountKind::kOutput) {
      m.source = dir;
      m.kind = plan::MountKind::kBind;
    }
  }
  return p;
}

Status RawBundle::Make(const plan::Plan& p, const std::vector<std::string>& argv,
                       const std::string& name) {
  dir = "/run/safex-bench-" + std::to_string(getpid()) + "-" + name;
  bundle = dir + "/bundle";
  platform = p.gvisor.platform;
  safex::RemoveTree(dir).ok();
  for (const std::string& d : {dir, bundle, bundle + "/rootfs", dir + "/state"}) {
    if (mkdir(d.c_str(), 0700) != 0) return Status::Errno("mkdir", d, errno);
  }
  std::vector<std::string> sources;
  for (const plan::Mount& m : p.mounts) sources.push_back(m.source);
  SAFEX_RETURN_IF_ERROR(
      drivers::PrepareRootfs(bundle + "/rootfs", p, sources, "", gvisor::RootMountPoints()));
  gvisor::OciLayout l;
  l.mount_sources = sources;
  cgroups_path = "/safex/bench-raw-" + std::to_string(getpid()) + "-" + name;
  l.cgroups_path = cgroups_path;
  l.pids_backstop = 1024;
  SAFEX_ASSIGN_OR_RETURN(nlohmann::json spec, gvisor::BuildOciSpec(p, argv, l, {}));
  std::ofstream(bundle + "/config.json") << spec.dump(1);
  return Status::Ok();
}

RawBundle::~RawBundle() {
  if (!dir.empty()) safex::RemoveTree(dir).ok();
  if (cgroups_path.empty()) return;
  rmdir(("/sys/fs/cgroup" + cgroups_path).c_str());  // v2
  std::error_code ec;
  for (const auto& h : std::filesystem::directory_iterator("/sys/fs/cgroup", ec)) {
    rmdir((h.path().string() + cgroups_path).c_str());  // v1: one per hierarchy
  }
}

Result<double> RawRun(const RawBundle& b, int i, bool driver_flags) {
  std::vector<std::string> argv = {kRunsc,
                                   "--root=" + b.dir + "/state",
                                   "--network=none",
                                   "--oci-seccomp",
                                   "--overlay2=none",
                                   "--platform=" + b.platform};
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  int log[2];
  if (pipe2(log, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd log_r(log[0]), log_w(log[1]);
  if (driver_flags) {
    argv.insert(argv.end(), {"--debug-log=/proc/self/fd/6", "--strace", "--strace-log-size=64",
                             "--strace-syscalls=clone,clone3,fork,vfork"});
  }
  argv.insert(argv.end(), {"run", "--bundle", b.bundle, "raw-" + std::to_string(i)});
  SpawnOptions so;
  so.argv = argv;
  so.fds = {{0, devnull.get()}, {1, devnull.get()}, {2, devnull.get()}, {6, log_w.get()}};
  auto t0 = Clock::now();
  SAFEX_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(so));
  log_w.Reset();
  char buf[65536];
  while (read(log_r.get(), buf, sizeof buf) > 0) {
  }
  SAFEX_ASSIGN_OR_RETURN(std::optional<ExitStatus> st, p.Wait());
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!st || !st->exited || st->code != 0) return Status::Internal("raw runsc run failed");
  return ms;
}

}  // namespace safex::bench
