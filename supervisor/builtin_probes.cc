#include "supervisor/builtin_probes.h"

#include <fmt/format.h>
#include <seccomp.h>
#include <unistd.h>

#include <climits>

#include "plan/plan_json.h"
#include "plan/verify.h"
#include "supervisor/private_dir.h"

namespace safex::supervisor {
namespace {

constexpr uint64_t kMiB = 1 << 20;

plan::PolicyTest Probe(std::string name, std::vector<std::string> args) {
  plan::PolicyTest t;
  t.name = std::move(name);
  t.argv = {kProbeProgram};
  for (std::string& a : args) t.argv.push_back(std::move(a));
  t.defined_in = "safex";
  return t;
}

// An attempt the sandbox must stop from inside: the probe sees an errno and says "blocked".
plan::PolicyTest Blocked(std::string name, std::vector<std::string> args) {
  plan::PolicyTest t = Probe(std::move(name), std::move(args));
  t.expect.exit_code = 0;
  t.expect.stdout_regex = "^blocked: ";
  t.expect.denied = true;
  return t;
}

// An attempt the sandbox must stop from outside, with this verdict.
plan::PolicyTest Stopped(std::string name, std::vector<std::string> args, std::string verdict) {
  plan::PolicyTest t = Probe(std::move(name), std::move(args));
  t.expect.verdict = std::move(verdict);
  return t;
}

bool Mounted(const plan::Plan& p, const std::string& path) {
  for (const plan::Mount& m : p.mounts) {
    if (path == m.target || plan::PathWithin(path, m.target) || plan::PathWithin(m.target, path))
      return true;
  }
  return false;
}

bool Granted(const plan::Plan& p, const std::string& host) {
  for (const plan::EgressRule& e : p.network.egress) {
    if (e.host == host) return true;
  }
  return false;
}

void NetworkProbes(const plan::Plan& p, std::vector<plan::PolicyTest>* out) {
  out->push_back(Blocked("metadata address 169.254.169.254:80 is unreachable",
                         {"connect", "169.254.169.254", "80", "2000"}));
  // A public address on the discard port: not granted by any rule (a literal grant of 1.1.1.1
  // moves the probe to 9.9.9.9).
  const std::string outside = Granted(p, "1.1.1.1") ? "9.9.9.9" : "1.1.1.1";
  out->push_back(Blocked("egress outside the granted set (" + outside + ":9) is refused",
                         {"connect", outside, "9", "2000"}));
}

void ResourceProbes(const plan::Plan& p, std::vector<plan::PolicyTest>* out) {
  const plan::Limits& l = p.limits;
  out->push_back(
      Stopped(fmt::format("memory above the limit ({} MiB) is killed", l.memory_bytes / kMiB),
              {"alloc", std::to_string(l.memory_bytes + 64 * kMiB)}, "memory-limit"));
  out->push_back(Blocked(fmt::format("processes past the limit ({}) cannot be made", l.pids),
                         {"fork", std::to_string(l.pids + 8)}));
  const bool cpu_first = l.cpu_time_ns < l.wall_time_ns;
  out->push_back(Stopped(cpu_first ? "a CPU spin is stopped at the CPU-time limit"
                                   : "a CPU spin is stopped at the wall-time limit",
                         {"spin"}, cpu_first ? "cpu-limit" : "timeout"));
  out->push_back(Stopped(fmt::format("output past the cap ({} bytes) is cut", l.output_bytes),
                         {"output", std::to_string(l.output_bytes + kMiB)}, "output-limit"));
}

void FilesystemProbes(const plan::Plan& p, std::vector<plan::PolicyTest>* out) {
  out->push_back(Blocked("the root file system is read-only", {"write", "/safex-probe-write"}));
  for (const char* path : {"/etc/shadow", "/root", "/var/lib/safex", "/home"}) {
    if (Mounted(p, path)) continue;
    out->push_back(
        Blocked(std::string("an unmounted host path (") + path + ") is absent", {"read", path}));
    break;
  }
}

// The first rule of each denying action (errno, kill), as a probe.
void SyscallProbes(const plan::Plan& p, int (*resolve)(const char*),
                   std::vector<plan::PolicyTest>* out) {
  for (plan::SyscallAction action : {plan::SyscallAction::kErrno, plan::SyscallAction::kKill}) {
    for (const plan::SyscallRule& r : p.seccomp.rules) {
      if (r.action != action) continue;
      const int nr = resolve(r.name.c_str());
      if (nr < 0) continue;
      if (action == plan::SyscallAction::kErrno) {
        out->push_back(Blocked(fmt::format("syscall {} fails with errno {}", r.name, r.errno_value),
                               {"syscall", std::to_string(nr), std::to_string(r.errno_value)}));
      } else {
        out->push_back(Stopped("syscall " + r.name + " kills the program",
                               {"syscall", std::to_string(nr), "0"}, "nonzero-exit"));
      }
      break;
    }
  }
}

int ResolveSyscall(const char* name) {
  const int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
  return nr == __NR_SCMP_ERROR ? -1 : nr;
}

// Where safex-probe is: next to this binary (a build tree), else where packaging installs it.
std::string FindProbeDir() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/')) + "/probe-bin";
    if (access((dir + "/safex-probe").c_str(), X_OK) == 0) return dir;
  }
  return kInstalledProbeDir;
}

}  // namespace

std::vector<plan::PolicyTest> ProbesFor(const plan::Plan& p, int (*resolve)(const char*)) {
  std::vector<plan::PolicyTest> out;
  NetworkProbes(p, &out);
  ResourceProbes(p, &out);
  FilesystemProbes(p, &out);
  SyscallProbes(p, resolve, &out);
  return out;
}

Result<BuiltinProbes> MakeBuiltinProbes(const PreparedPlan& prepared,
                                        const plan::Ceilings& ceilings,
                                        const std::string& probe_dir) {
  const std::string dir = probe_dir.empty() ? FindProbeDir() : probe_dir;
  if (access((dir + "/safex-probe").c_str(), X_OK) != 0) {
    return Status::Unavailable("the probe program " + dir +
                               "/safex-probe is missing (build target safex-probe)");
  }
  // Security: the directory is shown to the sandbox read-only; only root may change what is in
  // it, or another local user could choose what the probe does (and so the test's result).
  SAFEX_RETURN_IF_ERROR(CheckTrustedDir(dir));
  plan::Plan p = prepared.plan;
  if (Mounted(p, kProbeMountTarget)) {
    return Status::FailedPrecondition(std::string("the plan already mounts ") + kProbeMountTarget);
  }
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = dir;
  m.target = kProbeMountTarget;
  m.read_only = true;
  p.mounts.push_back(m);
  p.tests.clear();  // the probe plan runs probes only
  BuiltinProbes out;
  SAFEX_ASSIGN_OR_RETURN(out.plan, VerifyPlanJson(plan::ToCanonicalJson(p), ceilings));
  out.probes = ProbesFor(prepared.plan, ResolveSyscall);
  return out;
}

}  // namespace safex::supervisor
