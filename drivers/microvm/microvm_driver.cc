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
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "common/fs_tree.h"
#include "common/owner_lock.h"
#include "common/run_id.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "drivers/cgroup/cgroup.h"
#include "drivers/microvm/guest_spec.h"
#include "drivers/microvm/guest_spec_builder.h"
#include "drivers/microvm/guest_tap.h"
#include "drivers/microvm/host_tsc.h"
#include "drivers/microvm/kvm_probe.h"
#include "drivers/microvm/output_receiver.h"
#include "drivers/microvm/pooled_vm.h"
#include "drivers/microvm/rootfs_image.h"
#include "drivers/microvm/run_steps.h"
#include "drivers/microvm/vm_launcher.h"
#include "plan/plan_json.h"

namespace safex::drivers {

using microvm::Accel;

struct MicrovmDriver::Ready {
  std::optional<cgroup::CgroupHost> cgroups;
  uint64_t tsc_khz = 0;
  bool kvm_usable = false;
  std::string kvm_detail;
  std::vector<gid_t> kvm_groups;
  std::unique_ptr<microvm::ImageCache> images;
  std::string qemu_version;   // the first line of `qemu --version`, for each run's evidence
  std::string qemu_sha256;    // the QEMU binary's SHA-256 (or "unknown (why)"), the same
  std::string qemu_identity;  // which QEMU file that version, hash and tsc_khz were found with
};

namespace {

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
    Status rm = RemoveTree(dir);
    note("remove " + dir, rm);
    if (rm.ok()) *cleaned = true;
  }
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

MicrovmDriver::MicrovmDriver(MicrovmOptions options) : options_(std::move(options)) {}
MicrovmDriver::~MicrovmDriver() = default;

// TCG (QEMU's emulator) is not a security boundary: QEMU's own security policy treats it as the
// non-virtualisation use case, where guest code is trusted. A plan for untrusted code therefore
// runs only with KVM, unless the operator opted in for testing (the record then says
// "microvm/tcg").
Status MicrovmDriver::TcgAdmits(const plan::Plan& plan, bool tcg,
                                const std::string& kvm_detail) const {
  if (!tcg || plan.trust != plan::Trust::kUntrusted || options_.tcg_for_untrusted) {
    return Status::Ok();
  }
  return Status::Unavailable(
      "microvm: KVM is not usable on this host (" + kvm_detail +
      ") and TCG emulation is not a security boundary for untrusted code; refused, nothing ran "
      "(a test host may opt in: backends { microvm { tcg_for_untrusted = true } })");
}

Status MicrovmDriver::CheckRequest(const plan::Plan& plan, const RunRequest& request) const {
  SAFEX_RETURN_IF_ERROR(Driver::CheckRequest(plan, request));
  std::lock_guard<std::mutex> l(mu_);
  if (!ready_) return Status::Ok();  // not probed yet: Run decides
  const bool never =
      plan.microvm.kvm == plan::KvmMode::kNever || options_.kvm == plan::KvmMode::kNever;
  return TcgAdmits(plan, never || !ready_->kvm_usable, ready_->kvm_detail);
}

std::optional<bool> MicrovmDriver::kvm_usable() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!ready_) return std::nullopt;
  return ready_->kvm_usable;
}

std::string MicrovmDriver::kvm_detail() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_ ? ready_->kvm_detail : "";
}

namespace {

// "QEMU emulator version 7.2.13 (Debian 1:7.2+dfsg-7+deb12u7)"; what went wrong otherwise (the
// version is evidence, not a precondition: QEMU's own start says whether it works).
std::string QemuVersion(const std::string& qemu_path) {
  auto out = RunTool({qemu_path, "--version"}, std::chrono::seconds(10), 4096);
  if (!out.ok()) return "unknown (" + out.status().message() + ")";
  std::string line = out->output.substr(0, out->output.find('\n'));
  if (out->timed_out || !out->status.exited || out->status.code != 0 || line.empty()) {
    return "unknown (qemu --version failed)";
  }
  return line;
}

// The SHA-256 of the QEMU binary that `identity` (PathIdentity) names: "unknown (why)" when it
// cannot be read, or was another file by the end of the read. The path is the operator's (host
// config), opened read-only and only hashed.
std::string QemuSha256(const std::string& qemu_path, const std::string& identity) {
  UniqueFd fd(open(qemu_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::string("unknown (") + strerror(errno) + ")";
  Result<std::string> sha256 = Sha256HexOfFd(fd.get());
  if (!sha256.ok()) return "unknown (" + sha256.status().message() + ")";
  if (PathIdentity(qemu_path, true) != identity) return "unknown (replaced while it was hashed)";
  return *sha256;
}

}  // namespace

// A probe that fails leaves no answer standing: the next run (or ProbeForMadeSandbox) probes
// again rather than use what an earlier probe found.
Status MicrovmDriver::Probe() {
  Status st = ProbeFully();
  if (!st.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    ready_.reset();
  }
  return st;
}

// A pooled VM runs already: its run starts no QEMU and makes no cgroup, state directory or
// image, so the last full probe's answer stands for it while QEMU's binary is still there. The
// full probe makes and checks those (a few milliseconds), and the KVM probe's cache file.
Status MicrovmDriver::ProbeForMadeSandbox() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ready_ && CheckFile(options_.qemu_path, "QEMU", true).ok()) return Status::Ok();
  }
  return Probe();
}

// QEMU's version line and SHA-256 and the host's TSC frequency, from the last probe that passed
// while QEMU is the same file (PathIdentity: device, inode, mtime, size): version and hash are the
// binary's, and the TSC's rate is fixed for the host's boot, which outlives this process. Measured
// again after a failed probe (it left no Ready) or a replaced QEMU. The first two cost every cold
// run's probe about 30 ms before (21 ms of them a busy loop sampling the TSC, and a `qemu
// --version` process); the hash of QEMU's 18 MiB costs about 40 ms more, once per binary.
void MicrovmDriver::HostFacts(Ready* ready) const {
  std::shared_ptr<const Ready> last;
  {
    std::lock_guard<std::mutex> l(mu_);
    last = ready_;
  }
  ready->qemu_identity = PathIdentity(options_.qemu_path, true);
  if (last && last->qemu_identity == ready->qemu_identity && last->tsc_khz != 0 &&
      last->qemu_sha256.size() == 64) {
    ready->qemu_version = last->qemu_version;
    ready->qemu_sha256 = last->qemu_sha256;
    ready->tsc_khz = last->tsc_khz;
    return;
  }
  ready->qemu_version = QemuVersion(options_.qemu_path);
  ready->qemu_sha256 = QemuSha256(options_.qemu_path, ready->qemu_identity);
  ready->tsc_khz = microvm::MeasureHostTscKhz();
}

Status MicrovmDriver::ProbeFully() {
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
  HostFacts(ready.get());
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
  ready_ = std::shared_ptr<const Ready>(std::move(ready));
  return Status::Ok();
}

// A run keeps the Ready it started with: a Probe meanwhile (the service probes before every
// run) replaces ready_ for later runs, never under a running one.
Result<std::shared_ptr<const MicrovmDriver::Ready>> MicrovmDriver::EnsureReady() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ready_) return ready_;
  }
  SAFEX_RETURN_IF_ERROR(Probe());
  std::lock_guard<std::mutex> l(mu_);
  return ready_;
}

namespace {

// What Run refuses before anything exists; the accelerator the run gets (KVM when the probe
// found it usable and neither the plan nor the operator says never).
Result<Accel> CheckRun(const plan::Plan& plan, const RunRequest& req, const MicrovmOptions& o,
                       bool kvm_usable, const std::string& kvm_detail) {
  if (plan.backend != plan::Backend::kMicrovm) {
    return Status::InvalidArgument("microvm: the plan's backend is " +
                                   std::string(plan::BackendName(plan.backend)));
  }
  if (!IsValidRunId(req.run_id)) return Status::InvalidArgument("microvm: bad run id");
  if (!plan.network.egress.empty() && !o.network_provider) {
    return Status::Unavailable(
        "microvm: the plan grants egress but this supervisor has no network configured for runs; "
        "refused, nothing ran");
  }
  if (req.stdin_data && req.stdin_data->size() > o.max_stdin_bytes) {
    return Status::InvalidArgument("microvm: stdin larger than " +
                                   std::to_string(o.max_stdin_bytes) + " bytes");
  }
  const bool plan_require = plan.microvm.kvm == plan::KvmMode::kRequire;
  const bool never = plan.microvm.kvm == plan::KvmMode::kNever || o.kvm == plan::KvmMode::kNever;
  if ((plan_require || o.kvm == plan::KvmMode::kRequire) && (never || !kvm_usable)) {
    return Status::Unavailable(std::string("microvm: KVM is required by the ") +
                               (plan_require ? "plan" : "operator") +
                               " but unusable here: " + kvm_detail);
  }
  return (!never && kvm_usable) ? Accel::kKvm : Accel::kTcg;
}

// After the outputs were handed over: the output tmpfs, the images' fds, the network (its drop
// counters read last), the run directory. What could not be removed, for the operator.
std::string TearDown(const Status& cg_teardown, microvm::VmRun& v, uint64_t* denied_egress) {
  v.receiver.reset();
  v.rootfs.disks.clear();
  v.input_fd.Reset();
  Status net_teardown = Status::Ok();
  if (v.net) {
    *denied_egress = v.net->DeniedCount();
    net_teardown = v.net->Teardown();
  }
  const Status dir_teardown = v.dir.Remove();
  std::string teardown;
  if (!cg_teardown.ok()) teardown = "cgroup: " + cg_teardown.message();
  if (!net_teardown.ok()) {
    teardown += (teardown.empty() ? "" : "; ") + ("network: " + net_teardown.message());
  }
  if (!dir_teardown.ok()) teardown += (teardown.empty() ? "" : "; ") + dir_teardown.message();
  return teardown;
}

MicrovmRunTimings Timings(const microvm::SessionResult& ts, const microvm::LaunchResult& launched,
                          const microvm::VmRun& v, std::chrono::steady_clock::time_point t_entry,
                          std::chrono::steady_clock::time_point t_launch,
                          std::chrono::steady_clock::time_point t_session_end) {
  MicrovmRunTimings t;
  const auto now = std::chrono::steady_clock::now();
  t.total = now - t_entry;
  t.prepare = t_launch - t_entry;
  t.image_fingerprint = v.rootfs.fingerprint_time;
  t.image_build = v.rootfs.build_time;
  t.vmm_start = launched.vmm_start;
  t.to_hello = ts.t_hello;
  if (ts.hello) {
    t.guest_kernel = std::chrono::nanoseconds(ts.hello->agent_start_ns);
    t.guest_modules = std::chrono::nanoseconds(ts.hello->modules_ns);
  }
  t.setup = ts.t_started - ts.t_hello;
  if (ts.exit) t.program = ts.t_exit - ts.t_started;
  if (ts.outputs_complete) t.outputs = ts.t_done - ts.t_exit;
  t.teardown = now - t_session_end;
  return t;
}

}  // namespace

namespace {

std::string BackendMode(Accel accel, const microvm::VmRun& v) {
  return std::string("microvm/") + microvm::AccelName(accel) +
         (v.net ? "/network=netns" : "/network=none");
}

// 1-5. The run's directory first (its input image lives there), the disks and the network before
//      the guest spec that names them, the output tmpfs, then the VMM's cgroup last (QEMU is
//      started straight into it). A pooled VM boots and waits at a low CPU share.
Status MakeRunResources(const plan::Plan& plan, const RunRequest& req, const MicrovmOptions& o,
                        microvm::ImageCache& images, const cgroup::CgroupHost& cgroups,
                        uint32_t vcpus, bool pooled, microvm::VmRun& v) {
  SAFEX_RETURN_IF_ERROR(microvm::CreateRunDirectory(o, req, v));
  SAFEX_RETURN_IF_ERROR(microvm::PrepareDisks(plan, req, images, v));
  SAFEX_RETURN_IF_ERROR(microvm::AttachNetwork(plan, req, o, v));
  SAFEX_RETURN_IF_ERROR(microvm::PrepareOutputs(plan, v));
  SAFEX_RETURN_IF_ERROR(microvm::CreateVmmCgroup(plan, req, o, cgroups, vcpus, v));
  if (pooled) SAFEX_RETURN_IF_ERROR(v.cg->SetCpuPriority(/*low=*/true));
  return Status::Ok();
}

// 6b. The workload's own report before its exec, compared with the plan: kGo only if it holds.
std::function<bool(std::string_view)> GuestEvidenceCheck(const plan::Plan& plan,
                                                         const ReportExpectations& expect,
                                                         Enforcement& evidence,
                                                         const microvm::VmRun& v, Accel accel) {
  return [&plan, &expect, &evidence, &v, accel](std::string_view bytes) {
    Result<SandboxReport> report = ParseSandboxReport(bytes);
    if (!report.ok()) {
      evidence.Compare("guest.report", "a report", "", "guest: " + report.status().message());
      return false;
    }
    AddSandboxReportEvidence(plan, expect, *report, &evidence);
    evidence.Compare("accelerator", microvm::AccelName(accel), microvm::QemuAccel(*v.cg),
                     "host kernel: the command line of QEMU in the VMM's cgroup");
    return !evidence.Differs();
  };
}

// A refusal on the evidence: nothing of the program ran.
RunResult RefusedByEvidence(const std::string& mode, Enforcement evidence,
                            const Status& cg_teardown, microvm::VmRun& v) {
  RunResult r;
  r.backend_mode = mode;
  r.refused_by_enforcement = true;
  r.backend_error = "the host does not enforce the plan: " + evidence.Differences();
  r.enforcement = std::move(evidence);
  r.teardown_error = TearDown(cg_teardown, v, &r.denied_egress);
  return r;
}

// 8-10, once the session ended and QEMU is reaped (cold and pooled alike): the VMM's cgroup
// released, then nothing ran (a refusal or setup error with its reason) or what happened, the
// outputs to the collector, the teardown.
Result<RunResult> Conclude(const plan::Plan& plan, const RunRequest& req,
                           const Result<microvm::LaunchResult>& launched, microvm::VmRun& v,
                           Enforcement evidence, Accel accel, const std::string& mode,
                           const MicrovmOptions& o) {
  uint64_t vmm_oom = 0;
  if (Result<uint64_t> ooms = v.cg->OomKills(); ooms.ok()) vmm_oom = *ooms;
  const Status cg_teardown = v.cg->Destroy();
  if (!launched.ok()) return launched.status().With("microvm: starting QEMU");
  v.tap.Reset();
  if (launched->session.refused_by_evidence) {
    return RefusedByEvidence(mode, std::move(evidence), cg_teardown, v);
  }
  SAFEX_RETURN_IF_ERROR(microvm::NothingRan(*launched, vmm_oom, accel, o));
  RunResult r = microvm::ResultOf(plan, launched->session, v.guest_mib, vmm_oom, mode);
  if (launched->session.hello) {
    evidence.Observed("guest.kernel", launched->session.hello->kernel_release,
                      "guest agent's hello, before the program started");
  }
  r.enforcement = std::move(evidence);
  if (v.receiver && req.collect_output) {
    for (const microvm::OutputMountSpec& om : v.outputs) {
      int fd = v.receiver->RootFd(om.mount_index);
      if (fd >= 0) req.collect_output(plan.mounts[om.mount_index], fd);
    }
  }
  r.teardown_error = TearDown(cg_teardown, v, &r.denied_egress);
  return r;
}

}  // namespace

Result<Accel> MicrovmDriver::Admit(const plan::Plan& plan, const RunRequest& req,
                                   const Ready& ready) const {
  SAFEX_ASSIGN_OR_RETURN(Accel accel,
                         CheckRun(plan, req, options_, ready.kvm_usable, ready.kvm_detail));
  SAFEX_RETURN_IF_ERROR(TcgAdmits(plan, accel == Accel::kTcg, ready.kvm_detail));
  return accel;
}

// The script of one run: each step in the order it must happen (microvm/run_steps.h); VmRun's
// members go in reverse order on every way out, after QEMU (always reaped by LaunchAndRun).
Result<RunResult> MicrovmDriver::Run(const plan::Plan& plan, const RunRequest& req) {
  const auto t_entry = std::chrono::steady_clock::now();
  SAFEX_ASSIGN_OR_RETURN(std::shared_ptr<const Ready> ready, EnsureReady());
  const MicrovmOptions& o = options_;
  // 0. Refusals: nothing has been created yet.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  SAFEX_ASSIGN_OR_RETURN(Accel accel, Admit(plan, req, *ready));
  const uint32_t vcpus = std::clamp<uint32_t>(plan.microvm.vcpus, 1, 64);
  // 1-5, then the guest spec naming what they made.
  microvm::VmRun v;
  SAFEX_RETURN_IF_ERROR(
      MakeRunResources(plan, req, o, *ready->images, *ready->cgroups, vcpus, false, v));
  SAFEX_ASSIGN_OR_RETURN(microvm::GuestSpec spec, microvm::BuildGuestSpec(plan, req.argv, v.in));
  const std::string mode = BackendMode(accel, v);
  // 5b. The evidence, before QEMU exists: a host that does not enforce the plan refuses the run.
  Enforcement evidence;
  microvm::ReadBackEnforcement(plan, ready->qemu_version, ready->qemu_sha256, v, &evidence);
  if (evidence.Differs()) return RefusedByEvidence(mode, std::move(evidence), v.cg->Destroy(), v);
  if (req.cancel != nullptr && req.cancel->load(std::memory_order_relaxed) != 0) {
    // Stopped before QEMU: nothing ran; everything made so far goes with VmRun.
    RunResult r;
    r.backend_mode = mode;
    r.term_signal = SIGKILL;
    r.interrupted = true;
    r.backend_error = "cancelled before the VM was started";
    return r;
  }
  // 6-7. QEMU and the session with the guest agent, to the end of the output stream.
  const microvm::LaunchInputs li{accel, vcpus, ready->tsc_khz, ready->kvm_groups};
  const auto t_launch = std::chrono::steady_clock::now();
  microvm::SessionConfig sc = microvm::BuildSessionConfig(plan, req, o, v);
  sc.spec_payload = microvm::EncodeSpec(spec);
  const ReportExpectations expect = microvm::GuestReportExpectations(plan);
  sc.on_evidence = GuestEvidenceCheck(plan, expect, evidence, v, accel);
  Result<microvm::LaunchResult> launched =
      microvm::LaunchAndRun(microvm::BuildLaunchSpec(o, req, li, v), sc);
  const auto t_session_end = std::chrono::steady_clock::now();
  // 8-10.
  SAFEX_ASSIGN_OR_RETURN(RunResult r,
                         Conclude(plan, req, launched, v, std::move(evidence), accel, mode, o));
  if (o.timings_observer && launched.ok()) {
    o.timings_observer(Timings(launched->session, *launched, v, t_entry, t_launch, t_session_end));
  }
  return r;
}

// A pooled VM: a cold run's 0-5b for a request that has no program yet, QEMU started, and the
// session until the agent has set up the plan's part of the spec (kSetUp; it then waits for the
// request). What would refuse a cold run fails the boot: nothing of any request existed.
Result<std::unique_ptr<PreparedSandbox>> MicrovmDriver::Prepare(const plan::Plan& plan,
                                                                const PrepareRequest& preq) {
  // Taken before the boot: a change during it makes the VM stale at once, never current.
  const std::string generation = SandboxGeneration(plan);
  RunRequest req;
  req.run_id = preq.sandbox_id;
  req.cancel = preq.cancel;
  SAFEX_ASSIGN_OR_RETURN(std::shared_ptr<const Ready> ready, EnsureReady());
  const MicrovmOptions& o = options_;
  SAFEX_RETURN_IF_ERROR(
      CheckRunnable(plan, req, plan::Backend::kMicrovm, static_cast<bool>(o.network_provider)));
  SAFEX_ASSIGN_OR_RETURN(Accel accel, Admit(plan, req, *ready));
  const uint32_t vcpus = std::clamp<uint32_t>(plan.microvm.vcpus, 1, 64);
  microvm::VmRun v;
  SAFEX_RETURN_IF_ERROR(
      MakeRunResources(plan, req, o, *ready->images, *ready->cgroups, vcpus, true, v));
  Enforcement evidence;
  microvm::ReadBackEnforcement(plan, ready->qemu_version, ready->qemu_sha256, v, &evidence);
  if (evidence.Differs()) {
    return Status::Unavailable("microvm: a pooled VM could not be made: " + evidence.Differences());
  }
  // The plan's part of the spec (everything but argv and stdin): the agent sets it up before
  // any request exists (its root, network, cgroup, the workload's mounts, the seccomp program).
  SAFEX_ASSIGN_OR_RETURN(microvm::GuestSpec ahead, microvm::BuildGuestSpecAhead(plan, v.in));
  const microvm::LaunchInputs li{accel, vcpus, ready->tsc_khz, ready->kvm_groups};
  SAFEX_ASSIGN_OR_RETURN(microvm::LiveVm vm,
                         microvm::LaunchVm(microvm::BuildLaunchSpec(o, req, li, v)));
  microvm::SessionConfig boot;  // the session ends at the agent's kSetUp
  boot.spec_payload = microvm::EncodeSpec(ahead);
  boot.stop_when_set_up = true;
  boot.boot_timeout = o.boot_timeout;
  boot.cancel = preq.cancel;
  microvm::SessionResult booted =
      microvm::RunSession(vm.ctl.get(), vm.console.get(), vm.err.get(), vm.vmm.pidfd(), boot);
  if (!booted.hello || !booted.set_up || booted.phase != microvm::Phase::kDone ||
      booted.cancelled) {
    microvm::LaunchResult failed{booted, vm.vmm.KillAndWait(), vm.argv, vm.vmm_start};
    Status why = microvm::NothingRan(failed, 0, accel, o);
    if (why.ok()) why = Status::Unavailable("microvm: the pooled boot was cancelled");
    return why.With("microvm: a pooled VM could not be made");
  }
  const std::string mode = BackendMode(accel, v);
  return std::unique_ptr<PreparedSandbox>(std::make_unique<microvm::PooledVm>(
      preq.sandbox_id, PlanDigestOf(plan, preq.plan_digest), generation, RealtimeNs(), std::move(v),
      std::move(vm), *booted.hello, accel, mode, std::move(evidence)));
}

uint64_t MicrovmDriver::SandboxMemoryBytes(const plan::Plan& plan) const {
  return microvm::VmmMemoryBytes(plan, options_);
}

// The identity of QEMU, the guest kernel and initramfs, and of the plan's bind sources (whose
// image the VM has attached): a change to any retires the waiting VMs.
std::string MicrovmDriver::SandboxGeneration(const plan::Plan& plan) {
  std::string generation;
  for (const std::string& path :
       {options_.qemu_path, options_.kernel_path, options_.initramfs_path}) {
    generation += PathIdentity(path, true);
  }
  for (const plan::Mount& m : plan.mounts) {
    if (m.kind == plan::MountKind::kBind) generation += PathIdentity(m.source, false);
  }
  return generation;
}

// The hand-over: the request's argv (and stdin) go to the agent that set up the plan's part of
// the spec and waited since its kSetUp; from there on it is a cold run's session (the workload's
// evidence, the program, outputs) and its 8-10. The VM goes when this returns, whatever happened.
Result<RunResult> MicrovmDriver::RunPrepared(std::unique_ptr<PreparedSandbox> prepared,
                                             const plan::Plan& plan, const RunRequest& req) {
  auto* pooled = dynamic_cast<microvm::PooledVm*>(prepared.get());
  if (pooled == nullptr) return Status::InvalidArgument("microvm: not a pooled microVM");
  SAFEX_ASSIGN_OR_RETURN(std::shared_ptr<const Ready> ready, EnsureReady());
  const MicrovmOptions& o = options_;
  // 0. What a cold run refuses, and what only a pooled VM cannot take.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  SAFEX_RETURN_IF_ERROR(Admit(plan, req, *ready).status());
  if (PlanDigestOf(plan, req.plan_digest) != pooled->plan_digest()) {
    return Status::FailedPrecondition("microvm: pooled VM " + pooled->id() +
                                      " was made from another plan; not used");
  }
  if (!req.input_dir.empty()) {
    return Status::InvalidArgument(
        "microvm: a pooled VM cannot take an input directory (its input is a disk attached at "
        "boot)");
  }
  if (!pooled->Healthy()) {
    return Status::Unavailable("microvm: pooled VM " + pooled->id() + " stopped while it waited");
  }
  microvm::VmRun& v = pooled->run();
  v.in.has_stdin = req.stdin_data.has_value() && !req.stdin_data->empty();
  SAFEX_ASSIGN_OR_RETURN(microvm::GuestRequest request,
                         microvm::BuildGuestRequest(req.argv, v.in.has_stdin));
  SAFEX_RETURN_IF_ERROR(v.cg->SetCpuPriority(/*low=*/false));
  Enforcement evidence = pooled->enforcement();
  microvm::SessionConfig sc = microvm::BuildSessionConfig(plan, req, o, v);
  sc.request_payload = microvm::EncodeRequest(request);
  sc.resumed_hello = pooled->hello();
  const ReportExpectations expect = microvm::GuestReportExpectations(plan);
  sc.on_evidence = GuestEvidenceCheck(plan, expect, evidence, v, pooled->accel());
  Result<microvm::LaunchResult> launched = microvm::FinishVm(pooled->vm(), sc);
  return Conclude(plan, req, launched, v, std::move(evidence), pooled->accel(), pooled->mode(), o);
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
    note("staging directory", RemoveTree(images + "/stage." + suffix));
  }

  std::vector<std::string> runs = DirNames(o.state_root + "/runs");
  std::vector<std::string> ids;
  for (const std::string& n : runs) {
    if (IsValidRunId(n)) ids.push_back(n);  // anything else is not ours
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
  if (!IsValidRunId(run_id)) return Status::Ok();  // no run of this driver can have that name
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
