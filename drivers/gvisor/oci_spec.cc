#include "drivers/gvisor/oci_spec.h"

#include <algorithm>
#include <cerrno>

#include "drivers/gvisor/launch_report.h"

namespace safex::drivers::gvisor {
namespace {

using nlohmann::json;

constexpr uint64_t kCpuPeriodUs = 100000;

bool ValidSyscallName(const std::string& s) {
  return !s.empty() && s.size() < 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

Result<std::string> ActionName(plan::SyscallAction a) {
  switch (a) {
    case plan::SyscallAction::kAllow:
    case plan::SyscallAction::kLog:  // allowed; the driver counts the calls (no SCMP_ACT_LOG)
      return std::string("SCMP_ACT_ALLOW");
    case plan::SyscallAction::kErrno:
      return std::string("SCMP_ACT_ERRNO");
    case plan::SyscallAction::kKill:
      return std::string("SCMP_ACT_KILL");
  }
  return Status::InvalidArgument("unknown seccomp action");
}

Status CheckErrno(int value, const std::string& what, const SeccompOptions& options) {
  if (value <= 0 || value > 4095) {
    return Status::InvalidArgument("seccomp: errno " + std::to_string(value) + " for " + what +
                                   " is not a valid errno");
  }
  if (!options.errno_ret_supported && value != EPERM) {
    return Status::Unavailable(
        "seccomp: " + what + " asks for errno " + std::to_string(value) +
        ", but this runsc ignores errnoRet and would return EPERM instead; refusing rather than "
        "changing the policy's behaviour (use errno EPERM with the gvisor backend)");
  }
  return Status::Ok();
}

json Rlimit(const char* type, uint64_t value) {
  return json{{"type", type}, {"hard", value}, {"soft", value}};
}

std::string MountFlagsError(const plan::Mount& m) {
  if (m.target.empty() || m.target[0] != '/') return "mount target must be absolute: " + m.target;
  if (m.target.find("/../") != std::string::npos || m.target.ends_with("/..") ||
      m.target.find("/./") != std::string::npos) {
    return "mount target must be normalised: " + m.target;
  }
  for (const char* reserved : {"/proc", "/dev", "/sys"}) {
    std::string r = reserved;
    if (m.target == r || m.target.starts_with(r + "/")) {
      return "mount target is provided by gVisor itself: " + m.target;
    }
  }
  if (m.target == "/") return "cannot mount over the sandbox root";
  if (m.target == kLauncherMountTarget ||
      m.target.starts_with(std::string(kLauncherMountTarget) + "/")) {
    return "mount target is the launcher's own: " + m.target;
  }
  return "";
}

}  // namespace

LoggedSyscalls SyscallsToLog(const plan::Seccomp& seccomp) {
  LoggedSyscalls out;
  out.all = seccomp.default_action == plan::SyscallAction::kLog;
  for (const plan::SyscallRule& r : seccomp.rules) {
    if (r.action == plan::SyscallAction::kLog) out.names.push_back(r.name);
  }
  std::sort(out.names.begin(), out.names.end());
  return out;
}

Result<std::optional<json>> BuildSeccomp(const plan::Seccomp& seccomp,
                                         const SeccompOptions& options) {
  bool filtering = seccomp.default_action == plan::SyscallAction::kErrno ||
                   seccomp.default_action == plan::SyscallAction::kKill;
  for (const plan::SyscallRule& r : seccomp.rules) {
    if (!ValidSyscallName(r.name)) {
      return Status::InvalidArgument("seccomp: bad syscall name '" + r.name + "'");
    }
    if (r.action == plan::SyscallAction::kErrno || r.action == plan::SyscallAction::kKill) {
      filtering = true;
    }
  }
  if (!filtering) return std::optional<json>();

  json out;
  SAFEX_ASSIGN_OR_RETURN(std::string def, ActionName(seccomp.default_action));
  out["defaultAction"] = def;
  if (seccomp.default_action == plan::SyscallAction::kErrno) {
    SAFEX_RETURN_IF_ERROR(CheckErrno(seccomp.default_errno, "the default action", options));
    out["defaultErrnoRet"] = seccomp.default_errno;
  }
  out["architectures"] = json::array({"SCMP_ARCH_X86_64"});
  json syscalls = json::array();
  for (const plan::SyscallRule& r : seccomp.rules) {
    SAFEX_ASSIGN_OR_RETURN(std::string action, ActionName(r.action));
    if (action == def && r.action != plan::SyscallAction::kErrno) continue;  // same as default
    json entry{{"names", json::array({r.name})}, {"action", action}};
    if (r.action == plan::SyscallAction::kErrno) {
      SAFEX_RETURN_IF_ERROR(CheckErrno(r.errno_value, "syscall " + r.name, options));
      entry["errnoRet"] = r.errno_value;
    }
    syscalls.push_back(std::move(entry));
  }
  out["syscalls"] = std::move(syscalls);
  return std::optional<json>(std::move(out));
}

namespace {

// gVisor's own /proc, /dev and /sys, the launcher's directory, then the plan's mounts in order.
Result<json> MountsJson(const plan::Plan& plan, const OciLayout& layout) {
  json mounts = json::array();
  mounts.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
  mounts.push_back({{"destination", "/dev"},
                    {"type", "tmpfs"},
                    {"source", "tmpfs"},
                    {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}});
  mounts.push_back({{"destination", "/sys"},
                    {"type", "sysfs"},
                    {"source", "sysfs"},
                    {"options", {"nosuid", "noexec", "nodev", "ro"}}});
  if (!layout.launcher_dir.empty()) {
    // Exec allowed (it is the first program), nothing else: read-only, nosuid, nodev.
    mounts.push_back({{"destination", kLauncherMountTarget},
                      {"type", "bind"},
                      {"source", layout.launcher_dir},
                      {"options", {"bind", "ro", "nosuid", "nodev"}}});
  }
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    if (std::string err = MountFlagsError(m); !err.empty()) return Status::InvalidArgument(err);
    json opts = json::array();
    json mount{{"destination", m.target}};
    if (m.kind == plan::MountKind::kTmpfs) {
      if (m.size_bytes == 0) return Status::InvalidArgument("tmpfs without a size: " + m.target);
      mount["type"] = "tmpfs";
      mount["source"] = "tmpfs";
      opts.push_back("size=" + std::to_string(m.size_bytes));
      // World-writable with the sticky bit, like /tmp: the sandbox user is not root.
      opts.push_back("mode=1777");
    } else {
      const std::string& src = layout.mount_sources[i];
      if (src.empty() || src[0] != '/') {
        return Status::Internal("oci: no host source for mount " + m.target);
      }
      mount["type"] = "bind";
      mount["source"] = src;
      // Not rbind: host sub-mounts under a bound path never become visible.
      opts.push_back("bind");
      bool ro = m.read_only || m.kind == plan::MountKind::kInput;
      if (m.kind == plan::MountKind::kOutput) ro = false;
      opts.push_back(ro ? "ro" : "rw");
    }
    if (m.nosuid) opts.push_back("nosuid");
    if (m.nodev) opts.push_back("nodev");
    if (m.noexec) opts.push_back("noexec");
    mount["options"] = std::move(opts);
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

}  // namespace

Result<json> BuildOciSpec(const plan::Plan& plan, const std::vector<std::string>& argv,
                          const OciLayout& layout, const SeccompOptions& seccomp_options) {
  if (!layout.pooled && !layout.session && (argv.empty() || argv[0].empty())) {
    return Status::InvalidArgument("argv is empty");
  }
  if (layout.mount_sources.size() != plan.mounts.size()) {
    return Status::Internal("oci: one host source per plan mount expected");
  }
  const plan::Limits& lim = plan.limits;
  if (lim.open_files == 0 || lim.pids == 0 || lim.disk_bytes == 0 || lim.memory_bytes == 0) {
    return Status::InvalidArgument("oci: limits must all be set (plan not verified?)");
  }

  json env = json::array();
  for (const auto& [k, v] : plan.env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return Status::InvalidArgument("oci: bad environment variable name or value: '" + k + "'");
    }
    env.push_back(k + "=" + v);
  }
  for (const std::string& a : argv) {
    if (a.find('\0') != std::string::npos) return Status::InvalidArgument("argv contains NUL");
  }

  json process;
  process["terminal"] = false;
  process["user"] = {
      {"uid", plan.process.uid}, {"gid", plan.process.gid}, {"additionalGids", json::array()}};
  if (layout.pooled || layout.session) {
    if (layout.launcher_dir.empty() || !argv.empty()) {
      return Status::Internal("a pooled or session sandbox needs the launcher and no argv");
    }
    process["args"] = json::array({kLauncherProgram, layout.pooled ? "--pool" : "--session"});
  } else if (layout.launcher_dir.empty()) {
    process["args"] = argv;
  } else {
    json args = json::array({kLauncherProgram, "--"});
    for (const std::string& a : argv) args.push_back(a);
    process["args"] = std::move(args);
  }
  process["env"] = env;
  process["cwd"] = plan.process.cwd.empty() ? "/" : plan.process.cwd;
  json none = json::array();
  process["capabilities"] = {{"bounding", none},
                             {"effective", none},
                             {"inheritable", none},
                             {"permitted", none},
                             {"ambient", none}};
  process["noNewPrivileges"] = true;
  process["rlimits"] =
      json::array({Rlimit("RLIMIT_NOFILE", lim.open_files), Rlimit("RLIMIT_NPROC", lim.pids),
                   Rlimit("RLIMIT_FSIZE", lim.disk_bytes), Rlimit("RLIMIT_CORE", 0)});

  SAFEX_ASSIGN_OR_RETURN(json mounts, MountsJson(plan, layout));

  json linux;
  json namespaces =
      json::array({{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}});
  if (layout.network_none) namespaces.push_back({{"type", "network"}});
  linux["namespaces"] = std::move(namespaces);
  linux["cgroupsPath"] = layout.cgroups_path;
  json resources;
  resources["memory"] = {{"limit", lim.memory_bytes}, {"swap", lim.memory_bytes}};
  if (layout.pids_backstop > 0) resources["pids"] = {{"limit", layout.pids_backstop}};
  if (lim.cpus > 0) {
    resources["cpu"] = {
        {"quota", static_cast<int64_t>(lim.cpus) * static_cast<int64_t>(kCpuPeriodUs)},
        {"period", kCpuPeriodUs}};
  }
  linux["resources"] = std::move(resources);
  SAFEX_ASSIGN_OR_RETURN(std::optional<json> seccomp, BuildSeccomp(plan.seccomp, seccomp_options));
  if (seccomp) linux["seccomp"] = std::move(*seccomp);

  json spec;
  spec["ociVersion"] = "1.0.2";
  spec["process"] = std::move(process);
  spec["root"] = {{"path", layout.rootfs}, {"readonly", true}};
  spec["hostname"] = "sandbox";
  spec["mounts"] = std::move(mounts);
  spec["linux"] = std::move(linux);
  return spec;
}

}  // namespace safex::drivers::gvisor
