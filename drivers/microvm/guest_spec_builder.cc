#include "drivers/microvm/guest_spec_builder.h"

namespace safex::microvm {
namespace {

GuestSyscallAction ToGuest(plan::SyscallAction a) {
  switch (a) {
    case plan::SyscallAction::kAllow:
      return GuestSyscallAction::kAllow;
    case plan::SyscallAction::kErrno:
      return GuestSyscallAction::kErrno;
    case plan::SyscallAction::kKill:
      return GuestSyscallAction::kKill;
    case plan::SyscallAction::kLog:
      return GuestSyscallAction::kLog;
  }
  return GuestSyscallAction::kKill;
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

std::vector<std::pair<std::string, std::string>> EtcFiles(uint32_t uid, uint32_t gid,
                                                          const std::string& hosts_file) {
  std::string passwd = "root:x:0:0:root:/:/sbin/nologin\n";
  if (uid != 0) {
    std::string name = uid == 65534 ? "nobody" : "sandbox";
    passwd += name + ":x:" + std::to_string(uid) + ":" + std::to_string(gid) + ":" + name +
              ":/:/sbin/nologin\n";
  }
  std::string group = "root:x:0:\n";
  if (gid != 0) {
    group +=
        std::string(gid == 65534 ? "nogroup" : "sandbox") + ":x:" + std::to_string(gid) + ":\n";
  }
  std::string hosts = hosts_file.empty()
                          ? "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                          : hosts_file;
  return {{"passwd", passwd},
          {"group", group},
          {"hosts", hosts},
          {"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"}};
}

namespace {

Status CheckArgv(const std::vector<std::string>& argv) {
  if (argv.empty()) return Status::InvalidArgument("argv is empty");
  for (const std::string& a : argv) {
    if (HasNul(a)) return Status::InvalidArgument("argv contains NUL");
  }
  return Status::Ok();
}

// Everything of a spec but the request's argv: the plan's environment, identity, limits, mounts,
// seccomp rules, output caps and /etc, with the inputs' disks, stdin and network.
Result<GuestSpec> BuildPlanPart(const plan::Plan& plan, const GuestSpecInputs& in) {
  if (in.image_paths.size() != plan.mounts.size() || in.is_file.size() != plan.mounts.size() ||
      in.disks.size() != plan.mounts.size()) {
    return Status::Internal("microvm: image paths do not match the plan's mounts");
  }
  GuestSpec s;
  s.path_search = kDefaultPathSearch;
  for (const auto& [k, v] : plan.env) {
    if (k.empty() || k.find('=') != std::string::npos || HasNul(k) || HasNul(v)) {
      return Status::InvalidArgument("bad environment variable name or value: '" + k + "'");
    }
    s.env.push_back(k + "=" + v);
    if (k == "PATH") s.path_search = v;
  }
  s.uid = plan.process.uid;
  s.gid = plan.process.gid;
  s.cwd = plan.process.cwd.empty() ? "/" : plan.process.cwd;
  if (s.cwd[0] != '/' || HasNul(s.cwd)) return Status::InvalidArgument("cwd must be absolute");

  const plan::Limits& l = plan.limits;
  if (l.memory_bytes == 0 || l.pids == 0 || l.open_files == 0 || l.output_bytes == 0 ||
      l.disk_bytes == 0 || l.cpu_time_ns == 0) {
    return Status::InvalidArgument("microvm: limits must all be set (plan not verified?)");
  }
  s.cpu_time_ns = l.cpu_time_ns;
  s.memory_bytes = l.memory_bytes;
  s.pids = l.pids;
  s.open_files = l.open_files;
  s.output_bytes = l.output_bytes;
  s.disk_bytes = l.disk_bytes;
  s.cpus = l.cpus;

  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    const plan::Mount& m = plan.mounts[i];
    GuestMount g;
    g.target = m.target;
    g.nosuid = m.nosuid;
    g.nodev = m.nodev;
    g.noexec = m.noexec;
    switch (m.kind) {
      case plan::MountKind::kBind:
        if (!m.read_only) {
          return Status::Unavailable("microvm: the bind mount of " + m.source + " at " + m.target +
                                     " is writable; a microVM sees host paths only as a read-only "
                                     "image");
        }
        g.kind = GuestMountKind::kBind;
        g.disk = in.disks[i];
        g.image_path = in.image_paths[i];
        g.is_file = in.is_file[i];
        if (g.image_path.empty() || g.image_path[0] != '/') {
          return Status::Internal("microvm: no image path for " + m.target);
        }
        break;
      case plan::MountKind::kInput:
        g.kind = GuestMountKind::kInput;
        g.image_path = in.has_input_image ? "/" : "";
        break;
      case plan::MountKind::kTmpfs:
      case plan::MountKind::kOutput:
        if (m.size_bytes == 0)
          return Status::InvalidArgument("writable mount without a size: " + m.target);
        g.kind =
            m.kind == plan::MountKind::kTmpfs ? GuestMountKind::kTmpfs : GuestMountKind::kOutput;
        g.read_only = false;
        g.size_bytes = m.size_bytes;
        break;
    }
    s.mounts.push_back(std::move(g));
  }

  s.seccomp_default = ToGuest(plan.seccomp.default_action);
  s.seccomp_default_errno = plan.seccomp.default_errno;
  for (const plan::SyscallRule& r : plan.seccomp.rules) {
    s.seccomp_rules.push_back({r.name, ToGuest(r.action), r.errno_value});
  }
  s.max_output_files = plan.outputs.max_files;
  s.max_output_bytes = plan.outputs.max_total_bytes;
  s.etc_files = EtcFiles(s.uid, s.gid, in.hosts_file);
  s.has_stdin = in.has_stdin;
  s.network = in.network;
  return s;
}

}  // namespace

Result<GuestSpec> BuildGuestSpec(const plan::Plan& plan, const std::vector<std::string>& argv,
                                 const GuestSpecInputs& in) {
  SAFEX_RETURN_IF_ERROR(CheckArgv(argv));
  SAFEX_ASSIGN_OR_RETURN(GuestSpec s, BuildPlanPart(plan, in));
  s.argv = argv;
  return s;
}

Result<GuestSpec> BuildGuestSpecAhead(const plan::Plan& plan, const GuestSpecInputs& in) {
  SAFEX_ASSIGN_OR_RETURN(GuestSpec s, BuildPlanPart(plan, in));
  s.has_stdin = false;
  s.request_later = true;
  return s;
}

Result<GuestRequest> BuildGuestRequest(const std::vector<std::string>& argv, bool has_stdin) {
  SAFEX_RETURN_IF_ERROR(CheckArgv(argv));
  return GuestRequest{argv, has_stdin};
}

}  // namespace safex::microvm
