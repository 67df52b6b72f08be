#include "drivers/microvm/run_steps.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/fs_tree.h"
#include "common/owner_lock.h"
#include "common/sha256.h"
#include "drivers/microvm/guest_tap.h"
#include "drivers/net/network_evidence.h"

namespace safex::microvm {
namespace {

using drivers::LimitHit;

drivers::LimitHit ToLimitHit(GuestLimit l) {
  switch (l) {
    case GuestLimit::kNone:
      return LimitHit::kNone;
    case GuestLimit::kCpuTime:
      return LimitHit::kCpuTime;
    case GuestLimit::kMemory:
      return LimitHit::kMemory;
    case GuestLimit::kPids:
      return LimitHit::kPids;
    case GuestLimit::kOutput:
      return LimitHit::kOutput;
  }
  return LimitHit::kNone;
}

// The VMM runs as uid/gid vmm_id_base + (hash of the run id mod vmm_id_count): a uid no other run
// (probably) shares and no account owns.
uint32_t VmmId(const drivers::MicrovmOptions& o, const std::string& run_id) {
  if (o.vmm_id_count == 0) return o.vmm_id_base;
  Sha256Digest d = Sha256(run_id);
  uint32_t h = static_cast<uint32_t>(d[0]) | static_cast<uint32_t>(d[1]) << 8 |
               static_cast<uint32_t>(d[2]) << 16 | static_cast<uint32_t>(d[3]) << 24;
  return o.vmm_id_base + h % o.vmm_id_count;
}

std::string Dotted(uint32_t a) {
  return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

std::string Tail(const std::string& text, size_t n) {
  return text.substr(text.size() > n ? text.size() - n : 0);
}

// What the agent's heartbeats say about a program killed while it ran: how it was doing when last
// heard from, and whether the guest clock kept up with the host's. A guest that stalled (its
// vCPU starved, its kernel stuck) falls silent, or its clock falls behind; a program that just
// ran too long keeps both going. "" when the run was too short to expect one.
std::string HeartbeatNote(const SessionResult& s) {
  const auto ran = s.t_end - s.t_started;
  const std::string nudged = s.nudges == 0 ? "" : fmt::format("; nudged {} times", s.nudges);
  if (!s.last_heartbeat) {
    if (ran < std::chrono::seconds(2)) return "";
    return "no heartbeat from the guest in the " + Ms(ran) +
           " after the program started (the agent sends one a second: the guest stalled)" + nudged;
  }
  const HeartbeatSeen& first = *s.first_heartbeat;
  const HeartbeatSeen& last = *s.last_heartbeat;
  const auto silent = s.t_end - last.at;
  std::string note =
      fmt::format("{}{} heartbeat{}, the last {} before the kill: program {}, CPU {}",
                  silent > std::chrono::seconds(3) ? "the guest fell silent: " : "", s.heartbeats,
                  s.heartbeats == 1 ? "" : "s", Ms(silent), last.beat.program_state,
                  Ms(std::chrono::nanoseconds(last.beat.cpu_ns)));
  if (s.heartbeats > 1) {
    const uint64_t guest =
        last.beat.guest_ns > first.beat.guest_ns ? last.beat.guest_ns - first.beat.guest_ns : 0;
    note += fmt::format("; guest clock {} over {} of host time between the first and the last",
                        Ms(std::chrono::nanoseconds(guest)), Ms(last.at - first.at));
  }
  return note + nudged;
}

// QEMU's threads at the first nudge and at the kill (vmm_threads.h), when the guest went silent.
std::string VmmThreadsNote(const SessionResult& s) {
  std::string note;
  if (!s.vmm_threads_at_nudge.empty()) note = "QEMU at the first nudge: " + s.vmm_threads_at_nudge;
  if (!s.vmm_threads_at_end.empty()) {
    note += (note.empty() ? "" : "; ") + std::string("QEMU at the end: ") + s.vmm_threads_at_end;
  }
  return note;
}

// A run that ended on its own but whose guest went quiet for a while (heartbeats a second apart
// are the norm), or that the host nudged at all: the record says so, so that a slow run can be
// told from a slow program, and no nudge of a guest goes unrecorded (one that revived the guest
// at once leaves a silence of just over 2 s).
std::string SilenceNote(const SessionResult& s) {
  if (s.nudges == 0 && s.longest_silence <= std::chrono::seconds(3)) return "";
  return fmt::format("the guest was silent for {} while the program ran (nudged {} times)",
                     Ms(s.longest_silence), s.nudges);
}

}  // namespace

std::string Ms(std::chrono::nanoseconds d) { return std::to_string(d.count() / 1000000) + " ms"; }

RunDir& RunDir::operator=(RunDir&& o) noexcept {
  if (this != &o) {
    (void)Remove();
    path_ = std::exchange(o.path_, std::string());
  }
  return *this;
}

Status RunDir::Remove() {
  if (path_.empty()) return Status::Ok();
  Status s = RemoveTree(path_);
  if (s.ok()) path_.clear();
  return s;
}

Status CreateRunDirectory(const drivers::MicrovmOptions& o, const drivers::RunRequest& req,
                          VmRun& v) {
  const std::string path = o.state_root + "/runs/" + req.run_id;
  if (mkdir(path.c_str(), 0700) != 0) {
    return Status::Errno("mkdir", path, errno).With("microvm: run directory");
  }
  v.dir = RunDir(path);
  SAFEX_ASSIGN_OR_RETURN(v.owner_lock, CreateOwnerLock(path));
  return Status::Ok();
}

Status PrepareDisks(const plan::Plan& plan, const drivers::RunRequest& req, ImageCache& images,
                    VmRun& v) {
  std::vector<std::string> sources;
  std::vector<size_t> source_of_mount(plan.mounts.size(), SIZE_MAX);
  bool has_input = false;
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    if (m.kind == plan::MountKind::kBind) {
      source_of_mount[i] = sources.size();
      sources.push_back(m.source);
    }
    if (m.kind == plan::MountKind::kInput) has_input = true;
    if (m.kind == plan::MountKind::kOutput) {
      v.outputs.push_back({static_cast<uint32_t>(i), m.size_bytes});
    }
  }
  v.in.disks.assign(plan.mounts.size(), 0);
  v.in.image_paths.assign(plan.mounts.size(), "");
  v.in.is_file.assign(plan.mounts.size(), false);
  if (!sources.empty()) {
    Result<RootfsImages> img = images.Get(sources);
    if (!img.ok()) return img.status().With("microvm: rootfs image");
    v.rootfs = std::move(*img);
    for (size_t i = 0; i < plan.mounts.size(); ++i) {
      if (source_of_mount[i] == SIZE_MAX) continue;
      v.in.disks[i] = v.rootfs.disk_of[source_of_mount[i]];
      v.in.image_paths[i] = v.rootfs.image_paths[source_of_mount[i]];
      v.in.is_file[i] = v.rootfs.is_file[source_of_mount[i]];
    }
    for (size_t d = 0; d < v.rootfs.disks.size(); ++d) {
      v.disks.push_back({-1, kRootfsDiskSerialPrefix + std::to_string(d)});
      v.disk_fds.push_back(v.rootfs.disks[d].fd.get());
    }
  }
  if (has_input && !req.input_dir.empty()) {
    const std::string image = v.dir.path() + "/input.erofs";
    SAFEX_RETURN_IF_ERROR(images.BuildDirectoryImage(req.input_dir, image));
    v.input_fd.Reset(open(image.c_str(), O_RDONLY | O_CLOEXEC));
    if (!v.input_fd) return Status::Errno("open", image, errno);
    v.in.has_input_image = true;
    v.disks.push_back({-1, kInputDiskSerial});
    v.disk_fds.push_back(v.input_fd.get());
  }
  v.in.has_stdin = req.stdin_data.has_value() && !req.stdin_data->empty();
  return Status::Ok();
}

Status AttachNetwork(const plan::Plan& plan, const drivers::RunRequest& req,
                     const drivers::MicrovmOptions& o, VmRun& v) {
  if (plan.network.egress.empty()) return Status::Ok();
  SAFEX_ASSIGN_OR_RETURN(v.net, o.network_provider(plan, req.run_id));
  if (!v.net || v.net->netns_fd() < 0) {
    return Status::Internal("microvm: the network provider returned no network namespace");
  }
  const drivers::net::SandboxLink& link = v.net->sandbox_link();
  if (link.ifname.empty() || link.address == 0 || link.gateway == 0) {
    return Status::Unavailable(
        "microvm: the run's network does not describe its link; refused, nothing ran");
  }
  SAFEX_ASSIGN_OR_RETURN(v.tap, AttachGuestTap(v.net->netns_fd(), link.ifname));
  GuestNetwork gn;
  gn.address = Dotted(link.address);
  gn.gateway = Dotted(link.gateway);
  gn.prefix = static_cast<uint32_t>(link.prefix);
  v.in.network = gn;
  v.in.hosts_file = v.net->hosts_file();
  return Status::Ok();
}

Status PrepareOutputs(const plan::Plan& plan, VmRun& v) {
  if (v.outputs.empty()) return Status::Ok();
  OutputReceiver::Caps caps;
  caps.max_entries = plan.outputs.max_files > 0 ? plan.outputs.max_files + 1 : 100000;
  caps.max_total_bytes = plan.outputs.max_total_bytes;
  Result<OutputReceiver> r = OutputReceiver::Create(v.outputs, caps);
  if (!r.ok()) return r.status().With("microvm: output tmpfs");
  v.receiver.emplace(std::move(*r));
  return Status::Ok();
}

uint64_t GuestMib(const plan::Plan& plan, const drivers::MicrovmOptions& o) {
  return (plan.limits.memory_bytes + o.guest_overhead_bytes + kMiB - 1) / kMiB;
}

uint64_t VmmMemoryBytes(const plan::Plan& plan, const drivers::MicrovmOptions& o) {
  return GuestMib(plan, o) * kMiB + o.vmm_overhead_bytes;
}

Status CreateVmmCgroup(const plan::Plan& plan, const drivers::RunRequest& req,
                       const drivers::MicrovmOptions& o, const drivers::cgroup::CgroupHost& cgroups,
                       uint32_t vcpus, VmRun& v) {
  v.guest_mib = GuestMib(plan, o);
  drivers::cgroup::Limits limits;
  limits.memory_bytes = VmmMemoryBytes(plan, o);
  limits.pids_max = o.vmm_pids;
  limits.cpus = vcpus + 1;  // the vCPU threads and QEMU's main loop
  auto cg = cgroups.CreateRun(o.cgroup_parent, "microvm-" + req.run_id, limits);
  if (!cg.ok()) return cg.status().With("microvm: the VMM's cgroup");
  v.cg.emplace(std::move(*cg));
  v.cg_limits = limits;
  return Status::Ok();
}

void ReadBackEnforcement(const plan::Plan& plan, const std::string& qemu_version,
                         const std::string& qemu_sha256, const VmRun& v, drivers::Enforcement* e) {
  e->Observed("runtime", qemu_version, "runtime: qemu --version");
  e->Observed("runtime.sha256", qemu_sha256, "SHA-256 of the QEMU binary (once per binary)");
  drivers::cgroup::CompareLimits(v.cg_limits, *v.cg, e);
  if (v.net) {
    drivers::net::AddNetworkEvidence(v.net.get(), drivers::net::SandboxAddress::kInGuest, e);
  } else {
    e->NotObserved("network", "no network namespace: QEMU is given no network device",
                   "metadata address, egress outside the granted set");
  }
  // The workload's cgroup and the filter's program live in the guest's kernel; its identity,
  // capabilities, seccomp mode, rlimits and mounts come from the workload's own report before
  // its exec (GuestReportExpectations, the session's kEvidence).
  const std::string inside =
      "applied by the guest agent inside the VM (its kernel is not the "
      "host's, so the host cannot read it back)";
  e->NotObserved("guest.cgroup",
                 inside + "; memory " + std::to_string(plan.limits.memory_bytes) + " bytes, pids " +
                     std::to_string(plan.limits.pids),
                 "allocation above the memory limit, fork past the pids limit");
  e->NotObserved("seccomp.filter", inside, "the first errno and kill syscall rules");
}

drivers::ReportExpectations GuestReportExpectations(const plan::Plan& plan) {
  drivers::ReportExpectations x;
  // guest/guest_root.h: the root remounted read-only, a minimal /dev (read-only) with its
  // /dev/shm, /sys read-only; the workload's own /proc (nosuid, nodev, noexec).
  x.infrastructure_mounts = {
      drivers::MountLine("/", true, false), drivers::MountLine("/dev", true, true),
      drivers::MountLine("/dev/shm", false, true), drivers::MountLine("/proc", false, true),
      drivers::MountLine("/sys", true, true)};
  x.filtered = true;  // the agent always installs the plan's filter (guest/seccomp_filter.h)
  // What guest/workload.cc sets: RLIMIT_NPROC one above the pids limit (the cgroup's is the one
  // that bites and is counted); RLIMIT_CPU is the agent's backstop, not compared.
  x.rlimits = {{"Max core file size", 0},
               {"Max file size", plan.limits.disk_bytes},
               {"Max open files", plan.limits.open_files},
               {"Max processes", plan.limits.pids + 1}};
  x.source = "the workload inside the VM, before its exec (guest agent)";
  return x;
}

std::string QemuAccel(const drivers::cgroup::RunCgroup& cg) {
  for (const std::vector<std::string>& args : cg.MemberCommandLines()) {
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "-accel") return args[i + 1].substr(0, args[i + 1].find(','));
    }
  }
  return "not shown";
}

LaunchSpec BuildLaunchSpec(const drivers::MicrovmOptions& o, const drivers::RunRequest& req,
                           const LaunchInputs& li, VmRun& v) {
  LaunchSpec ls;
  ls.vm.qemu_path = o.qemu_path;
  ls.vm.kernel_path = o.kernel_path;
  ls.vm.initramfs_path = o.initramfs_path;
  ls.vm.accel = li.accel;
  ls.vm.memory_mib = v.guest_mib;
  ls.vm.vcpus = li.vcpus;
  ls.vm.tsc_khz = li.tsc_khz;
  ls.vm.tcg_tb_mib = o.tcg_tb_mib;
  ls.vm.disks = v.disks;
  ls.disk_fds = v.disk_fds;
  if (v.net) {
    ls.tap_fd = v.tap.get();
    ls.vm.mac = GuestMac(req.run_id);
    ls.netns_fd = v.net->netns_fd();  // QEMU itself sees only the run's namespace
  }
  const uint32_t id = VmmId(o, req.run_id);
  ls.uid = id;
  ls.gid = id;
  if (li.accel == Accel::kKvm) ls.groups = li.kvm_groups;
  for (const std::string& d : v.cg->dirs()) ls.cgroup_procs_files.push_back(d + "/cgroup.procs");
  return ls;
}

SessionConfig BuildSessionConfig(const plan::Plan& plan, const drivers::RunRequest& req,
                                 const drivers::MicrovmOptions& o, VmRun& v) {
  SessionConfig sc;
  if (v.in.has_stdin) sc.stdin_data = &*req.stdin_data;
  sc.output_cap = plan.limits.output_bytes;
  sc.boot_timeout = o.boot_timeout;
  sc.wall_timeout = std::chrono::nanoseconds(plan.limits.wall_time_ns);
  sc.collect_timeout = o.collect_timeout;
  sc.outputs = v.receiver ? &*v.receiver : nullptr;
  sc.cancel = req.cancel;
  sc.on_output = &req.on_output;
  if (o.started_observer) {
    sc.on_started = [&o, &req] { o.started_observer(req.run_id); };
  }
  return sc;
}

Status NothingRan(const LaunchResult& launched, uint64_t vmm_oom, Accel accel,
                  const drivers::MicrovmOptions& o) {
  const SessionResult& s = launched.session;
  const bool before_program = s.phase == Phase::kBooting || s.phase == Phase::kSetup ||
                              (s.phase == Phase::kDone && !s.guest_setup_error.empty());
  if (s.cancelled || !before_program) return Status::Ok();
  if (!s.guest_setup_error.empty()) {
    return Status::FailedPrecondition("microvm: the guest could not prepare the run: " +
                                      s.guest_setup_error);
  }
  const std::string where = s.phase == Phase::kBooting ? "boot" : "set up the run";
  const std::string console =
      s.console_tail.empty() ? "" : "\nconsole: " + Tail(s.console_tail, 600);
  if (s.timed_out) {
    return Status::Unavailable(
        fmt::format("microvm: the guest did not {} within {} ({}); the VMM was killed{}", where,
                    Ms(std::chrono::duration_cast<std::chrono::nanoseconds>(o.boot_timeout)),
                    AccelName(accel), console));
  }
  if (!s.violation.empty()) {
    return Status::Internal("microvm: guest protocol violation before the program started: " +
                            s.violation);
  }
  std::string why = launched.vmm.exited
                        ? fmt::format("exited with status {}", launched.vmm.code)
                        : fmt::format("was killed by signal {}", launched.vmm.signal);
  if (vmm_oom > 0) why += " (out of memory in its host cgroup)";
  return Status::Unavailable("microvm: QEMU " + why + " before the program started" +
                             (s.vmm_stderr.empty() ? "" : "\nqemu: " + s.vmm_stderr) + console);
}

drivers::RunResult ResultOf(const plan::Plan& plan, const SessionResult& s, uint64_t guest_mib,
                            uint64_t vmm_oom, const std::string& backend_mode) {
  drivers::RunResult r;
  r.backend_mode = backend_mode;
  r.stdout_stream.data = s.stdout_data;
  r.stderr_stream.data = s.stderr_data;
  r.stdout_stream.total_bytes = s.stdout_data.size();
  r.stderr_stream.total_bytes = s.stderr_data.size();
  const auto end = s.exit ? s.t_exit : s.t_end;
  const bool started = s.phase != Phase::kBooting && s.phase != Phase::kSetup;
  r.wall_ns =
      started ? static_cast<uint64_t>(std::max<int64_t>(0, (end - s.t_started).count())) : 0;
  std::string problems;
  auto note = [&problems](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  if (s.cancelled) {
    // The caller stopped it (as under gVisor: whatever the program wrote so far is reported,
    // nothing more is judged). The VM is already gone.
    r.interrupted = true;
    r.term_signal = SIGKILL;
    note(std::string("cancelled while ") +
         (!started ? "the guest booted"
          : s.exit ? "the outputs were collected"
                   : "the program ran") +
         "; the VM was killed");
  } else if (s.exit) {
    const ExitReport& e = *s.exit;
    r.exit_code = e.exit_code;
    r.term_signal = e.term_signal;
    r.limit = ToLimitHit(e.limit);
    if (r.limit != LimitHit::kNone) r.limit_detail = e.detail;
    if (e.limit == GuestLimit::kNone && !e.detail.empty()) note(e.detail);
    if (std::string silence = SilenceNote(s); !silence.empty()) {
      note(silence);
      if (std::string vmm = VmmThreadsNote(s); !vmm.empty()) note(vmm);
    }
    r.cpu_ns = e.cpu_ns;
    r.peak_memory_bytes = std::min<uint64_t>(e.peak_memory_bytes, guest_mib * kMiB);
    r.fork_failures = e.fork_failures;
    r.stdout_stream.total_bytes = std::max<uint64_t>(e.stdout_total, s.stdout_data.size());
    r.stderr_stream.total_bytes = std::max<uint64_t>(e.stderr_total, s.stderr_data.size());
    if (!s.outputs_complete) {
      note(std::string("output transfer incomplete (") +
           (s.timed_out            ? "timed out"
            : !s.violation.empty() ? "guest protocol violation: " + s.violation
                                   : "the VM ended") +
           ")");
    }
  } else {
    // The program did not finish on its own: killed with the VM. Its CPU time is the last the
    // agent reported (a lower bound; with an exit report it is the agent's figure too).
    r.term_signal = SIGKILL;
    if (s.last_heartbeat) r.cpu_ns = s.last_heartbeat->beat.cpu_ns;
    if (s.timed_out) {
      r.limit = LimitHit::kWallTime;
      r.limit_detail =
          "wall time limit: " + Ms(std::chrono::nanoseconds(plan.limits.wall_time_ns)) +
          " (the VM was killed)";
      // Whether the program or the guest hung: the heartbeats say, and a stalled guest kernel
      // may say so on its console.
      if (std::string beats = HeartbeatNote(s); !beats.empty()) note(beats);
      if (std::string vmm = VmmThreadsNote(s); !vmm.empty()) note(vmm);
      if (!s.console_tail.empty()) note("console at the kill: " + Tail(s.console_tail, 400));
    } else if (s.output_cap_hit) {
      r.limit = LimitHit::kOutput;
      r.limit_detail = fmt::format("output limit: more than {} bytes (the VM was killed)",
                                   plan.limits.output_bytes);
    } else if (vmm_oom > 0) {
      r.limit = LimitHit::kMemory;
      r.limit_detail = "the VMM exceeded its host memory limit (the VM was killed)";
    }
    if (!s.violation.empty()) note("guest protocol violation: " + s.violation);
    if (s.vmm_exited) {
      note("the VM ended while the program ran" +
           (s.console_tail.empty() ? std::string() : "; console: " + Tail(s.console_tail, 400)));
    }
  }
  if (s.output_cap_hit && r.limit == LimitHit::kNone) {
    r.limit = LimitHit::kOutput;
    r.limit_detail = fmt::format("output limit: more than {} bytes", plan.limits.output_bytes);
  }
  r.stdout_stream.truncated = r.stdout_stream.total_bytes > r.stdout_stream.data.size();
  r.stderr_stream.truncated = r.stderr_stream.total_bytes > r.stderr_stream.data.size();
  r.backend_error = problems;
  return r;
}

}  // namespace safex::microvm
