#include "drivers/native/run_steps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/owner_lock.h"
#include "drivers/native/mount_script.h"
#include "drivers/net/network_evidence.h"
#include "drivers/rootfs.h"

namespace safex::drivers::native {
namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0) return Status::Errno("mkdir", path, errno);
  return Status::Ok();
}

Result<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return Status::Errno("pipe2", errno);
  return std::make_pair(UniqueFd(p[0]), UniqueFd(p[1]));
}

Status SetNonBlocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return Status::Errno("fcntl", errno);
  return Status::Ok();
}

}  // namespace

Status CreateRunDirectory(const RunContext& c, const std::string& runs_dir,
                          const std::string& ids_dir, RunState& s) {
  s.run_id = c.req.run_id;
  const plan::NativeBackendSettings& ids = c.options.settings;
  SAFEX_ASSIGN_OR_RETURN(s.id, IdLease::Acquire(ids_dir, ids.first_id, ids.ids, c.req.run_id));
  SAFEX_ASSIGN_OR_RETURN(s.dir, PrivateDir::Create(runs_dir, c.req.run_id));
  // Locked from its first instant (common/owner_lock.h): CleanupStale of another process never
  // takes a live run's directory.
  SAFEX_ASSIGN_OR_RETURN(s.owner_lock, CreateOwnerLock(s.dir.path()));
  return MakeDir(s.dir.path() + "/root", 0755);
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
        s.mount_sources[i] = m.source;  // opened and checked at launch (sandbox_launch.cc)
        break;
      case plan::MountKind::kTmpfs:
        break;  // made inside the sandbox's mount namespace
      case plan::MountKind::kInput: {
        SAFEX_ASSIGN_OR_RETURN(s.mount_sources[i], InputSource(c.req.input_dir, s.dir.path()));
        break;
      }
      case plan::MountKind::kOutput: {
        // Owned by the run's host id: the program writes there as that id.
        SAFEX_ASSIGN_OR_RETURN(s.mount_sources[i],
                               s.outputs.Add(s.dir.path(), m, i, s.id.uid(), s.id.gid()));
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
  // The plan's process limit itself: every process and thread of the run, the program included
  // (nothing of safex's runs in this cgroup but the sandbox's first process, which becomes the
  // program), as the other backends count it. pids.events counts the refusals.
  cl.pids_max = lim.pids;
  cl.cpus = lim.cpus;
  s.cg_limits = cl;
  SAFEX_ASSIGN_OR_RETURN(s.cg,
                         cgroups.CreateRun(c.options.cgroup_parent, CgroupName(c.req.run_id), cl));
  return Status::Ok();
}

Result<std::string> CreateNetwork(const RunContext& c, RunState& s) {
  if (c.plan.network.egress.empty()) return std::string();
  SAFEX_ASSIGN_OR_RETURN(s.net, c.options.network_provider(c.plan, c.req.run_id));
  if (!s.net || s.net->netns_fd() < 0) {
    return Status::Internal("network provider returned no network namespace");
  }
  return s.net->hosts_file();
}

Status PrepareRoot(const RunContext& c, const std::string& hosts, RunState& s) {
  return PrepareRootfs(s.dir.path() + "/root", c.plan, s.mount_sources, hosts, {"/proc", "/dev"});
}

void ReadBackHostSide(const LandlockRuleset& landlock, RunState& s, Enforcement* e) {
  utsname u{};
  uname(&u);
  e->Observed("runtime", std::string("host kernel ") + u.release, "host kernel: uname");
  cgroup::CompareLimits(s.cg_limits, s.cg, e);
  if (s.net) {
    net::AddNetworkEvidence(s.net.get(), net::SandboxAddress::kInNamespace, e);
  } else {
    e->NotObserved("network",
                   "a new network namespace of the sandbox's own, with only its loopback",
                   "metadata address, egress outside the granted set");
  }
  e->Observed("landlock", DescribeRuleset(landlock),
              landlock.abi == 0 ? "host kernel: no Landlock (landlock_create_ruleset)"
                                : "host kernel: Landlock ABI, rules derived from the mounts");
  e->NotObserved("seccomp.filter", "installed by the sandbox's first process before its exec",
                 "the first errno and kill syscall rules");
}

Result<RunIo> StartSandbox(const RunContext& c, const LandlockRuleset& landlock,
                           const std::vector<sock_filter>& seccomp, RunState& s) {
  RunIo io;
  UniqueFd devnull(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) return Status::Errno("open", "/dev/null", errno);
  UniqueFd stdin_r;
  if (c.req.stdin_data) {
    SAFEX_ASSIGN_OR_RETURN(auto p, Pipe());
    stdin_r = std::move(p.first);
    io.stdin_w = std::move(p.second);
    SAFEX_RETURN_IF_ERROR(SetNonBlocking(io.stdin_w.get()));
  }
  SAFEX_ASSIGN_OR_RETURN(auto out, Pipe());
  SAFEX_ASSIGN_OR_RETURN(auto err, Pipe());
  io.stdout_r = std::move(out.first);
  io.stderr_r = std::move(err.first);
  SAFEX_RETURN_IF_ERROR(SetNonBlocking(io.stdout_r.get()));
  SAFEX_RETURN_IF_ERROR(SetNonBlocking(io.stderr_r.get()));

  LaunchInputs in;
  in.plan = &c.plan;
  in.argv = c.req.argv;
  in.root = s.dir.path() + "/root";
  in.mount_sources = s.mount_sources;
  in.host_id = s.id.id();
  in.netns_fd = s.net ? s.net->netns_fd() : -1;
  in.seccomp = seccomp;
  in.landlock = landlock;
  in.stdin_fd = stdin_r ? stdin_r.get() : devnull.get();
  in.stdout_fd = out.second.get();
  in.stderr_fd = err.second.get();
  SAFEX_ASSIGN_OR_RETURN(s.sandbox, Sandbox::Start(in));
  SAFEX_RETURN_IF_ERROR(s.sandbox.Place(s.cg));
  // Only the child holds the write ends now: EOF arrives once every process of the run is gone.
  return io;
}

Status AwaitReport(const RunContext& c, RunState& s, Enforcement* e) {
  const auto deadline = Sandbox::Clock::now() + c.options.setup_timeout;
  SAFEX_RETURN_IF_ERROR(s.sandbox.MapIds(s.id.id(), deadline, c.req.cancel));
  SAFEX_ASSIGN_OR_RETURN(SandboxReport report, s.sandbox.ReadReport(deadline, c.req.cancel));
  ReportExpectations x;
  x.infrastructure_mounts = InfrastructureMountLines();
  x.filtered = true;
  x.rlimits = ChildRlimitNames(c.plan.limits);
  x.source = "the sandbox's first process, before its exec";
  AddSandboxReportEvidence(c.plan, x, report, e);
  const std::string host_id = std::to_string(s.id.id());
  e->Compare("process.host_identity", "uid " + host_id + " gid " + host_id,
             s.sandbox.HostIdentity(),
             "host kernel: /proc/PID/status of the sandbox's first process (its ids outside)");
  return Status::Ok();
}

void ReadAccounting(const RunContext& c, RunState& s, Observation* o, RunResult* result) {
  if (auto cpu = s.cg.CpuUsageNs(); cpu.ok()) result->cpu_ns = *cpu;
  o->cpu_ns = result->cpu_ns;
  if (auto peak = s.cg.PeakMemoryBytes(); peak.ok()) result->peak_memory_bytes = *peak;
  if (auto oom = s.cg.OomKills(); oom.ok()) o->counted.oom_kills = *oom;
  if (auto pids = s.cg.PidsLimitHits(); pids.ok()) o->counted.pids_hits = *pids;
  o->counted.pids_max = s.cg_limits.pids_max;
  if (s.net) result->denied_egress = s.net->DeniedCount();
  o->counted.full_outputs = s.outputs.Full(c.plan);
}

void CollectOutputs(const RunContext& c, RunState& s) {
  s.outputs.Collect(c.plan, c.req.collect_output,
                    [&s](const std::string& what, const Status& st) { s.Note(what, st); });
}

}  // namespace safex::drivers::native
