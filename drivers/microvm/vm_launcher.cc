#include "drivers/microvm/vm_launcher.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace safex::microvm {
namespace {

Result<std::pair<UniqueFd, UniqueFd>> SocketPair() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Errno("socketpair", errno);
  }
  return std::make_pair(UniqueFd(sv[0]), UniqueFd(sv[1]));
}

}  // namespace

Result<LiveVm> LaunchVm(LaunchSpec spec) {
  if (spec.disk_fds.size() != spec.vm.disks.size()) {
    return Status::Internal("microvm: disk fds do not match the disks");
  }
  SAFEX_ASSIGN_OR_RETURN(auto ctl, SocketPair());
  SAFEX_ASSIGN_OR_RETURN(auto con, SocketPair());
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);

  // Child fd layout: 0,1 /dev/null; 2 QEMU's stderr; 3 channel; 4 console; then disks, then tap.
  std::vector<int> fds = {devnull.get(), devnull.get(), err_w.get(), ctl.second.get(),
                          con.second.get()};
  spec.vm.ctl_fd = 3;
  spec.vm.console_fd = 4;
  for (size_t i = 0; i < spec.disk_fds.size(); ++i) {
    spec.vm.disks[i].fd = static_cast<int>(fds.size());
    fds.push_back(spec.disk_fds[i]);
  }
  if (spec.tap_fd) {
    spec.vm.tap_fd = static_cast<int>(fds.size());
    fds.push_back(*spec.tap_fd);
  } else {
    spec.vm.tap_fd.reset();
  }

  // QEMU runs as the run's own unprivileged uid (with kvm's group when /dev/kvm needs it), with
  // no_new_privs and an empty environment, and is in the run's cgroups before it executes a
  // single instruction (common/subprocess.h: the go barrier).
  SpawnOptions o;
  o.argv = BuildQemuArgv(spec.vm);
  for (size_t i = 0; i < fds.size(); ++i) o.fds.emplace_back(static_cast<int>(i), fds[i]);
  o.credentials = SpawnOptions::Credentials{spec.uid, spec.gid, spec.groups};
  o.no_new_privs = true;
  o.netns_fd = spec.netns_fd;
  o.cgroup_procs_files = spec.cgroup_procs_files;
  auto t0 = std::chrono::steady_clock::now();
  SAFEX_ASSIGN_OR_RETURN(Subprocess vmm, Subprocess::Spawn(o));
  LiveVm vm;
  vm.vmm_start = std::chrono::steady_clock::now() - t0;
  vm.vmm = std::move(vmm);
  vm.argv = o.argv;
  // Only QEMU holds the other ends now: EOF on ours means QEMU is gone.
  vm.ctl = std::move(ctl.first);
  vm.console = std::move(con.first);
  vm.err = std::move(err_r);
  return vm;
}

LaunchResult FinishVm(LiveVm& vm, const SessionConfig& session) {
  LaunchResult r;
  r.argv = vm.argv;
  r.vmm_start = vm.vmm_start;
  r.session = RunSession(vm.ctl.get(), vm.console.get(), vm.err.get(), vm.vmm.pidfd(), session);
  r.vmm = vm.vmm.KillAndWait();
  return r;
}

Result<LaunchResult> LaunchAndRun(LaunchSpec spec, const SessionConfig& session) {
  SAFEX_ASSIGN_OR_RETURN(LiveVm vm, LaunchVm(std::move(spec)));
  return FinishVm(vm, session);
}

}  // namespace safex::microvm
