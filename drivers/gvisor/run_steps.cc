#include "drivers/gvisor/run_steps.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/owner_lock.h"
#include "drivers/gvisor/launch_report.h"
#include "drivers/gvisor/runsc_command.h"
#include "drivers/gvisor/visible_cpus.h"
#include "drivers/net/network_evidence.h"
#include "drivers/rootfs.h"

namespace safex::drivers::gvisor {
namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0) return Status::Errno("mkdir", path, errno);
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
// refuses such argv and env up front, and anything else that slips through is an error here,
// never an exception across the driver boundary.
Result<std::string> SpecText(const nlohmann::json& spec) {
  try {
    return spec.dump(1);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("gvisor: the OCI spec cannot be written: ") +
                                   e.what());
  }
}

// The bundle (config.json and the fresh root's skeleton: a mount point per mount, a minimal
// /etc) lives on a tmpfs of its own, not on the state root's disk. Creating and removing some 20
// directories and files per sandbox on ext4 was the largest part of the service's own CPU per
// sandbox (ext4's inode allocation under this churn), and a slow disk put it on the cold path;
// on a tmpfs it is a mount, a few microseconds each, and one unmount. Security: the tmpfs is on
// the run's private 0700 directory, root's, 0700, size- and inode-capped; the sandbox sees the
// root read-only. Mounted with the flags the state root's disk had for it (not noexec), so what
// runsc serves from the root behaves as before.
TmpfsMount::Options BundleTmpfs() {
  TmpfsMount::Options o;
  o.size_bytes = 16 << 20;
  o.max_inodes = 4096;
  o.mode = 0700;
  o.noexec = false;
  return o;
}

}  // namespace

Status CreateRunDirectory(const RunContext& c, RunState& s) {
  s.runsc_path = c.options.runsc_path;
  s.run_id = c.req.run_id;
  SAFEX_ASSIGN_OR_RETURN(s.dir, PrivateDir::Create(c.options.state_root, c.req.run_id));
  // Locked from its first instant (common/owner_lock.h): CleanupStale of another process never
  // takes a live run's directory.
  SAFEX_ASSIGN_OR_RETURN(s.owner_lock, CreateOwnerLock(s.dir.path()));
  s.bundle = s.dir.path() + "/bundle";
  s.state_dir = s.dir.path() + "/state";
  SAFEX_RETURN_IF_ERROR(MakeDir(s.bundle, 0700));
  SAFEX_ASSIGN_OR_RETURN(s.bundle_fs, TmpfsMount::Mount(s.bundle, BundleTmpfs()));
  SAFEX_RETURN_IF_ERROR(MakeDir(s.bundle + "/rootfs", 0755));
  return MakeDir(s.state_dir, 0700);
}

Status PrepareMountSources(const RunContext& c, RunState& s) {
  s.mount_sources.assign(c.plan.mounts.size(), "");
  for (size_t i = 0; i < c.plan.mounts.size(); ++i) {
    const plan::Mount& m = c.plan.mounts[i];
    switch (m.kind) {
      case plan::MountKind::kBind:
        if (m.source.empty() || m.source[0] != '/') {
          return Status::InvalidArgument("bind mount source must be absolute: '" + m.source + "'");
        }
        s.mount_sources[i] = m.source;
        break;
      case plan::MountKind::kTmpfs:
        break;  // made inside the sandbox (gVisor's tmpfs honours size=)
      case plan::MountKind::kInput: {
        SAFEX_ASSIGN_OR_RETURN(s.mount_sources[i], InputSource(c.req.input_dir, s.dir.path()));
        break;
      }
      case plan::MountKind::kOutput: {
        SAFEX_ASSIGN_OR_RETURN(
            s.mount_sources[i],
            s.outputs.Add(s.dir.path(), m, i, c.plan.process.uid, c.plan.process.gid));
        break;
      }
    }
  }
  return Status::Ok();
}

Status CreateCgroup(const RunContext& c, const cgroup::CgroupHost& cgroups, RunState& s) {
  const plan::Limits& lim = c.plan.limits;
  cgroup::Limits cl;
  cl.memory_bytes = lim.memory_bytes;
  // The host pids cgroup is only a backstop: gVisor's own threads and stubs count against it;
  // the plan's process limit is RLIMIT_NPROC inside.
  cl.pids_max = c.options.pids_backstop_base + c.options.pids_backstop_per_pid * lim.pids;
  cl.cpus = lim.cpus;
  s.pids_backstop = cl.pids_max;
  s.cg_limits = cl;
  SAFEX_ASSIGN_OR_RETURN(s.cg, cgroups.CreateRun(c.options.cgroup_parent, c.req.run_id, cl));
  // A pooled sandbox boots and waits behind running sandboxes (HandOver restores its share).
  if (c.pooled) SAFEX_RETURN_IF_ERROR(s.cg.SetCpuPriority(/*low=*/true));
  // runsc shows the sandbox as many CPUs as the cpuset holds when it starts (visible_cpus.h).
  return cgroup::NarrowCpuset(s.cg, SentryCpuCount(lim.cpus), &s.cpuset_restore);
}

void ReadBackEnforcement(const std::string& runsc_version, const std::string& runsc_sha256,
                         RunState& s, Enforcement* e) {
  e->Observed("runtime", "runsc " + runsc_version, "runtime: runsc --version");
  e->Observed("runtime.sha256", runsc_sha256, "SHA-256 of the runsc binary the run started");
  cgroup::CompareLimits(s.cg_limits, s.cg, e);
  if (s.net) {
    net::AddNetworkEvidence(s.net.get(), net::SandboxAddress::kInNamespace, e);
  } else {
    e->NotObserved("network", "no network namespace: runsc --network=none gives the sandbox none",
                   "metadata address, egress outside the granted set");
  }

  // The platform, and the process's identity, capabilities, seccomp mode, rlimits and mount table,
  // come once runsc has started the sandbox (AwaitLauncher).
}

namespace {

// The --platform the Sentry runs with, from the host kernel: runsc re-executes itself as the
// sandbox ("runsc-sandbox ... --platform=P ... boot ..."), which is in the run's cgroup. Read
// while the launcher waits: no code of the request has run, and it could not reach the Sentry's
// memory anyway. "" when no sandbox process shows one.
std::string SentryPlatform(const cgroup::RunCgroup& cg) {
  for (const std::vector<std::string>& args : cg.MemberCommandLines()) {
    if (std::find(args.begin(), args.end(), "boot") == args.end()) continue;
    for (const std::string& a : args) {
      if (a.starts_with("--platform=")) return a.substr(11);
    }
  }
  return "";
}

}  // namespace

LaunchOutcome AwaitLauncher(const RunContext& c, bool filtered, RunIo& io, RunState& s,
                            Enforcement* e) {
  // Everything arrives within the sandbox's start; the bound is for a launcher that never
  // reports (then nothing of the program ever ran).
  const auto deadline = std::chrono::steady_clock::now() + c.options.launch_timeout;
  std::string bytes;
  Result<SandboxReport> report = Status::Unavailable("launcher report: nothing yet");
  Status widened = Status::Ok();
  const std::string narrowed = s.cpuset_restore;
  while (report.status().code() == Status::Code::kUnavailable &&
         std::chrono::steady_clock::now() < deadline &&
         (c.req.cancel == nullptr || c.req.cancel->load(std::memory_order_relaxed) == 0)) {
    // The Sentry has counted its CPUs: the rest of the boot may use all of them again.
    if (!s.cpuset_restore.empty() && SentryCountedCpus(s.cg)) {
      widened = cgroup::WidenCpuset(s.cg, &s.cpuset_restore);
    }
    pollfd p{io.report.read.get(), POLLIN, 0};
    if (poll(&p, 1, s.cpuset_restore.empty() ? 50 : 2) <= 0) continue;
    char buf[16384];
    const ssize_t n = read(io.report.read.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: runsc (or the launcher) is gone
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > 256 * 1024) break;  // no report is this large
    report = ParseSandboxReport(bytes);
  }
  // A session's launcher answers its commands on the same pipe, and a pooled sandbox may become
  // a session's: kept open only for that.
  if (!(c.session || c.pooled) || !report.ok()) io.report.read.Reset();
  if (!report.ok()) {
    io.go.write.Reset();  // EOF to the launcher: it exits without running anything
    e->Compare("launcher", "a report", "",
               "launcher inside the sandbox: " + report.status().message());
    return LaunchOutcome::kNoReport;
  }
  AddLaunchEvidence(c.plan, filtered, *report, e);
  const std::string platform = SentryPlatform(s.cg);
  e->Compare("platform", c.plan.gvisor.platform, platform.empty() ? "not shown" : platform,
             "host kernel: the command line of the sandbox process (runsc boot) in the run's "
             "cgroup");
  if (e->Differs()) {
    io.go.write.Reset();
    io.report.read.Reset();
    return LaunchOutcome::kRefused;
  }
  // At the latest now: the run may use all CPUs again, within its quota (visible_cpus.h).
  if (widened.ok()) widened = cgroup::WidenCpuset(s.cg, &s.cpuset_restore);
  if (!widened.ok()) {
    e->Compare("cpuset", narrowed, "not restored: " + widened.message(),
               "host kernel: cpuset.cpus");
    io.go.write.Reset();
    return LaunchOutcome::kRefused;
  }
  // The go-ahead is the hand-over (HandOver), or a session's first command.
  if (c.pooled || c.session) return LaunchOutcome::kReady;
  const char go = 'g';
  const bool sent = write(io.go.write.get(), &go, 1) == 1;
  io.go.write.Reset();
  return sent ? LaunchOutcome::kStarted : LaunchOutcome::kNoReport;
}

Result<std::string> CreateNetwork(const RunContext& c, RunState& s) {
  if (c.plan.network.egress.empty()) return std::string();
  SAFEX_ASSIGN_OR_RETURN(s.net, c.options.network_provider(c.plan, c.req.run_id));
  if (!s.net || s.net->netns_fd() < 0) {
    return Status::Internal("network provider returned no network namespace");
  }
  return s.net->hosts_file();
}

Status WriteBundle(const RunContext& c, const std::string& hosts, const SeccompOptions& seccomp,
                   const std::string& launcher_dir, RunState& s) {
  SAFEX_RETURN_IF_ERROR(
      PrepareRootfs(s.bundle + "/rootfs", c.plan, s.mount_sources, hosts, RootMountPoints()));
  OciLayout layout;
  layout.rootfs = "rootfs";
  layout.cgroups_path = s.cg.oci_path();
  layout.mount_sources = s.mount_sources;
  layout.pids_backstop = s.pids_backstop;
  layout.network_none = c.plan.network.egress.empty();
  layout.launcher_dir = launcher_dir;
  layout.pooled = c.pooled;
  layout.session = c.session;
  const bool later = c.pooled || c.session;  // the program is not known yet
  SAFEX_ASSIGN_OR_RETURN(
      nlohmann::json spec,
      BuildOciSpec(c.plan, later ? std::vector<std::string>{} : c.req.argv, layout, seccomp));
  SAFEX_ASSIGN_OR_RETURN(std::string text, SpecText(spec));
  return WriteWholeFile(s.bundle + "/config.json", text);
}

Result<RunIo> StartRunsc(const RunContext& c, RunState& s) {
  RunIo io;
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);
  // A pooled sandbox does not know yet whether its request has stdin: it always gets the pipe,
  // and the launcher puts /dev/null in its place when the request has none.
  if (c.req.stdin_data || c.pooled) {
    SAFEX_ASSIGN_OR_RETURN(Pipe p, MakePipe());
    io.stdin_pipe = std::move(p);
    SAFEX_RETURN_IF_ERROR(SetNonBlocking(io.stdin_pipe->write.get()));
  }
  // The program's stdout and stderr are files on a capped tmpfs, not pipes: a write to a host
  // pipe inside gVisor can come back short and lose the rest (stdio_files.h).
  SAFEX_RETURN_IF_ERROR(MakeDir(s.dir.path() + "/stdio", 0700));
  SAFEX_ASSIGN_OR_RETURN(s.stdio,
                         StdioFiles::Create(s.dir.path() + "/stdio", c.plan.limits.output_bytes));
  SAFEX_ASSIGN_OR_RETURN(io.log, MakePipe());
  SAFEX_ASSIGN_OR_RETURN(io.diag, MakePipe());
  SAFEX_ASSIGN_OR_RETURN(io.report, MakePipe());
  SAFEX_ASSIGN_OR_RETURN(io.go, MakePipe());
  for (int fd : {io.log.read.get(), io.diag.read.get(), io.report.read.get()}) {
    SAFEX_RETURN_IF_ERROR(SetNonBlocking(fd));
  }

  RunscRun r;
  r.runsc_path = c.options.runsc_path;
  r.state_dir = s.state_dir;
  r.bundle = s.bundle;
  r.run_id = c.req.run_id;
  r.platform = c.plan.gvisor.platform;
  r.network = !c.plan.network.egress.empty();
  r.logged = SyscallsToLog(c.plan.seccomp);
  r.launcher = true;
  SpawnOptions so;
  so.argv = RunscRunArgv(r);
  so.env = {};  // runsc needs no environment; nothing of the supervisor's is passed on
  so.fds = {{0, devnull.get()},
            {1, io.diag.write.get()},
            {2, io.diag.write.get()},
            {kRunscStdinFd, io.stdin_pipe ? io.stdin_pipe->read.get() : devnull.get()},
            {kRunscStdoutFd, s.stdio.child_stdout()},
            {kRunscStderrFd, s.stdio.child_stderr()},
            {kRunscLogFd, io.log.write.get()},
            {kRunscReportFd, io.report.write.get()},
            {kRunscGoFd, io.go.read.get()}};
  so.new_session = true;  // no controlling terminal for runsc or anything it starts
  so.netns_fd = s.net ? s.net->netns_fd() : -1;
  SAFEX_ASSIGN_OR_RETURN(s.runsc, Subprocess::Spawn(so));
  // Only the child holds the write ends now: EOF arrives once every process of the run is gone.
  if (io.stdin_pipe) io.stdin_pipe->read.Reset();
  s.stdio.CloseChildEnds();
  io.log.write.Reset();
  io.diag.write.Reset();
  io.report.write.Reset();
  io.go.read.Reset();
  return io;
}

namespace {

// The hand-over message (launch/safex-launch.c): 'p', the payload's length (4 bytes, little
// endian), the stdin byte, then argv, each string NUL-terminated.
std::string HandOverMessage(const RunRequest& req) {
  std::string payload(1, req.stdin_data ? 'p' : 'n');
  for (const std::string& a : req.argv) {
    payload += a;
    payload.push_back('\0');
  }
  std::string msg(1, 'p');
  const auto len = static_cast<uint32_t>(payload.size());
  for (int shift = 0; shift < 32; shift += 8) msg.push_back(static_cast<char>(len >> shift));
  return msg + payload;
}

// Writes all of `bytes` to a non-blocking fd within `timeout` (a launcher that stopped reading
// cannot hold the supervisor).
Status WriteWithin(int fd, const std::string& bytes, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return Status::Errno("write", "hand-over", errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("the pooled sandbox did not take its hand-over in time");
    }
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, 50);
  }
  return Status::Ok();
}

}  // namespace

Status PlaceInput(const RunContext& c, RunState& s) {
  if (c.req.input_dir.empty()) return Status::Ok();
  for (size_t i = 0; i < c.plan.mounts.size(); ++i) {
    if (c.plan.mounts[i].kind != plan::MountKind::kInput) continue;
    return MoveInputInto(c.req.input_dir, s.mount_sources[i]).With("input");
  }
  return Status::InvalidArgument("an input directory was given but the plan has no input mount");
}

Status HandOver(const RunContext& c, RunIo& io, RunState& s) {
  if (c.req.argv.size() > 64 * 1024) {
    return Status::InvalidArgument("a pooled sandbox takes at most 65536 arguments");
  }
  const std::string msg = HandOverMessage(c.req);
  if (msg.size() > 5 + 4 * 1024 * 1024) {
    return Status::InvalidArgument("argv is larger than a pooled sandbox's hand-over (4 MiB)");
  }
  SAFEX_RETURN_IF_ERROR(s.Unpark());
  SAFEX_RETURN_IF_ERROR(s.cg.SetCpuPriority(/*low=*/false));
  SAFEX_ASSIGN_OR_RETURN(s.cpu_baseline_ns, s.cg.CpuUsageNs());
  // Where the kernel has no reset (v2), the peak keeps the boot's: a larger figure, never a
  // smaller one.
  s.cg.ResetPeakMemory().ok();
  SAFEX_RETURN_IF_ERROR(SetNonBlocking(io.go.write.get()));
  Status sent = WriteWithin(io.go.write.get(), msg, std::chrono::milliseconds(10000));
  io.go.write.Reset();
  return sent;
}

void ReadAccounting(const RunContext& c, RunState& s, Observation* o, RunResult* result) {
  if (auto cpu = s.cg.CpuUsageNs(); cpu.ok()) {
    result->cpu_ns = *cpu > s.cpu_baseline_ns ? *cpu - s.cpu_baseline_ns : 0;
  }
  if (auto peak = s.cg.PeakMemoryBytes(); peak.ok()) result->peak_memory_bytes = *peak;
  if (auto oom = s.cg.OomKills(); oom.ok()) o->oom_kills = *oom;
  if (auto pids = s.cg.PidsLimitHits(); pids.ok()) o->pids_hits = *pids;
  o->pids_backstop = s.pids_backstop;
  if (s.net) result->denied_egress = s.net->DeniedCount();
  o->full_outputs = s.outputs.Full(c.plan);
}

void CollectOutputs(const RunContext& c, RunState& s) {
  s.outputs.Collect(c.plan, c.req.collect_output,
                    [&s](const std::string& what, const Status& st) { s.Note(what, st); });
}

}  // namespace safex::drivers::gvisor
