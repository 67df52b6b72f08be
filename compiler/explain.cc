#include "compiler/explain.h"

#include <map>

#include "compiler/values.h"
#include "plan/plan_json.h"
#include "plan/stream_delivery.h"

namespace safex::compiler {
namespace {

std::string ActionText(plan::SyscallAction a, int err) {
  switch (a) {
    case plan::SyscallAction::kAllow:
      return "allowed";
    case plan::SyscallAction::kLog:
      return "allowed and logged";
    case plan::SyscallAction::kKill:
      return "kill the sandboxed process";
    case plan::SyscallAction::kErrno:
      return err == 1 ? "fail with EPERM" : "fail with " + ErrnoName(err);
  }
  return "?";
}

std::string Dest(const plan::EgressRule& e) {
  bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port) + " (" +
         plan::ProtocolName(e.protocol) + ")";
}

}  // namespace

std::string Explain(const plan::Plan& p) {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  line("policy " + p.policy_name + " (plan format " + std::to_string(p.format_version) + ")");
  if (p.sources.size() > 1) {
    std::string chain;
    for (size_t i = 1; i < p.sources.size(); ++i) chain += (i > 1 ? ", " : "") + p.sources[i].path;
    line("  extends: " + chain);
  }
  line("");
  std::string backend;
  switch (p.backend) {
    case plan::Backend::kGvisor:
      backend = "gVisor (user-space kernel, platform " + p.gvisor.platform + ")";
      break;
    case plan::Backend::kMicrovm:
      backend = "a microVM (" + std::to_string(p.microvm.vcpus) + " vCPU, KVM " +
                plan::KvmModeName(p.microvm.kvm) + ")";
      break;
    case plan::Backend::kNative:
      backend = "native namespaces + seccomp + cgroups + Landlock (shares the host kernel)";
      break;
  }
  line("Isolation");
  line(std::string("  The code is treated as ") + plan::TrustName(p.trust) + " and runs under " +
       backend + ".");
  line("  It runs as uid " + std::to_string(p.process.uid) + ", gid " +
       std::to_string(p.process.gid) + (p.process.uid == 0 ? " (root inside the sandbox)" : "") +
       ", in \"" + p.process.cwd + "\". No host environment is inherited.");
  line("");
  const auto& l = p.limits;
  line("Limits (exceeding one stops the run)");
  line("  wall clock " + FormatDuration(l.wall_time_ns) + ", CPU time " +
       FormatDuration(l.cpu_time_ns) + ", at most " + std::to_string(l.cpus) + " CPU" +
       (l.cpus == 1 ? "" : "s") + " of rate");
  line("  memory " + FormatSize(l.memory_bytes) + ", " + std::to_string(l.pids) +
       " processes/threads, " + std::to_string(l.open_files) + " open files");
  line("  stdout+stderr " + FormatSize(l.output_bytes) + " in total, largest file written " +
       FormatSize(l.disk_bytes));
  line("");
  line("Filesystem (a fresh root; nothing else from the host is visible)");
  if (p.mounts.empty()) line("  no mounts");
  for (const auto& m : p.mounts) {
    std::string s = "  " + m.target + ": ";
    switch (m.kind) {
      case plan::MountKind::kBind:
        s += "host " + m.source + (m.read_only ? ", read-only" : ", WRITABLE");
        break;
      case plan::MountKind::kTmpfs:
        s += "empty scratch space (tmpfs), writable, " + FormatSize(m.size_bytes) + " max";
        break;
      case plan::MountKind::kInput:
        s += "the run's input files, read-only";
        break;
      case plan::MountKind::kOutput:
        s += "output directory, writable, " + FormatSize(m.size_bytes) +
             " max, collected after the run";
        break;
    }
    s += m.noexec ? ", no programs run from here" : "";
    line(s);
  }
  if (p.outputs.max_files || p.outputs.max_total_bytes) {
    line("  at most " + std::to_string(p.outputs.max_files) + " output files, " +
         FormatSize(p.outputs.max_total_bytes) + " in total, are collected");
  }
  line("");
  line("Network");
  if (p.network.egress.empty()) {
    line("  none: the sandbox has no network at all");
  } else {
    line(
        "  denied except these destinations (loopback, link-local, metadata and private "
        "addresses are refused even if a name resolves to them):");
    for (const auto& e : p.network.egress) line("    " + Dest(e));
  }
  line("");
  line("Environment");
  if (p.env.empty()) line("  empty");
  for (const auto& [k, v] : p.env) line("  " + k + "=" + v);
  line("");
  line("What a caller of the service may choose per run");
  line("  a shorter wall time (never a longer one)");
  if (p.caller.env.empty()) line("  no environment variables");
  for (const std::string& k : p.caller.env) line("  environment variable " + k);
  if (p.caller.cwd.empty()) line("  no working directory");
  for (const std::string& d : p.caller.cwd) line("  a working directory at or below " + d);
  line("");
  line("Container images (safex-oci, docs/kubernetes.md)");
  if (p.container.images.empty()) line("  any image");
  for (const std::string& i : p.container.images) {
    line(i.back() == '*' ? "  any image named " + i : "  " + i);
  }
  line("");
  line("Sessions (several commands of one caller's task in one sandbox)");
  if (!p.session.allowed) {
    line("  not allowed: every request starts from a fresh sandbox");
  } else {
    line("  allowed: at most " + std::to_string(p.session.max_execs) +
         " commands, destroyed after " + FormatDuration(p.session.idle_timeout_ns) +
         " without one and at " + FormatDuration(p.session.max_lifetime_ns) + " of age");
  }
  line("");
  line("System calls");
  line("  by default " + ActionText(p.seccomp.default_action, p.seccomp.default_errno));
  std::map<std::string, std::string> by_action;  // action text -> names, in name order
  for (const auto& r : p.seccomp.rules) {
    std::string& names = by_action[ActionText(r.action, r.errno_value)];
    names += (names.empty() ? "" : ", ") + r.name;
  }
  for (const auto& [action, names] : by_action) line("  " + action + ": " + names);
  line("");
  line("What comes out");
  if (p.validators.empty()) line("  no validators beyond the output limit");
  for (const auto& v : p.validators) {
    std::string what = v.target == plan::ValidatorTarget::kFile
                           ? "file " + v.path
                           : plan::ValidatorTargetName(v.target);
    std::string s = "  " + what + ": at most " + FormatSize(v.max_bytes) + " (" +
                    (v.on_overflow == plan::OverflowAction::kReject ? "more is rejected"
                                                                    : "more is truncated") +
                    ")";
    if (v.utf8) s += ", must be UTF-8";
    if (v.control == plan::ControlChars::kStrip) s += ", control characters stripped";
    if (v.control == plan::ControlChars::kReject) s += ", control characters rejected";
    if (v.max_lines) s += ", at most " + std::to_string(v.max_lines) + " lines";
    if (v.json) {
      s += ", must be JSON (depth <= " + std::to_string(v.json->max_depth) + ")";
      for (const auto& [k, t] : v.json->required) s += ", key \"" + k + "\" a " + t;
    }
    line(s);
    for (const auto& r : v.regex) {
      line(std::string("    ") +
           (r.action == plan::RegexAction::kReject ? "rejected if it matches /" : "redacts /") +
           r.pattern + "/" +
           (r.action == plan::RegexAction::kRedact ? " as \"" + r.replacement + "\"" : ""));
    }
  }
  // The runs API streams output as it is produced where the validators allow it.
  for (plan::ValidatorTarget t : {plan::ValidatorTarget::kStdout, plan::ValidatorTarget::kStderr}) {
    const plan::StreamDelivery d = plan::StreamDeliveryOf(p.validators, t);
    line(std::string("  ") + plan::ValidatorTargetName(t) +
         (d.live ? " streams live through the service (validated line by line)"
                 : " is held until the run ends when streamed through the service: " + d.why_held));
  }
  if (!p.tests.empty()) {
    line("");
    line("Tests (`safex test` runs them; denial tests cannot be weakened by extending policies)");
    for (const plan::PolicyTest& t : p.tests) {
      line("  " + std::string(plan::ExpectsDenial(t.expect) ? "denial " : "success") + " \"" +
           t.name + "\" (" + t.defined_in + "): " + plan::DescribeExpectation(t.expect));
    }
  }
  if (!p.overrides.empty()) {
    line("");
    line("Overrides (reviewed loosenings of an extended policy)");
    for (const auto& ov : p.overrides) {
      line("  WARNING " + ov.field + " at " + ov.location + ": " + ov.reason);
    }
  }
  return o;
}

std::string DescribeChanges(const std::vector<Change>& changes) {
  std::string o;
  for (auto effect :
       {Change::Effect::kLoosens, Change::Effect::kTightens, Change::Effect::kNeutral}) {
    for (const auto& c : changes) {
      if (c.effect != effect) continue;
      std::string tag = effect == Change::Effect::kLoosens    ? "LOOSENS "
                        : effect == Change::Effect::kTightens ? "tightens"
                                                              : "changes ";
      o += tag + "  " + c.description + "\n";
    }
  }
  return o;
}

}  // namespace safex::compiler
