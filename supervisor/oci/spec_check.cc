#include "supervisor/oci/spec_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>

namespace safex::supervisor::oci {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// pid, ipc, uts and mount must be the container's own (new, or a pod's shared one); network
// too: a container without a network namespace of its own is on the host's network.
void Namespaces(const ContainerSpec& spec, const IsHostNamespace& is_host, SpecCheck& c) {
  for (const char* type : {"pid", "network", "ipc", "uts", "mount"}) {
    auto it = std::find_if(spec.namespaces.begin(), spec.namespaces.end(),
                           [&](const SpecNamespace& n) { return n.type == type; });
    std::string what = std::string(type) == "network" ? "network" : std::string(type);
    if (it == spec.namespaces.end()) {
      c.refusals.push_back("the spec shares the host's " + what + " namespace" +
                           (what == "network" ? " (host network)" : ""));
    } else if (!it->path.empty() && is_host(type, it->path)) {
      c.refusals.push_back("the spec joins the host's " + what + " namespace (" + it->path + ")");
    } else if (!it->path.empty()) {
      c.notes.push_back("joins the pod's " + what + " namespace " + it->path +
                        ": gVisor gives the program its own" +
                        (what == "network" ? " (no network unless the policy grants egress)" : ""));
    }
  }
}

void Capabilities(const ContainerSpec& spec, SpecCheck& c) {
  std::vector<std::string> added;
  for (const std::string& cap : spec.capabilities) {
    if (!Contains(DefaultContainerCapabilities(), cap)) added.push_back(cap);
  }
  if (added.size() > 8) {
    c.refusals.push_back("the spec is privileged (it adds " + std::to_string(added.size()) +
                         " capabilities, " + added.front() + " among them)");
  } else if (!added.empty()) {
    c.refusals.push_back("the spec adds capabilities beyond a container's default: " +
                         fmt::format("{}", fmt::join(added, ", ")));
  }
  if (!spec.capabilities.empty()) {
    c.notes.push_back("capabilities: none are granted (the program runs as the policy's user)");
  }
}

bool IsCredentialPath(const std::string& dst) {
  for (const char* p : {"/var/run/secrets/", "/run/secrets/"}) {
    if (dst.rfind(p, 0) == 0) return true;
  }
  return false;
}

// What kubelet and containerd always add, and what the policy itself binds, are treated as
// docs/kubernetes.md says; any other bind of a host path is refused.
void Mounts(const ContainerSpec& spec, const plan::Plan& plan, SpecCheck& c) {
  for (const SpecMount& m : spec.mounts) {
    const std::string& dst = m.destination;
    if (!m.IsBind()) {
      c.notes.push_back(m.type + " at " + dst + ": not mounted (the sandbox has its own " +
                        "/proc, /dev and /sys, and the policy's mounts)");
    } else if (dst == "/etc/hosts" || dst == "/etc/hostname" || dst == "/etc/resolv.conf") {
      c.notes.push_back(dst + ": not bound (the sandbox's /etc is written fresh for each run)");
    } else if (dst == "/dev/shm") {
      c.notes.push_back("/dev/shm: not bound (the sandbox has its own, size-capped)");
    } else if (dst == "/dev/termination-log") {
      c.termination_log = m.source;
      c.notes.push_back("/dev/termination-log: not bound; safex writes the verdict to it");
    } else if (IsCredentialPath(dst)) {
      c.notes.push_back(dst + ": kept out (a credential; no policy grants it)");
    } else {
      bool in_policy = std::any_of(plan.mounts.begin(), plan.mounts.end(), [&](const auto& p) {
        return p.kind == plan::MountKind::kBind && p.target == dst && p.source == m.source;
      });
      if (in_policy) {
        c.notes.push_back(dst + ": bound by the policy itself (read-only as it says)");
      } else {
        c.refusals.push_back("the spec binds host path " + m.source + " at " + dst +
                             ", which the policy does not mount");
      }
    }
  }
}

void Limits(const ContainerSpec& spec, const plan::Plan& plan, SpecCheck& c) {
  const plan::Limits& l = plan.limits;
  if (spec.memory_limit && *spec.memory_limit > 0 &&
      static_cast<uint64_t>(*spec.memory_limit) > l.memory_bytes) {
    c.refusals.push_back("the spec's memory limit (" + std::to_string(*spec.memory_limit) +
                         " bytes) is above the policy's (" + std::to_string(l.memory_bytes) + ")");
  }
  if (spec.pids_limit && *spec.pids_limit > 0 && static_cast<uint64_t>(*spec.pids_limit) > l.pids) {
    c.refusals.push_back("the spec's pids limit (" + std::to_string(*spec.pids_limit) +
                         ") is above the policy's (" + std::to_string(l.pids) + ")");
  }
  if (spec.cpu_quota && *spec.cpu_quota > 0) {
    int64_t period = spec.cpu_period.value_or(100000);
    if (period > 0 && *spec.cpu_quota > static_cast<int64_t>(l.cpus) * period) {
      c.refusals.push_back("the spec's CPU quota (" + std::to_string(*spec.cpu_quota) + "/" +
                           std::to_string(period) + " us) is above the policy's " +
                           std::to_string(l.cpus) + " CPUs");
    }
  }
}

// The policy's image allowlist (plan.container), against the name containerd's CRI passes; a
// container whose image is not named (plain `ctr`) cannot be shown to be one of them.
void Image(const ContainerSpec& spec, const plan::Plan& plan, SpecCheck& c) {
  if (plan.container.empty()) return;
  std::string image = PodIdentityOf(spec).image;
  const std::string list = fmt::format("{}", fmt::join(plan.container.images, ", "));
  if (image.empty()) {
    c.refusals.push_back("the policy allows only the images " + list +
                         ", and the container's image is not named (no "
                         "io.kubernetes.cri.image-name annotation)");
  } else if (!plan::ImageAllowed(plan.container, image)) {
    c.refusals.push_back("image " + image + " is not one the policy allows (" + list + ")");
  }
}

// Environment and working directory: what the plan lets a caller choose is taken from the spec.
void Process(const ContainerSpec& spec, const plan::Plan& plan, SpecCheck& c) {
  for (const std::string& kv : spec.env) {
    size_t eq = kv.find('=');
    std::string name = kv.substr(0, eq);
    if (eq != std::string::npos && Contains(plan.caller.env, name)) {
      c.env[name] = kv.substr(eq + 1);
    } else if (!Contains(c.env_not_passed, name)) {
      c.env_not_passed.push_back(name);
    }
  }
  if (spec.cwd != plan.process.cwd) {
    bool allowed = std::any_of(plan.caller.cwd.begin(), plan.caller.cwd.end(), [&](const auto& d) {
      return spec.cwd == d || spec.cwd.rfind(d + "/", 0) == 0;
    });
    if (allowed) {
      c.cwd = spec.cwd;
    } else {
      c.notes.push_back("working directory " + spec.cwd + ": not one the policy allows; " +
                        plan.process.cwd + " is used");
    }
  }
  if (spec.uid != plan.process.uid) {
    c.notes.push_back("user " + std::to_string(spec.uid) + ": the policy's uid " +
                      std::to_string(plan.process.uid) + " is used");
  }
  if (!spec.root_readonly) c.notes.push_back("root: read-only, as every sandbox's");
  if (!spec.has_seccomp) c.notes.push_back("seccomp: the policy's filter applies");
}

}  // namespace

const std::vector<std::string>& DefaultContainerCapabilities() {
  static const std::vector<std::string> kCaps = {
      "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
      "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
      "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
      "CAP_KILL",    "CAP_AUDIT_WRITE"};
  return kCaps;
}

bool IsHostNamespaceFile(const std::string& type, const std::string& path) {
  static const std::map<std::string, std::string> kProcName = {
      {"pid", "pid"}, {"network", "net"}, {"ipc", "ipc"}, {"uts", "uts"}, {"mount", "mnt"}};
  auto it = kProcName.find(type);
  if (it == kProcName.end()) return false;
  // A namespace file that cannot be read is not trusted to be a pod's: runc would fail on it too.
  struct stat ns {};
  if (stat(path.c_str(), &ns) != 0) return true;
  // The host's: the runtime's own (the shim starts it in the host's namespaces), and init's where
  // it can be read (some hosts refuse even root a look at pid 1's).
  for (const std::string& host : {"/proc/self/ns/" + it->second, "/proc/1/ns/" + it->second}) {
    struct stat h {};
    if (stat(host.c_str(), &h) == 0 && h.st_dev == ns.st_dev && h.st_ino == ns.st_ino) return true;
  }
  return false;
}

SpecCheck CheckSpec(const ContainerSpec& spec, const plan::Plan& plan,
                    const IsHostNamespace& is_host) {
  SpecCheck c;
  if (spec.terminal) c.refusals.push_back("the spec asks for a terminal, which no policy allows");
  Namespaces(spec, is_host, c);
  Capabilities(spec, c);
  if (!spec.devices.empty()) {
    c.refusals.push_back("the spec adds devices (" + spec.devices.front() +
                         (spec.devices.size() > 1 ? ", ..." : "") + ")");
  }
  Mounts(spec, plan, c);
  Limits(spec, plan, c);
  Image(spec, plan, c);
  Process(spec, plan, c);
  return c;
}

}  // namespace safex::supervisor::oci
