#include "drivers/microvm/microvm_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "common/owner_lock.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/guest_spec_builder.h"
#include "drivers/microvm/guest_tap.h"
#include "drivers/microvm/host_tsc.h"
#include "drivers/microvm/kvm_probe.h"
#include "drivers/microvm/output_receiver.h"
#include "drivers/microvm/rootfs_image.h"
#include "drivers/microvm/vm_launcher.h"

namespace safex::drivers {

using microvm::Accel;

struct MicrovmDriver::Ready {
  std::optional<cgroup::CgroupHost> cgroups;
  uint64_t tsc_khz = 0;
  bool kvm_usable = false;
  std::string kvm_detail;
  std::vector<gid_t> kvm_groups;
  std::unique_ptr<microvm::ImageCache> images;
};

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// The VMM runs as an unprivileged uid: what it opens by path (QEMU itself, the kernel, the
// initramfs) must be reachable by anyone: world-readable (or -executable) along the whole path.
Status CheckFile(const std::string& path, const char* what, bool executable) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    return Status::Unavailable(std::string("microvm: ") + what + " " + path +
                               " is missing (install: scripts/install-deps.sh, which runs "
                               "scripts/build-guest.sh)");
  }
  mode_t need = executable ? S_IXOTH : S_IROTH;
  if ((st.st_mode & need) == 0) {
    return Status::Unavailable(std::string("microvm: ") + what + " " + path + " is not " +
                               (executable ? "executable" : "readable") +
                               " by others (the VMM runs unprivileged)");
  }
  for (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0;
       slash = path.rfind('/', slash - 1)) {
    std::string dir = path.substr(0, slash);
    if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return Status::Unavailable(std::string("microvm: ") + what + " " + path +
                                 " is in a directory others cannot enter: " + dir);
    }
  }
  return Status::Ok();
}

Status MakeDir(const std::string& path, mode_t mode) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string p = path.substr(0, i);
      if (mkdir(p.c_str(), i == path.size() ? mode : 0755) != 0 && errno != EEXIST) {
        return Status::Errno("mkdir", p, errno);
      }
    }
  }
  return Status::Ok();
}

bool ValidRunId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

uint32_t VmmId(const MicrovmOptions& o, const std::string& run_id) {
  if (o.vmm_id_count == 0) return o.vmm_id_base;
  Sha256Digest d = Sha256(run_id);
  uint32_t h = static_cast<uint32_t>(d[0]) | static_cast<uint32_t>(d[1]) << 8 |
               static_cast<uint32_t>(d[2]) << 16 | static_cast<uint32_t>(d[3]) << 24;
  return o.vmm_id_base + h % o.vmm_id_count;
}

LimitHit ToLimitHit(microvm::GuestLimit l) {
  switch (l) {
    case microvm::GuestLimit::kNone:
      return LimitHit::kNone;
    case microvm::GuestLimit::kCpuTime:
      return LimitHit::kCpuTime;
    case microvm::GuestLimit::kMemory:
      return LimitHit::kMemory;
    case microvm::GuestLimit::kPids:
      return LimitHit::kPids;
    case microvm::GuestLimit::kOutput:
      return LimitHit::kOutput;
  }
  return LimitHit::kNone;
}

std::string Ms(std::chrono::nanoseconds d) { return std::to_string(d.count() / 1000000) + " ms"; }

// Removes the run directory when the run ends, whatever happened.
class RunDir {
 public:
  RunDir() = default;
  explicit RunDir(std::string p) : path_(std::move(p)) {}
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  ~RunDir() { (void)Remove(); }
  const std::string& path() const { return path_; }
  Status Remove() {
    if (path_.empty()) return Status::Ok();
    Status s = microvm::RemoveTree(path_);
    if (s.ok()) path_.clear();
    return s;
  }

 private:
  std::string path_;
};

std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  closedir(d);
  return names;
}

// Whether any hierarchy lists a process in <parent>/<name> (read only: adopting the cgroup would
// destroy it).
bool CgroupHasProcesses(const cgroup::CgroupHost& host, const std::string& parent,
                        const std::string& name) {
  for (const std::string& h : host.HierarchyDirs()) {
    std::string file = h + "/" + parent + "/" + name + "/cgroup.procs";
    UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    char c;
    ssize_t n = read(fd.get(), &c, 1);
    if (n != 0) return true;  // a pid, or unreadable: assume in use
  }
  return false;
}

constexpr time_t kLocklessStaleAge = 600;

}  // namespace

// One run's leftovers. `owner_dead`: the caller knows the run's owner is gone (a run record
// whose lock was free), so a run directory without a lock file is taken too.
static Status CleanOneRun(const cgroup::CgroupHost& host, const MicrovmOptions& o,
                          const std::string& run_id, bool owner_dead, bool* cleaned) {
  *cleaned = false;
  const std::string dir = o.state_root + "/runs/" + run_id;
  const std::string cg_name = "microvm-" + run_id;
  struct stat st;
  bool has_dir = lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  UniqueFd lock;  // held while cleaning: a run id is never reused, but be exact
  if (has_dir) {
    OwnerState owner = ProbeOwner(dir, &lock);
    if (owner == OwnerState::kAlive) return Status::Ok();
    if (owner == OwnerState::kNoLock && !owner_dead) {
      // No lock: a run between mkdir and its lock (microseconds) or of an older build that may
      // still be alive. Only old directories whose VMM cgroup holds nothing are taken.
      if (time(nullptr) - st.st_mtime < kLocklessStaleAge) return Status::Ok();
      if (CgroupHasProcesses(host, o.cgroup_parent, cg_name)) return Status::Ok();
    }
  } else if (!owner_dead) {
    return Status::Ok();
  }
  std::string errors;
  auto note = [&errors](const std::string& what, const Status& st) {
    if (!st.ok()) errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };
  // The VMM: every process still in the run's cgroup is SIGKILLed through a pidfd that is
  // checked against cgroup.procs (a recycled pid is never hit), and rmdir waits until the
  // cgroup is empty.
  Result<cgroup::RunCgroup> cg = host.Adopt(o.cgroup_parent, cg_name);
  if (cg.ok()) {
    note("killing the VMM of " + run_id, cg->KillAll());
    Status d = cg->Destroy(std::chrono::milliseconds(10000));
    note("cgroup " + cg_name, d);
    if (d.ok()) *cleaned = true;
  } else if (cg.status().code() != Status::Code::kNotFound) {
    note("cgroup " + cg_name, cg.status());
  }
  // Nothing in the directory is mounted (the input is an image file given to QEMU as an fd; the
  // output tmpfs are detached and died with the supervisor's fds). RemoveTree refuses to cross
  // a mount point anyway.
  if (has_dir) {
    Status rm = microvm::RemoveTree(dir);
    note("remove " + dir, rm);
    if (rm.ok()) *cleaned = true;
  }
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

MicrovmDriver::MicrovmDriver(MicrovmOptions options) : options_(std::move(options)) {}
MicrovmDriver::~MicrovmDriver() = default;

std::optional<bool> MicrovmDriver::kvm_usable() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!ready_) return std::nullopt;
  return ready_->kvm_usable;
}

std::string MicrovmDriver::kvm_detail() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_ ? ready_->kvm_detail : "";
}

Status MicrovmDriver::Probe() {
  const MicrovmOptions& o = options_;
  SAFEX_RETURN_IF_ERROR(CheckFile(o.qemu_path, "QEMU", true));
  SAFEX_RETURN_IF_ERROR(CheckFile(o.kernel_path, "guest kernel", false));
  SAFEX_RETURN_IF_ERROR(CheckFile(o.initramfs_path, "guest initramfs", false));
  SAFEX_RETURN_IF_ERROR(CheckFile(o.mkfs_erofs_path, "mkfs.erofs", true));
  for (const char* sub : {"", "/runs", "/images"}) {
    Status s = MakeDir(o.state_root + sub, 0700);
    if (!s.ok()) return Status::Unavailable("microvm: state directory: " + s.message());
  }
  if (access(o.state_root.c_str(), W_OK) != 0) {
    return Status::Unavailable("microvm: state directory " + o.state_root + " is not writable");
  }
  Result<cgroup::CgroupHost> cg = cgroup::CgroupHost::Detect(o.cgroup_root);
  if (!cg.ok()) return Status::Unavailable("microvm: cgroups: " + cg.status().message());
  SAFEX_RETURN_IF_ERROR(cg->CheckUsable(o.cgroup_parent));

  auto ready = std::make_unique<Ready>();
  ready->cgroups = *cg;
  ready->tsc_khz = microvm::MeasureHostTscKhz();
  microvm::ImageCache::Options io;
  io.dir = o.state_root + "/images";
  io.mkfs_erofs = o.mkfs_erofs_path;
  io.max_images = o.image_cache_max;
  io.max_total_bytes = o.image_cache_max_bytes;
  ready->images = std::make_unique<microvm::ImageCache>(io);

  struct stat kvm_st;
  if (stat("/dev/kvm", &kvm_st) == 0 && (kvm_st.st_mode & 060) == 060 && kvm_st.st_gid != 0) {
    ready->kvm_groups.push_back(kvm_st.st_gid);  // the kvm group lets the unprivileged VMM in
  }
  if (o.kvm == plan::KvmMode::kNever) {
    ready->kvm_detail = "KVM disabled by the operator (kvm = never)";
  } else {
    microvm::LaunchSpec base;
    base.vm.qemu_path = o.qemu_path;
    base.vm.kernel_path = o.kernel_path;
    base.vm.initramfs_path = o.initramfs_path;
    base.uid = o.vmm_id_base;
    base.gid = o.vmm_id_base;
    base.groups = ready->kvm_groups;
    microvm::KvmProbeResult kp =
        microvm::ProbeKvm(base, o.kvm_probe_timeout, o.state_root + "/kvm-probe");
    ready->kvm_usable = kp.usable;
    ready->kvm_detail = kp.detail;
    if (o.kvm == plan::KvmMode::kRequire && !kp.usable) {
      return Status::Unavailable("microvm: KVM is required by the operator but unusable: " +
                                 kp.detail);
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  ready_ = std::move(ready);
  return Status::Ok();
}

Result<const MicrovmDriver::Ready*> MicrovmDriver::EnsureReady() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ready_) return static_cast<const Ready*>(ready_.get());
  }
  SAFEX_RETURN_IF_ERROR(Probe());
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<const Ready*>(ready_.get());
}

Result<RunResult> MicrovmDriver::Run(const plan::Plan& plan, const RunRequest& req) {
  auto t_entry = std::chrono::steady_clock::now();
  SAFEX_ASSIGN_OR_RETURN(const Ready* ready, EnsureReady());
  const MicrovmOptions& o = options_;

  // --- Refusals: nothing has been created yet. ---
  if (plan.backend != plan::Backend::kMicrovm) {
    return Status::InvalidArgument("microvm: the plan's backend is " +
                                   std::string(plan::BackendName(plan.backend)));
  }
  if (!ValidRunId(req.run_id)) return Status::InvalidArgument("microvm: bad run id");
  bool wants_network = !plan.network.egress.empty();
  if (wants_network && !o.network_provider) {
    return Status::Unavailable(
        "microvm: the plan grants egress but this supervisor has no network configured for runs; "
        "refused, nothing ran");
  }
  if (req.stdin_data && req.stdin_data->size() > o.max_stdin_bytes) {
    return Status::InvalidArgument("microvm: stdin larger than " +
                                   std::to_string(o.max_stdin_bytes) + " bytes");
  }
  bool plan_require = plan.microvm.kvm == plan::KvmMode::kRequire;
  bool never = plan.microvm.kvm == plan::KvmMode::kNever || o.kvm == plan::KvmMode::kNever;
  if ((plan_require || o.kvm == plan::KvmMode::kRequire) && (never || !ready->kvm_usable)) {
    return Status::Unavailable(std::string("microvm: KVM is required by the ") +
                               (plan_require ? "plan" : "operator") +
                               " but unusable here: " + ready->kvm_detail);
  }
  Accel accel = (!never && ready->kvm_usable) ? Accel::kKvm : Accel::kTcg;
  uint32_t vcpus = std::clamp<uint32_t>(plan.microvm.vcpus, 1, 64);

  auto cancelled = [&req] {
    return req.cancel != nullptr && req.cancel->load(std::memory_order_relaxed) != 0;
  };

  // --- Per-run state. ---
  std::string run_path = o.state_root + "/runs/" + req.run_id;
  if (mkdir(run_path.c_str(), 0700) != 0) {
    return Status::Errno("mkdir", run_path, errno).With("microvm: run directory");
  }
  // Declared before run_dir: the lock is released only after the directory is gone, so that
  // CleanupStale never takes a finishing run for a dead one.
  UniqueFd owner_lock;
  RunDir run_dir(run_path);
  SAFEX_ASSIGN_OR_RETURN(owner_lock, CreateOwnerLock(run_path));

  std::vector<std::string> sources;
  std::vector<size_t> source_of_mount(plan.mounts.size(), SIZE_MAX);
  bool has_input = false;
  std::vector<microvm::OutputMountSpec> outputs;
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    if (m.kind == plan::MountKind::kBind) {
      source_of_mount[i] = sources.size();
      sources.push_back(m.source);
    }
    if (m.kind == plan::MountKind::kInput) has_input = true;
    if (m.kind == plan::MountKind::kOutput) {
      outputs.push_back({static_cast<uint32_t>(i), m.size_bytes});
    }
  }
  microvm::GuestSpecInputs in;
  in.disks.assign(plan.mounts.size(), 0);
  in.image_paths.assign(plan.mounts.size(), "");
  in.is_file.assign(plan.mounts.size(), false);
  std::vector<microvm::VmDisk> disks;
  std::vector<int> disk_fds;
  microvm::RootfsImages rootfs;
  if (!sources.empty()) {
    Result<microvm::RootfsImages> img = ready->images->Get(sources);
    if (!img.ok()) return img.status().With("microvm: rootfs image");
    rootfs = std::move(*img);
    for (size_t i = 0; i < plan.mounts.size(); ++i) {
      if (source_of_mount[i] == SIZE_MAX) continue;
      in.disks[i] = rootfs.disk_of[source_of_mount[i]];
      in.image_paths[i] = rootfs.image_paths[source_of_mount[i]];
      in.is_file[i] = rootfs.is_file[source_of_mount[i]];
    }
    for (size_t d = 0; d < rootfs.disks.size(); ++d) {
      disks.push_back({-1, microvm::kRootfsDiskSerialPrefix + std::to_string(d)});
      disk_fds.push_back(rootfs.disks[d].fd.get());
    }
  }
  UniqueFd input_fd;
  if (has_input && !req.input_dir.empty()) {
    std::string input_image = run_path + "/input.erofs";
    SAFEX_RETURN_IF_ERROR(ready->images->BuildDirectoryImage(req.input_dir, input_image));
    input_fd.Reset(open(input_image.c_str(), O_RDONLY | O_CLOEXEC));
    if (!input_fd) return Status::Errno("open", input_image, errno);
    in.has_input_image = true;
    disks.push_back({-1, microvm::kInputDiskSerial});
    disk_fds.push_back(input_fd.get());
  }
  // The run's network (egress only): declared before QEMU is started, so that on every way out
  // of Run it is removed after QEMU is gone.
  std::unique_ptr<RunNetworkHandle> net;
  UniqueFd tap;
  if (wants_network) {
    SAFEX_ASSIGN_OR_RETURN(net, o.network_provider(plan, req.run_id));
    if (!net || net->netns_fd() < 0) {
      return Status::Internal("microvm: the network provider returned no network namespace");
    }
    std::optional<RunNetworkHandle::SandboxLink> link = net->sandbox_link();
    if (!link || link->ifname.empty() || link->address == 0 || link->gateway == 0) {
      return Status::Unavailable(
          "microvm: the run's network does not describe its link; refused, nothing ran");
    }
    SAFEX_ASSIGN_OR_RETURN(tap, microvm::AttachGuestTap(net->netns_fd(), link->ifname));
    auto dotted = [](uint32_t a) {
      return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
             std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
    };
    microvm::GuestNetwork gn;
    gn.address = dotted(link->address);
    gn.gateway = dotted(link->gateway);
    gn.prefix = static_cast<uint32_t>(link->prefix);
    in.network = gn;
    in.hosts_file = net->hosts_file();
  }
  in.has_stdin = req.stdin_data.has_value() && !req.stdin_data->empty();
  SAFEX_ASSIGN_OR_RETURN(microvm::GuestSpec spec, microvm::BuildGuestSpec(plan, req.argv, in));

  std::optional<microvm::OutputReceiver> receiver;
  if (!outputs.empty()) {
    microvm::OutputReceiver::Caps caps;
    caps.max_entries = plan.outputs.max_files > 0 ? plan.outputs.max_files + 1 : 100000;
    caps.max_total_bytes = plan.outputs.max_total_bytes;
    Result<microvm::OutputReceiver> r = microvm::OutputReceiver::Create(outputs, caps);
    if (!r.ok()) return r.status().With("microvm: output tmpfs");
    receiver.emplace(std::move(*r));
  }

  uint64_t guest_ram = plan.limits.memory_bytes + o.guest_overhead_bytes;
  uint64_t guest_mib = (guest_ram + kMiB - 1) / kMiB;
  cgroup::Limits cg_limits;
  cg_limits.memory_bytes = guest_mib * kMiB + o.vmm_overhead_bytes;
  cg_limits.pids_max = o.vmm_pids;
  cg_limits.cpus = vcpus + 1;  // the vCPU threads and QEMU's main loop
  Result<cgroup::RunCgroup> cg =
      ready->cgroups->CreateRun(o.cgroup_parent, "microvm-" + req.run_id, cg_limits);
  if (!cg.ok()) return cg.status().With("microvm: the VMM's cgroup");

  std::string mode = std::string("microvm/") + microvm::AccelName(accel) +
                     (net ? "/network=netns" : "/network=none");
  if (cancelled()) {
    // Stopped before QEMU: nothing ran; everything made so far goes with the RAII owners.
    RunResult r;
    r.backend_mode = mode;
    r.term_signal = SIGKILL;
    r.interrupted = true;
    r.backend_error = "cancelled before the VM was started";
    return r;
  }

  microvm::LaunchSpec ls;
  ls.vm.qemu_path = o.qemu_path;
  ls.vm.kernel_path = o.kernel_path;
  ls.vm.initramfs_path = o.initramfs_path;
  ls.vm.accel = accel;
  ls.vm.memory_mib = guest_mib;
  ls.vm.vcpus = vcpus;
  ls.vm.tsc_khz = ready->tsc_khz;
  ls.vm.tcg_tb_mib = o.tcg_tb_mib;
  ls.vm.disks = disks;
  ls.disk_fds = disk_fds;
  if (net) {
    ls.tap_fd = tap.get();
    ls.vm.mac = microvm::GuestMac(req.run_id);
    ls.netns_fd = net->netns_fd();  // QEMU itself sees only the run's namespace
  }
  uint32_t id = VmmId(o, req.run_id);
  ls.uid = id;
  ls.gid = id;
  if (accel == Accel::kKvm) ls.groups = ready->kvm_groups;
  for (const std::string& d : cg->dirs()) ls.cgroup_procs_files.push_back(d + "/cgroup.procs");

  microvm::SessionConfig sc;
  sc.spec_payload = microvm::EncodeSpec(spec);
  if (in.has_stdin) sc.stdin_data = &*req.stdin_data;
  sc.output_cap = plan.limits.output_bytes;
  sc.boot_timeout = o.boot_timeout;
  sc.wall_timeout = std::chrono::nanoseconds(plan.limits.wall_time_ns);
  sc.collect_timeout = o.collect_timeout;
  sc.outputs = receiver ? &*receiver : nullptr;
  sc.cancel = req.cancel;
  if (o.started_observer) {
    sc.on_started = [&o, &req] { o.started_observer(req.run_id); };
  }

  auto t_launch = std::chrono::steady_clock::now();
  Result<microvm::LaunchResult> launched = microvm::LaunchAndRun(std::move(ls), sc);
  auto t_session_end = std::chrono::steady_clock::now();
  // QEMU is gone (LaunchAndRun always reaps it): the VMM's memory and tasks can be released.
  uint64_t vmm_oom = 0;
  if (cg.ok()) {
    Result<uint64_t> ooms = cg->OomKills();
    if (ooms.ok()) vmm_oom = *ooms;
  }
  Status cg_teardown = cg->Destroy();
  if (!launched.ok()) return launched.status().With("microvm: starting QEMU");
  const microvm::SessionResult& s = launched->session;
  // QEMU is gone: the tap's last user. The namespace itself goes at the network's teardown.
  tap.Reset();

  // --- Nothing ran: a refusal or setup error with the reason (a cancelled boot is a result). ---
  if (!s.cancelled && (s.phase == microvm::Phase::kBooting || s.phase == microvm::Phase::kSetup ||
                       (s.phase == microvm::Phase::kDone && !s.guest_setup_error.empty()))) {
    if (!s.guest_setup_error.empty()) {
      return Status::FailedPrecondition("microvm: the guest could not prepare the run: " +
                                        s.guest_setup_error);
    }
    std::string where = s.phase == microvm::Phase::kBooting ? "boot" : "set up the run";
    std::string tail = s.console_tail.empty()
                           ? ""
                           : "; console: " + s.console_tail.substr(s.console_tail.size() > 600
                                                                       ? s.console_tail.size() - 600
                                                                       : 0);
    if (s.timed_out) {
      return Status::Unavailable(
          "microvm: the guest did not " + where + " within " +
          Ms(std::chrono::duration_cast<std::chrono::nanoseconds>(o.boot_timeout)) + " (" +
          microvm::AccelName(accel) + "); the VMM was killed" + tail);
    }
    if (!s.violation.empty()) {
      return Status::Internal("microvm: guest protocol violation before the program started: " +
                              s.violation);
    }
    std::string why = launched->vmm.exited
                          ? "exited with status " + std::to_string(launched->vmm.code)
                          : "was killed by signal " + std::to_string(launched->vmm.signal);
    if (vmm_oom > 0) why += " (out of memory in its host cgroup)";
    return Status::Unavailable("microvm: QEMU " + why + " before the program started" +
                               (s.vmm_stderr.empty() ? "" : ": " + s.vmm_stderr) + tail);
  }

  // --- The program ran. ---
  RunResult r;
  r.backend_mode = mode;
  r.stdout_stream.data = s.stdout_data;
  r.stderr_stream.data = s.stderr_data;
  auto end = s.exit ? s.t_exit : s.t_end;
  bool started = s.phase != microvm::Phase::kBooting && s.phase != microvm::Phase::kSetup;
  r.wall_ns =
      started ? static_cast<uint64_t>(std::max<int64_t>(0, (end - s.t_started).count())) : 0;
  std::string problems;
  auto note = [&problems](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  if (s.cancelled) {
    // The caller stopped it (as under gVisor: whatever the program wrote so far is reported,
    // nothing more is judged). The VM is already gone.
    r.interrupted = true;
    r.exit_code = -1;
    r.term_signal = SIGKILL;
    r.stdout_stream.total_bytes = s.stdout_data.size();
    r.stderr_stream.total_bytes = s.stderr_data.size();
    note(std::string("cancelled while ") +
         (!started ? "the guest booted"
          : s.exit ? "the outputs were collected"
                   : "the program ran") +
         "; the VM was killed");
  } else if (s.exit) {
    const microvm::ExitReport& e = *s.exit;
    r.exit_code = e.exit_code;
    r.term_signal = e.term_signal;
    r.limit = ToLimitHit(e.limit);
    if (r.limit != LimitHit::kNone) r.limit_detail = e.detail;
    if (e.limit == microvm::GuestLimit::kNone && !e.detail.empty()) note(e.detail);
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
    // The program did not finish on its own: killed with the VM.
    r.exit_code = -1;
    r.term_signal = SIGKILL;
    r.stdout_stream.total_bytes = s.stdout_data.size();
    r.stderr_stream.total_bytes = s.stderr_data.size();
    if (s.timed_out) {
      r.limit = LimitHit::kWallTime;
      r.limit_detail =
          "wall time limit: " + Ms(std::chrono::nanoseconds(plan.limits.wall_time_ns)) +
          " (the VM was killed)";
    } else if (s.output_cap_hit) {
      r.limit = LimitHit::kOutput;
      r.limit_detail = "output limit: more than " + std::to_string(plan.limits.output_bytes) +
                       " bytes (the VM was killed)";
    } else if (vmm_oom > 0) {
      r.limit = LimitHit::kMemory;
      r.limit_detail = "the VMM exceeded its host memory limit (the VM was killed)";
    }
    if (!s.violation.empty()) note("guest protocol violation: " + s.violation);
    if (s.vmm_exited) {
      note("the VM ended while the program ran" +
           (s.console_tail.empty()
                ? std::string()
                : "; console: " + s.console_tail.substr(s.console_tail.size() > 400
                                                            ? s.console_tail.size() - 400
                                                            : 0)));
    }
  }
  if (s.output_cap_hit && r.limit == LimitHit::kNone) {
    r.limit = LimitHit::kOutput;
    r.limit_detail =
        "output limit: more than " + std::to_string(plan.limits.output_bytes) + " bytes";
  }
  r.stdout_stream.truncated = r.stdout_stream.total_bytes > r.stdout_stream.data.size();
  r.stderr_stream.truncated = r.stderr_stream.total_bytes > r.stderr_stream.data.size();
  r.backend_error = problems;

  // Every process of the run is gone (QEMU reaped): hand over the outputs, then drop them.
  if (receiver && req.collect_output) {
    for (const microvm::OutputMountSpec& om : outputs) {
      int fd = receiver->RootFd(om.mount_index);
      if (fd >= 0) req.collect_output(plan.mounts[om.mount_index], fd);
    }
  }
  receiver.reset();
  rootfs.disks.clear();
  input_fd.Reset();
  Status net_teardown = Status::Ok();
  if (net) {
    r.denied_egress = net->DeniedEgress();
    net_teardown = net->Teardown();
  }
  Status dir_teardown = run_dir.Remove();
  std::string teardown;
  if (!cg_teardown.ok()) teardown = "cgroup: " + cg_teardown.message();
  if (!net_teardown.ok()) {
    teardown += (teardown.empty() ? "" : "; ") + ("network: " + net_teardown.message());
  }
  if (!dir_teardown.ok()) teardown += (teardown.empty() ? "" : "; ") + dir_teardown.message();
  r.teardown_error = teardown;
  if (o.timings_observer) {
    microvm::SessionResult& ts = launched->session;
    MicrovmRunTimings t;
    auto now = std::chrono::steady_clock::now();
    t.total = now - t_entry;
    t.prepare = t_launch - t_entry;
    t.image_fingerprint = rootfs.fingerprint_time;
    t.image_build = rootfs.build_time;
    t.vmm_start = launched->vmm_start;
    t.to_hello = ts.t_hello;
    if (ts.hello) {
      t.guest_kernel = std::chrono::nanoseconds(ts.hello->agent_start_ns);
      t.guest_modules = std::chrono::nanoseconds(ts.hello->modules_ns);
    }
    t.setup = ts.t_started - ts.t_hello;
    if (ts.exit) t.program = ts.t_exit - ts.t_started;
    if (ts.outputs_complete) t.outputs = ts.t_done - ts.t_exit;
    t.teardown = now - t_session_end;
    o.timings_observer(t);
  }
  return r;
}

Status MicrovmDriver::CleanupStale(int* cleaned) {
  if (cleaned != nullptr) *cleaned = 0;
  const MicrovmOptions& o = options_;
  std::string errors;
  auto note = [&errors](const std::string& what, const Status& st) {
    if (!st.ok()) errors += (errors.empty() ? "" : "; ") + what + ": " + st.message();
  };
  // Image builds a dead process left: <key>.tmp.<suffix> (and its staging directory
  // stage.<suffix>) whose <key>.lock no builder holds. A partial /usr image is gigabytes.
  const std::string images = o.state_root + "/images";
  for (const std::string& n : DirNames(images)) {
    size_t at = n.find(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    std::string key = n.substr(0, at), suffix = n.substr(at + 5);
    if (key.find('/') != std::string::npos || suffix.empty()) continue;
    UniqueFd lock(open((images + "/" + key + ".lock").c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (lock && flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a build in progress
    if (unlink((images + "/" + n).c_str()) != 0 && errno != ENOENT) {
      note("unlink", Status::Errno("unlink", images + "/" + n, errno));
    }
    note("staging directory", microvm::RemoveTree(images + "/stage." + suffix));
  }

  std::vector<std::string> runs = DirNames(o.state_root + "/runs");
  std::vector<std::string> ids;
  for (const std::string& n : runs) {
    if (ValidRunId(n)) ids.push_back(n);  // anything else is not ours
  }
  if (!ids.empty()) {
    // Only now: a host without a state root (microVM never used) needs no cgroups at all.
    Result<cgroup::CgroupHost> host = cgroup::CgroupHost::Detect(o.cgroup_root);
    if (!host.ok()) return host.status().With("microvm cleanup: cgroups");
    for (const std::string& id : ids) {
      bool c = false;
      note(id, CleanOneRun(*host, o, id, /*owner_dead=*/false, &c));
      if (c && cleaned != nullptr) ++*cleaned;
    }
  }
  if (!errors.empty()) return Status::Internal("microvm cleanup: " + errors);
  return Status::Ok();
}

Status MicrovmDriver::CleanupStaleRun(const std::string& run_id, bool* cleaned) {
  if (cleaned != nullptr) *cleaned = false;
  if (!ValidRunId(run_id)) return Status::Ok();  // no run of this driver can have that name
  struct stat st;
  bool any = stat((options_.state_root + "/runs/" + run_id).c_str(), &st) == 0;
  Result<cgroup::CgroupHost> host = cgroup::CgroupHost::Detect(options_.cgroup_root);
  if (!host.ok()) {
    if (!any) return Status::Ok();  // no cgroups here and no directory: nothing to clean
    return host.status().With("microvm cleanup: cgroups");
  }
  bool c = false;
  Status s = CleanOneRun(*host, options_, run_id, /*owner_dead=*/true, &c);
  if (cleaned != nullptr) *cleaned = c;
  if (!s.ok()) return Status::Internal("microvm cleanup: " + s.message());
  return Status::Ok();
}

}  // namespace safex::drivers
