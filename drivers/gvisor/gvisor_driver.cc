#include "drivers/gvisor/gvisor_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "common/owner_lock.h"
#include "common/persistent_state.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "common/utf8.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/gvisor/rootfs.h"
#include "drivers/gvisor/run_dir.h"
#include "drivers/gvisor/runsc.h"
#include "drivers/gvisor/runsc_version_cache.h"
#include "drivers/gvisor/sandbox_log.h"
#include "drivers/gvisor/stdio_files.h"

namespace safex::drivers {
namespace {

using Clock = std::chrono::steady_clock;
using gvisor::PrivateDir;
using gvisor::RunTool;
using gvisor::SandboxLogScanner;
using gvisor::TmpfsMount;

// Child-side descriptor numbers of `runsc run`. 0 is /dev/null, 1 and 2 collect runsc's own
// diagnostics; the container's stdio arrives through --pass-fd so that runsc's messages never
// mix with the program's output.
constexpr int kRunscStdinFd = 3;
constexpr int kRunscStdoutFd = 4;
constexpr int kRunscStderrFd = 5;
constexpr int kRunscLogFd = 6;

bool ValidRunId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  if (!((id[0] >= 'a' && id[0] <= 'z') || (id[0] >= '0' && id[0] <= '9'))) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// SIGPIPE from writing the stdin pipe after the program closed it must not end the supervisor:
// block it in this thread for the run and swallow what was raised.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, &saved_);
  }
  ~SigpipeBlock() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    timespec zero{0, 0};
    while (sigtimedwait(&s, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t saved_;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Result<Pipe> MakePipe() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  return Pipe{UniqueFd(p[0]), UniqueFd(p[1])};
}

Status SetNonBlocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return Status::Errno("fcntl", errno);
  return Status::Ok();
}

Status WriteWholeFile(const std::string& path, const std::string& content) {
  UniqueFd fd(open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Status::Errno("open", path, errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("write", path, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The bundle's config.json. nlohmann::json throws on strings that are not UTF-8; CheckRequest
// refuses such argv and env up front, and anything else that slips through is an error here, never
// an exception across the driver boundary.
Result<std::string> SpecText(const nlohmann::json& spec) {
  try {
    return spec.dump(1);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("gvisor: the OCI spec cannot be written: ") +
                                   e.what());
  }
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0) return Status::Errno("mkdir", path, errno);
  return Status::Ok();
}

// Entries of a directory (without . and ..); empty if it does not exist.
std::vector<std::string> DirEntries(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      out.emplace_back(e->d_name);
    }
  }
  closedir(d);
  return out;
}

bool DirEmpty(const std::string& path) { return DirEntries(path).empty(); }

// Whether every entry of `dir` is one that Run() makes in a run's private directory.
bool LooksLikeRunDir(const std::string& dir) {
  static const std::set<std::string> kRunEntries = {"owner.lock", "bundle",      "state",
                                                    "out",        "input-empty", "stdio"};
  for (const std::string& n : DirEntries(dir)) {
    if (kRunEntries.count(n) == 0) return false;
  }
  return true;
}

// The last non-empty line of runsc's diagnostics (its error, if it failed).
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end - start + 1);
}

// Collects stdout and stderr under one shared cap (the plan's output limit).
class OutputCapture {
 public:
  OutputCapture(CapturedStream* out, CapturedStream* err, uint64_t cap)
      : streams_{out, err}, cap_(cap) {}

  void Add(int which, const char* data, size_t n) {
    if (stopped_) return;
    CapturedStream* s = streams_[which];
    size_t room = static_cast<size_t>(std::min<uint64_t>(cap_ - used_, n));
    s->data.append(data, room);
    used_ += room;
    s->total_bytes += room;
    if (room < n) {
      // More than the cap: capture stops here and the run is stopped for it.
      s->truncated = true;
      stopped_ = true;
    }
  }
  bool exceeded() const { return stopped_; }

 private:
  CapturedStream* streams_[2];
  uint64_t cap_;
  uint64_t used_ = 0;
  bool stopped_ = false;
};

// Everything one run holds, in teardown order (see Teardown()).
struct RunState {
  std::string runsc_path;
  std::string run_id;
  std::string state_dir;
  PrivateDir dir;
  UniqueFd owner_lock;                   // flock'ed for the whole run (see CleanupStale)
  gvisor::StdioFiles stdio;              // the program's stdout and stderr (stdio_files.h)
  std::vector<TmpfsMount> outputs;       // one per kOutput mount
  std::vector<size_t> output_mount_idx;  // plan mount index of each output
  cgroup::RunCgroup cg;
  std::unique_ptr<RunNetworkHandle> net;
  Subprocess runsc;
  bool sandbox_stopped = false;
  bool torn_down = false;
  std::string errors;

  void Note(const std::string& what, const Status& st) {
    if (st.ok()) return;
    if (!errors.empty()) errors += "; ";
    errors += what + ": " + st.ToString();
  }

  std::vector<std::string> Runsc(std::initializer_list<std::string> args) const {
    std::vector<std::string> v{runsc_path, "--root=" + state_dir};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }

  // Ends every process of the run and removes runsc's state. Safe to call more than once.
  void StopSandbox(std::chrono::milliseconds grace) {
    if (sandbox_stopped) return;
    sandbox_stopped = true;
    if (runsc.valid() && !runsc.reaped()) {
      // Ask runsc first: it ends the container cleanly and keeps its state consistent. The
      // cgroup kill is the fallback for a sandbox that does not go (wedged sentry, runsc stuck):
      // every process runsc started for this run (gofer, sandbox, stubs) is in the cgroup.
      auto k = RunTool(Runsc({"kill", "--all", run_id, "KILL"}), std::chrono::milliseconds(1000));
      (void)k;
      auto st = runsc.Wait(Clock::now() + grace);
      if (!st.ok() || !st->has_value()) {
        if (cg.valid()) cg.KillAll().ok();
        st = runsc.Wait(Clock::now() + std::chrono::milliseconds(500));
        if (!st.ok() || !st->has_value()) runsc.KillAndWait();
      }
    }
    if (cg.valid()) {
      // Wait (briefly) until the kernel has emptied the cgroup.
      auto until = Clock::now() + std::chrono::milliseconds(2000);
      for (;;) {
        auto procs = cg.Procs();
        if (procs.ok() && procs->empty()) break;
        if (Clock::now() > until) {
          Note("processes left in cgroup " + cg.oci_path(), Status::Internal("still busy"));
          break;
        }
        cg.KillAll().ok();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    // Killing `runsc run` from outside leaves the container recorded as stopped: delete it.
    if (!state_dir.empty() && !DirEmpty(state_dir)) {
      auto d = RunTool(Runsc({"delete", "--force", run_id}), std::chrono::milliseconds(5000));
      if (!d.ok()) Note("runsc delete", d.status());
      // A sandbox killed from outside cannot remove its control socket and lock file; they go
      // with the private directory. A container state file left behind is an error.
      std::vector<std::string> left;
      for (const std::string& n : DirEntries(state_dir)) {
        if (!n.ends_with(".sock") && !n.ends_with(".lock")) left.push_back(n);
      }
      if (!left.empty()) {
        std::string names;
        for (const std::string& n : left) names += (names.empty() ? "" : ", ") + n;
        Note("runsc state", Status::Internal("state left in " + state_dir + " (" + names + ")" +
                                             (d.ok() ? ": " + LastLine(d->output) : "")));
      }
    }
  }

  // Removes what is left, in reverse order of creation. Outputs must have been collected.
  void Teardown(std::chrono::milliseconds grace) {
    if (torn_down) return;
    torn_down = true;
    StopSandbox(grace);
    if (net) Note("network teardown", net->Teardown());
    net.reset();
    if (cg.valid()) Note("cgroup removal", cg.Destroy());
    Note("unmount stdio", stdio.Close());
    for (TmpfsMount& m : outputs) Note("unmount " + m.path(), m.Unmount());
    Note("removing " + dir.path(), dir.Remove());
  }

  ~RunState() { Teardown(std::chrono::milliseconds(2000)); }
};

}  // namespace

GvisorDriver::GvisorDriver(GvisorOptions options) : options_(std::move(options)) {}
GvisorDriver::~GvisorDriver() = default;

std::string GvisorDriver::runsc_version() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_ ? ready_->runsc_version : "";
}

std::optional<cgroup::Version> GvisorDriver::cgroup_version() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!ready_) return std::nullopt;
  return ready_->cgroups.version();
}

Status GvisorDriver::Probe() {
  {
    std::lock_guard<std::mutex> l(mu_);
    ready_.reset();  // probe again from scratch
  }
  return EnsureReady().status();
}

Result<GvisorDriver::Ready> GvisorDriver::EnsureReady() {
  std::lock_guard<std::mutex> l(mu_);
  if (ready_) return *ready_;

  const std::string& runsc = options_.runsc_path;
  struct stat st;
  if (runsc.empty() || runsc[0] != '/') {
    return Status::Unavailable("gvisor: runsc path must be absolute: '" + runsc + "'");
  }
  if (stat(runsc.c_str(), &st) != 0) {
    return Status::Unavailable("gvisor: runsc not found at " + runsc + " (" + strerror(errno) +
                               "); install it with scripts/install-deps.sh");
  }
  if (!S_ISREG(st.st_mode) || access(runsc.c_str(), X_OK) != 0) {
    return Status::Unavailable("gvisor: " + runsc + " is not an executable file");
  }
  // `runsc --version` is a Go process start per run; the answer is cached per binary identity.
  const std::string version_cache = options_.state_root + "/runsc-version";
  std::optional<std::string> version_output = gvisor::ReadRunscVersionCache(version_cache, st);
  const bool version_fresh = !version_output.has_value();
  if (version_fresh) {
    auto ver = RunTool({runsc, "--version"}, std::chrono::milliseconds(10000));
    if (!ver.ok()) {
      return Status::Unavailable("gvisor: cannot run " + runsc + ": " + ver.status().message());
    }
    if (ver->timed_out || !ver->status.exited || ver->status.code != 0) {
      return Status::Unavailable("gvisor: `" + runsc +
                                 " --version` failed: " + LastLine(ver->output));
    }
    version_output = ver->output;
  }
  std::string version = gvisor::RunscVersionString(*version_output);
  std::optional<int> date = gvisor::RunscReleaseDate(version);
  if (!date) {
    return Status::Unavailable("gvisor: cannot tell the version of " + runsc + " from '" +
                               LastLine(*version_output) + "'");
  }
  if (*date < options_.min_runsc_date) {
    return Status::Unavailable("gvisor: runsc " + version + " is too old (need a release " +
                               "from " + std::to_string(options_.min_runsc_date) +
                               " or later; older ones fail statx on this kernel)");
  }

  auto host = cgroup::CgroupHost::Detect(options_.cgroup_root);
  if (!host.ok()) return Status::Unavailable("gvisor: " + host.status().message());
  Status usable = host->CheckUsable(options_.cgroup_parent);
  if (!usable.ok()) return Status::Unavailable("gvisor: " + usable.message());
  Ready r{version, *date, *host};

  auto probe_dir = PrivateDir::Create(options_.state_root,
                                      "probe-" + std::to_string(getpid()) + "-" +
                                          std::to_string(Clock::now().time_since_epoch().count()));
  if (!probe_dir.ok()) {
    return Status::Unavailable("gvisor: state root " + options_.state_root +
                               " is not usable: " + probe_dir.status().message());
  }
  Status rm = probe_dir->Remove();
  if (!rm.ok()) return Status::Unavailable("gvisor: state root: " + rm.message());
  // Only a version that passed every check above is cached (the state root now exists).
  if (version_fresh) gvisor::WriteRunscVersionCache(version_cache, st, *version_output);

  ready_ = r;
  return r;
}

Status GvisorDriver::CheckRequest(const plan::Plan& plan, const RunRequest& req) const {
  SAFEX_RETURN_IF_ERROR(Driver::CheckRequest(plan, req));
  for (size_t i = 0; i < req.argv.size(); ++i) {
    if (!IsValidUtf8(req.argv[i])) {
      return Status::InvalidArgument(
          "argv[" + std::to_string(i) +
          "] is not valid UTF-8; the gvisor backend passes argv through runsc's JSON "
          "configuration, which cannot carry those bytes faithfully (the microvm backend can)");
    }
  }
  for (const auto& [name, value] : plan.env) {
    if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
      return Status::InvalidArgument("environment variable " + name +
                                     " is not valid UTF-8 (the gvisor backend cannot carry it)");
    }
  }
  return Status::Ok();
}

Result<RunResult> GvisorDriver::Run(const plan::Plan& plan, const RunRequest& req) {
  // ---- 0. Refuse what cannot be run faithfully, before anything exists.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  if (plan.backend != plan::Backend::kGvisor) {
    return Status::InvalidArgument("gvisor driver given a plan for backend " +
                                   std::string(plan::BackendName(plan.backend)));
  }
  if (!ValidRunId(req.run_id)) {
    return Status::InvalidArgument(
        "run id must be 1-64 of [a-z0-9-] starting with a letter or "
        "digit: '" +
        req.run_id + "'");
  }
  if (req.argv.empty() || req.argv[0].empty()) return Status::InvalidArgument("argv is empty");
  const plan::Limits& lim = plan.limits;
  if (lim.wall_time_ns == 0 || lim.cpu_time_ns == 0 || lim.memory_bytes == 0 || lim.pids == 0 ||
      lim.open_files == 0 || lim.output_bytes == 0 || lim.disk_bytes == 0 || lim.cpus == 0) {
    return Status::InvalidArgument("every limit must be set (is the plan verified?)");
  }
  const std::string& platform = plan.gvisor.platform;
  if (platform != "systrap" && platform != "ptrace") {
    return Status::InvalidArgument("gvisor platform must be systrap or ptrace, not '" + platform +
                                   "'");
  }
  bool wants_network = !plan.network.egress.empty();
  if (wants_network && !options_.network_provider) {
    return Status::Unavailable(
        "gvisor: the plan grants egress but no network provider is "
        "configured; refusing rather than running without the egress rules");
  }
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  gvisor::SeccompOptions seccomp_opts;  // errnoRet not honoured by runsc 20240729
  // Fail before creating anything if the seccomp rules cannot be expressed.
  SAFEX_RETURN_IF_ERROR(gvisor::BuildSeccomp(plan.seccomp, seccomp_opts).status());

  SigpipeBlock sigpipe_block;
  RunState s;
  s.runsc_path = options_.runsc_path;
  s.run_id = req.run_id;

  // ---- 1. The run's private directory, its fresh root and its output tmpfs mounts.
  SAFEX_ASSIGN_OR_RETURN(s.dir, PrivateDir::Create(options_.state_root, req.run_id));
  const std::string base = s.dir.path();
  // Locked from its first instant (common/owner_lock.h): CleanupStale of another process never
  // takes a live run's directory.
  SAFEX_ASSIGN_OR_RETURN(s.owner_lock, CreateOwnerLock(base));
  const std::string bundle = base + "/bundle";
  const std::string rootfs = bundle + "/rootfs";
  s.state_dir = base + "/state";
  SAFEX_RETURN_IF_ERROR(MakeDir(bundle, 0700));
  SAFEX_RETURN_IF_ERROR(MakeDir(rootfs, 0755));
  SAFEX_RETURN_IF_ERROR(MakeDir(s.state_dir, 0700));

  std::vector<std::string> sources(plan.mounts.size());
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    switch (m.kind) {
      case plan::MountKind::kBind:
        if (m.source.empty() || m.source[0] != '/') {
          return Status::InvalidArgument("bind mount source must be absolute: '" + m.source + "'");
        }
        sources[i] = m.source;
        break;
      case plan::MountKind::kTmpfs:
        break;  // made inside the sandbox (gVisor's tmpfs honours size=)
      case plan::MountKind::kInput:
        if (!req.input_dir.empty()) {
          struct stat st;
          if (req.input_dir[0] != '/' || stat(req.input_dir.c_str(), &st) != 0 ||
              !S_ISDIR(st.st_mode)) {
            return Status::InvalidArgument("input_dir must be an existing absolute directory: '" +
                                           req.input_dir + "'");
          }
          sources[i] = req.input_dir;
        } else {
          // No input given: the mount point shows an empty read-only directory.
          sources[i] = base + "/input-empty";
          if (access(sources[i].c_str(), F_OK) != 0)
            SAFEX_RETURN_IF_ERROR(MakeDir(sources[i], 0755));
        }
        break;
      case plan::MountKind::kOutput: {
        if (m.size_bytes == 0)
          return Status::InvalidArgument("output mount without a size: " + m.target);
        if (s.outputs.empty()) SAFEX_RETURN_IF_ERROR(MakeDir(base + "/out", 0700));
        std::string dir = base + "/out/" + std::to_string(s.outputs.size());
        SAFEX_RETURN_IF_ERROR(MakeDir(dir, 0700));
        TmpfsMount::Options o;
        o.size_bytes = m.size_bytes;
        o.uid = plan.process.uid;  // the sandbox user owns the root of its output mount
        o.gid = plan.process.gid;
        o.mode = 0700;
        o.nosuid = true;
        o.nodev = true;
        o.noexec = true;
        SAFEX_ASSIGN_OR_RETURN(TmpfsMount tm, TmpfsMount::Mount(dir, o));
        s.outputs.push_back(std::move(tm));
        s.output_mount_idx.push_back(i);
        sources[i] = dir;
        break;
      }
    }
  }

  // ---- 2. The run's cgroup, pre-created with the limits: runsc joins it and owns nothing.
  cgroup::Limits cl;
  cl.memory_bytes = lim.memory_bytes;
  cl.pids_max = options_.pids_backstop_base + options_.pids_backstop_per_pid * lim.pids;
  cl.cpus = lim.cpus;
  SAFEX_ASSIGN_OR_RETURN(s.cg, ready.cgroups.CreateRun(options_.cgroup_parent, req.run_id, cl));

  // ---- 3. Network: none, or the run's own namespace from the provider.
  std::string hosts;
  if (wants_network) {
    SAFEX_ASSIGN_OR_RETURN(s.net, options_.network_provider(plan, req.run_id));
    if (!s.net || s.net->netns_fd() < 0) {
      return Status::Internal("network provider returned no network namespace");
    }
    hosts = s.net->hosts_file();
  }

  // ---- 4. Bundle: rootfs and config.json.
  SAFEX_RETURN_IF_ERROR(gvisor::PrepareRootfs(rootfs, plan, sources, hosts));
  gvisor::OciLayout layout;
  layout.rootfs = "rootfs";
  layout.cgroups_path = s.cg.oci_path();
  layout.mount_sources = sources;
  layout.pids_backstop = cl.pids_max;
  layout.network_none = !wants_network;
  SAFEX_ASSIGN_OR_RETURN(nlohmann::json spec,
                         gvisor::BuildOciSpec(plan, req.argv, layout, seccomp_opts));
  SAFEX_ASSIGN_OR_RETURN(std::string spec_text, SpecText(spec));
  SAFEX_RETURN_IF_ERROR(WriteWholeFile(bundle + "/config.json", spec_text));

  // ---- 5. Pipes and `runsc run`.
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);
  std::optional<Pipe> in_pipe;
  if (req.stdin_data) {
    SAFEX_ASSIGN_OR_RETURN(Pipe p, MakePipe());
    in_pipe = std::move(p);
    SAFEX_RETURN_IF_ERROR(SetNonBlocking(in_pipe->write.get()));
  }
  // The program's stdout and stderr are files on a capped tmpfs, not pipes: a write to a host
  // pipe inside gVisor can come back short and lose the rest (stdio_files.h).
  SAFEX_RETURN_IF_ERROR(MakeDir(base + "/stdio", 0700));
  SAFEX_ASSIGN_OR_RETURN(s.stdio, gvisor::StdioFiles::Create(base + "/stdio", lim.output_bytes));
  SAFEX_ASSIGN_OR_RETURN(Pipe log_pipe, MakePipe());
  SAFEX_ASSIGN_OR_RETURN(Pipe diag_pipe, MakePipe());
  for (int fd : {log_pipe.read.get(), diag_pipe.read.get()}) {
    SAFEX_RETURN_IF_ERROR(SetNonBlocking(fd));
  }

  gvisor::LoggedSyscalls logged = gvisor::SyscallsToLog(plan.seccomp);
  std::string strace_list = "clone,clone3,fork,vfork";
  for (const std::string& n : logged.names) strace_list += "," + n;
  std::vector<std::string> argv = {
      options_.runsc_path,
      "--root=" + s.state_dir,
      wants_network ? "--network=host" : "--network=none",
      "--oci-seccomp",
      "--platform=" + platform,
      "--overlay2=none",  // the root is read-only and fresh; writable space is explicit mounts only
      "--debug-log=/proc/self/fd/" + std::to_string(kRunscLogFd),
      "--strace",
      "--strace-log-size=64",
  };
  // Tracing fork-like calls is how a failure at the process limit is observed (see notes).
  if (!logged.all) argv.push_back("--strace-syscalls=" + strace_list);
  for (const char* a : {"run", "--bundle"}) argv.emplace_back(a);
  argv.push_back(bundle);
  for (int fd : {kRunscStdinFd, kRunscStdoutFd, kRunscStderrFd}) {
    argv.emplace_back("--pass-fd");
    argv.push_back(std::to_string(fd) + ":" + std::to_string(fd - kRunscStdinFd));
  }
  argv.push_back(req.run_id);

  SpawnOptions so;
  so.argv = argv;
  so.env = {};  // runsc needs no environment; nothing of the supervisor's is passed on
  so.fds = {{0, devnull.get()},
            {1, diag_pipe.write.get()},
            {2, diag_pipe.write.get()},
            {kRunscStdinFd, in_pipe ? in_pipe->read.get() : devnull.get()},
            {kRunscStdoutFd, s.stdio.child_stdout()},
            {kRunscStderrFd, s.stdio.child_stderr()},
            {kRunscLogFd, log_pipe.write.get()}};
  so.new_session = true;  // no controlling terminal for runsc or anything it starts
  so.netns_fd = s.net ? s.net->netns_fd() : -1;

  RunResult result;
  result.backend_mode = "gvisor/" + platform + (wants_network ? "/network=netns" : "/network=none");
  OutputCapture capture(&result.stdout_stream, &result.stderr_stream, lim.output_bytes);
  SandboxLogScanner scanner;
  scanner.SetLogged(std::set<std::string>(logged.names.begin(), logged.names.end()), logged.all);
  std::string diag;

  const auto start = Clock::now();
  const auto deadline = start + std::chrono::nanoseconds(lim.wall_time_ns);
  SAFEX_ASSIGN_OR_RETURN(s.runsc, Subprocess::Spawn(so));
  // Only the child holds the write ends now: EOF arrives once every process of the run is gone.
  if (in_pipe) in_pipe->read.Reset();
  s.stdio.CloseChildEnds();
  log_pipe.write.Reset();
  diag_pipe.write.Reset();
  devnull.Reset();

  // ---- 6. Supervise: pipes, deadline, CPU and memory accounting.
  std::optional<LimitHit> reason;
  std::string detail;
  bool cancelled = false;  // stopped through req.cancel (reason is then kNone)
  static const std::string kNoStdin;
  const std::string& stdin_data = req.stdin_data ? *req.stdin_data : kNoStdin;  // not copied
  size_t stdin_off = 0;
  if (in_pipe && stdin_data.empty()) in_pipe->write.Reset();
  UniqueFd no_fd;  // stdout and stderr are read from s.stdio, not through readers[0..1]
  UniqueFd* readers[4] = {&no_fd, &no_fd, &log_pipe.read, &diag_pipe.read};
  std::vector<char> buf(64 * 1024);
  auto read_stdio = [&]() {
    return s.stdio.Read(
        [&](int which, std::string_view bytes) { capture.Add(which, bytes.data(), bytes.size()); });
  };

  auto drain = [&](int which) {
    // Reads what is available now (bounded per call, so one stream cannot starve the others).
    UniqueFd& fd = *readers[which];
    for (int rounds = 0; fd.valid() && rounds < 16; ++rounds) {
      ssize_t n = read(fd.get(), buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) fd.Reset();
        return;
      }
      if (n == 0) {
        fd.Reset();
        return;
      }
      if (which < 2) {
        capture.Add(which, buf.data(), static_cast<size_t>(n));
      } else if (which == 2) {
        scanner.Feed(std::string_view(buf.data(), static_cast<size_t>(n)));
      } else if (diag.size() < options_.diagnostics_cap) {
        diag.append(buf.data(),
                    std::min(static_cast<size_t>(n), options_.diagnostics_cap - diag.size()));
      }
    }
  };
  auto stop = [&](LimitHit why, std::string what) {
    if (reason) return;
    reason = why;
    detail = std::move(what);
    s.StopSandbox(options_.kill_grace);
  };
  auto check_accounting = [&]() {
    auto cpu = s.cg.CpuUsageNs();
    if (cpu.ok() && *cpu >= lim.cpu_time_ns) {
      stop(LimitHit::kCpuTime, "CPU time " + std::to_string(*cpu / 1000000) +
                                   " ms reached the limit of " +
                                   std::to_string(lim.cpu_time_ns / 1000000) + " ms");
      return;
    }
    auto oom = s.cg.OomKills();
    if (oom.ok() && *oom > 0) {
      stop(LimitHit::kMemory, "OOM-killed at the memory limit of " +
                                  std::to_string(lim.memory_bytes) +
                                  " bytes (cgroup oom_kill = " + std::to_string(*oom) + ")");
    }
  };

  auto next_poll = start + options_.poll_interval;
  while (!s.runsc.reaped()) {
    std::vector<pollfd> pfds;
    std::vector<int> kinds;  // 0..3 readers, 4 stdin, 5 pidfd, 6 stdout/stderr written
    for (int i = 0; i < 4; ++i) {
      if (readers[i]->valid()) {
        pfds.push_back({readers[i]->get(), POLLIN, 0});
        kinds.push_back(i);
      }
    }
    pfds.push_back({s.stdio.notify_fd(), POLLIN, 0});
    kinds.push_back(6);
    if (in_pipe && in_pipe->write.valid()) {
      pfds.push_back({in_pipe->write.get(), POLLOUT, 0});
      kinds.push_back(4);
    }
    pfds.push_back({s.runsc.pidfd(), POLLIN, 0});
    kinds.push_back(5);
    auto now = Clock::now();
    auto wake = reason ? now + std::chrono::milliseconds(50) : std::min(deadline, next_poll);
    int timeout = static_cast<int>(std::clamp<int64_t>(
        std::chrono::ceil<std::chrono::milliseconds>(wake - now).count(), 0, INT_MAX));
    int n = poll(pfds.data(), pfds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      stop(LimitHit::kNone, "");
      s.Note("poll", Status::Errno("poll", errno));
      break;
    }
    for (size_t i = 0; n > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      int k = kinds[i];
      if (k < 4) {
        drain(k);
      } else if (k == 4) {
        ssize_t w = write(in_pipe->write.get(), stdin_data.data() + stdin_off,
                          std::min<size_t>(stdin_data.size() - stdin_off, 65536));
        if (w > 0) stdin_off += static_cast<size_t>(w);
        // Done, or the program closed its stdin (EPIPE): either way no more input.
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdin_off >= stdin_data.size()) {
          in_pipe->write.Reset();
        }
      } else if (k == 6) {
        read_stdio();
      } else {
        s.runsc.TryWait().ok();
      }
    }
    if (capture.exceeded()) {
      stop(LimitHit::kOutput, "stdout + stderr exceeded the output limit of " +
                                  std::to_string(lim.output_bytes) + " bytes");
    }
    now = Clock::now();
    if (!reason && now >= deadline) {
      stop(LimitHit::kWallTime,
           "wall time limit of " + std::to_string(lim.wall_time_ns / 1000000) + " ms reached");
    }
    if (!reason && now >= next_poll) {
      check_accounting();
      next_poll = now + options_.poll_interval;
    }
    if (!reason && req.cancel != nullptr && req.cancel->load(std::memory_order_relaxed) != 0) {
      cancelled = true;
      stop(LimitHit::kNone, "");
    }
  }
  const auto end = Clock::now();
  if (in_pipe) in_pipe->write.Reset();

  // ---- 7. Every process of the run is gone (or is made so now); drain what they wrote.
  s.StopSandbox(options_.kill_grace);
  while (!capture.exceeded() && read_stdio()) {
  }
  auto drain_until = Clock::now() + std::chrono::milliseconds(2000);
  while (Clock::now() < drain_until) {
    std::vector<pollfd> pfds;
    std::vector<int> kinds;
    for (int i = 0; i < 4; ++i) {
      if (readers[i]->valid()) {
        pfds.push_back({readers[i]->get(), POLLIN, 0});
        kinds.push_back(i);
      }
    }
    if (pfds.empty()) break;
    if (poll(pfds.data(), pfds.size(), 100) < 0 && errno != EINTR) break;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) drain(kinds[i]);
    }
  }
  scanner.Finish();
  if (!reason && capture.exceeded()) {
    reason = LimitHit::kOutput;
    detail = "stdout + stderr exceeded the output limit of " + std::to_string(lim.output_bytes) +
             " bytes";
  }

  // ---- 8. What happened.
  result.wall_ns = static_cast<uint64_t>(std::chrono::nanoseconds(end - start).count());
  if (auto cpu = s.cg.CpuUsageNs(); cpu.ok()) result.cpu_ns = *cpu;
  if (auto peak = s.cg.PeakMemoryBytes(); peak.ok()) result.peak_memory_bytes = *peak;
  auto oom_read = s.cg.OomKills();
  auto pids_read = s.cg.PidsLimitHits();
  uint64_t oom_kills = oom_read.ok() ? *oom_read : 0;
  uint64_t pids_hits = pids_read.ok() ? *pids_read : 0;
  result.fork_failures = scanner.fork_eagain();
  result.logged_syscalls = scanner.logged();
  if (s.net) result.denied_egress = s.net->DeniedEgress();

  ExitStatus rs = s.runsc.reaped() ? s.runsc.KillAndWait() : ExitStatus{};
  if (cancelled) {
    // The caller stopped it: whatever the program did so far is reported, nothing more is judged.
    result.interrupted = true;
    result.term_signal = SIGKILL;
  } else if (reason && *reason != LimitHit::kNone) {
    result.limit = *reason;
    result.limit_detail = detail;
    result.term_signal = SIGKILL;
  } else {
    auto app = scanner.app_exit();
    bool agrees = app && rs.exited &&
                  ((app->signaled && rs.code == 128 + app->value) ||
                   (!app->signaled && rs.code == (app->value & 0xff)));
    if (agrees) {
      if (app->signaled) {
        result.term_signal = app->value;
      } else {
        result.exit_code = app->value & 0xff;
      }
    } else {
      std::string err = LastLine(diag);
      bool load_failed =
          rs.exited && rs.code == 128 && err.find("failed to load") != std::string::npos;
      if (load_failed && err.find("no such file or directory") != std::string::npos) {
        result.exit_code = 127;  // the program was not found inside the sandbox
        result.backend_error = err;
      } else if (load_failed && (err.find("permission denied") != std::string::npos ||
                                 err.find("exec format error") != std::string::npos ||
                                 err.find("is a directory") != std::string::npos)) {
        result.exit_code = 126;  // found but not executable
        result.backend_error = err;
      } else if (!scanner.app_started()) {
        s.Teardown(options_.kill_grace);
        std::string msg = "gvisor: runsc could not start the sandbox (runsc exit " +
                          std::to_string(rs.ShellCode()) + ")" + (err.empty() ? "" : ": " + err);
        if (!s.errors.empty()) msg += " [teardown: " + s.errors + "]";
        return Status::Internal(msg);
      } else {
        result.backend_error = "sandbox ended abnormally (runsc exit " +
                               std::to_string(rs.ShellCode()) + ")" +
                               (err.empty() ? "" : ": " + err);
        if (!rs.exited) result.term_signal = rs.signal;
      }
    }
    if (oom_kills > 0) {
      result.limit = LimitHit::kMemory;
      result.limit_detail = "OOM-killed at the memory limit of " +
                            std::to_string(lim.memory_bytes) +
                            " bytes (cgroup oom_kill = " + std::to_string(oom_kills) + ")";
      result.exit_code = -1;
      result.term_signal = SIGKILL;
    } else if (pids_hits > 0) {
      result.limit = LimitHit::kPids;
      result.limit_detail = "the host pids backstop (" + std::to_string(cl.pids_max) +
                            ") was reached " + std::to_string(pids_hits) + " times";
    } else if (result.fork_failures > 0) {
      // The process limit refused at least one fork: it constrained the run, whether or not the
      // program coped (EAGAIN from fork inside gVisor means RLIMIT_NPROC; see notes).
      result.limit = LimitHit::kPids;
      bool failed = result.exit_code != 0 || result.term_signal != 0;
      result.limit_detail = "fork/clone failed with EAGAIN " +
                            std::to_string(result.fork_failures) +
                            " times at pids = " + std::to_string(lim.pids) +
                            (failed ? "" : " (the program then exited normally)");
    } else if (result.term_signal == SIGXFSZ) {
      result.limit = LimitHit::kDisk;
      result.limit_detail =
          "file size limit (RLIMIT_FSIZE = " + std::to_string(lim.disk_bytes) + " bytes) exceeded";
    } else if (result.exit_code != 0 || result.term_signal != 0) {
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        if (s.outputs[i].Full()) {
          result.limit = LimitHit::kDisk;
          result.limit_detail =
              "output mount " + plan.mounts[s.output_mount_idx[i]].target + " is full (" +
              std::to_string(plan.mounts[s.output_mount_idx[i]].size_bytes) + " bytes)";
          break;
        }
      }
    }
  }

  // ---- 9. Outputs: collected after every process is gone, before the storage goes away.
  if (req.collect_output) {
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      auto fd = s.outputs[i].OpenRoot();
      if (!fd.ok()) {
        s.Note("output " + s.outputs[i].path(), fd.status());
        continue;
      }
      UniqueFd owned(*fd);
      req.collect_output(plan.mounts[s.output_mount_idx[i]], owned.get());
    }
  }

  // ---- 10. Teardown.
  s.Teardown(options_.kill_grace);
  result.teardown_error = s.errors;
  return result;
}

// Removes one stale run directory's contents: the runsc container, the run's cgroup (and any
// process still in it), the tmpfs mounts the driver made below it, then the directory.
// REQUIRES: the run's owner is dead (its lock taken by the caller, or known from a run record).
Status GvisorDriver::CleanRunDir(const Ready& ready, const std::string& name,
                                 const std::string& dir) {
  std::string errors;
  auto note = [&](const std::string& what, const Status& st) {
    if (st.ok()) return;
    errors += (errors.empty() ? "" : "; ") + what + ": " + st.ToString();
  };
  if (!name.starts_with("probe-")) {
    const std::string state = dir + "/state";
    bool has_state = false;
    for (const std::string& n : DirEntries(state)) has_state = has_state || n.ends_with(".state");
    if (has_state) {
      auto d = RunTool({options_.runsc_path, "--root=" + state, "delete", "--force", name},
                       std::chrono::milliseconds(10000));
      if (!d.ok()) note("runsc delete " + name, d.status());
    }
    auto cg = ready.cgroups.Adopt(options_.cgroup_parent, name);
    if (cg.ok()) {
      note("cgroup " + name, cg->Destroy());
    } else if (cg.status().code() != Status::Code::kNotFound) {
      note("cgroup " + name, cg.status());
    }
    std::vector<std::string> mounts;
    for (const std::string& n : DirEntries(dir + "/out")) mounts.push_back(dir + "/out/" + n);
    mounts.push_back(dir + "/stdio");
    for (const std::string& m : mounts) {
      // Security: only mounts the driver made below its own state root are unmounted here.
      if (umount2(m.c_str(), UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
        if (umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL) {
          note("umount " + m, Status::Errno("umount2", m, errno));
        }
      }
    }
  }
  note("remove " + dir, gvisor::RemoveTree(dir));
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

Status GvisorDriver::CleanupStale(int* cleaned) {
  if (cleaned != nullptr) *cleaned = 0;
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  std::string errors;
  for (const std::string& name : DirEntries(options_.state_root)) {
    const std::string dir = options_.state_root + "/" + name;
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool probe = name.starts_with("probe-");
    if (!probe && !ValidRunId(name)) continue;  // not ours
    if (IsPersistentEntry(name)) continue;      // kept on purpose (common/persistent_state.h)
    // Other components keep their own directories under the same root (e.g. drivers/net's
    // "net", whose slot records must outlive this cleanup): only a directory holding nothing but
    // what Run() creates there is a run directory.
    if (!probe && !LooksLikeRunDir(dir)) continue;
    UniqueFd lock;
    OwnerState owner = ProbeOwner(dir, &lock);
    if (owner == OwnerState::kAlive) continue;  // a live run owns it
    if (owner == OwnerState::kNoLock) {
      // No lock file: a crash between mkdir and creating the (already locked) lock file. Only
      // old directories are taken for stale.
      if (time(nullptr) - st.st_mtime < 60) continue;
    }
    Status st_clean = CleanRunDir(ready, name, dir);
    if (!st_clean.ok()) {
      errors += (errors.empty() ? "" : "; ") + name + ": " + st_clean.message();
    } else if (cleaned != nullptr) {
      ++*cleaned;
    }
  }
  if (!errors.empty()) return Status::Internal("gvisor cleanup: " + errors);
  return Status::Ok();
}

Status GvisorDriver::CleanupStaleRun(const std::string& run_id, bool* cleaned) {
  if (cleaned != nullptr) *cleaned = false;
  if (!ValidRunId(run_id)) return Status::Ok();  // no run can have that id: nothing of ours
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  const std::string dir = options_.state_root + "/" + run_id;
  struct stat st;
  if (lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    UniqueFd lock;
    if (ProbeOwner(dir, &lock) == OwnerState::kAlive) return Status::Ok();
    SAFEX_RETURN_IF_ERROR(CleanRunDir(ready, run_id, dir).With("gvisor cleanup of " + run_id));
    if (cleaned != nullptr) *cleaned = true;
    return Status::Ok();
  }
  // No directory: a cgroup can still be left when a removal stopped half-way.
  auto cg = ready.cgroups.Adopt(options_.cgroup_parent, run_id);
  if (cg.ok()) {
    SAFEX_RETURN_IF_ERROR(cg->Destroy().With("gvisor cleanup of cgroup " + run_id));
    if (cleaned != nullptr) *cleaned = true;
  } else if (cg.status().code() != Status::Code::kNotFound) {
    return cg.status().With("gvisor cleanup of cgroup " + run_id);
  }
  return Status::Ok();
}

}  // namespace safex::drivers
