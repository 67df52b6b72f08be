// The parts of an OCI bundle's config.json (written by kubelet through containerd, or by `ctr`)
// that safex-oci reads: what to run, what the spec asks of the runtime (namespaces, capabilities,
// devices, mounts, limits, a terminal), where its cgroup goes, and the annotations that name the
// pod. Everything else in the spec is ignored: the policy's plan decides it (spec_check.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace safex::supervisor::oci {

struct SpecMount {
  std::string destination;
  std::string type;  // "bind", "proc", "tmpfs", ... ("" : a bind when options say so)
  std::string source;
  std::vector<std::string> options;
  bool IsBind() const;
};

struct SpecNamespace {
  std::string type;  // pid, network, mount, ipc, uts, user, cgroup, time
  std::string path;  // "" : a new one; else one to join
};

struct ContainerSpec {
  std::vector<std::string> args;
  std::vector<std::string> env;  // NAME=VALUE
  std::string cwd = "/";
  bool terminal = false;
  uint32_t uid = 0, gid = 0;
  std::string root_path;  // relative to the bundle, or absolute
  bool root_readonly = false;
  std::vector<SpecMount> mounts;
  std::vector<SpecNamespace> namespaces;
  // Every capability named in any of the process's sets (bounding, effective, ...), once each.
  std::vector<std::string> capabilities;
  std::vector<std::string> devices;  // linux.devices paths
  std::string cgroups_path;
  std::optional<int64_t> memory_limit;  // linux.resources.memory.limit (bytes)
  std::optional<int64_t> pids_limit;
  std::optional<int64_t> cpu_quota, cpu_period;
  bool has_seccomp = false;
  std::map<std::string, std::string> annotations;
};

// Parses config.json text. InvalidArgument naming the field for anything malformed (a field of
// the wrong type, args missing); unknown fields are ignored, as runtimes do.
Result<ContainerSpec> ParseContainerSpec(std::string_view json);

// Reads <bundle>/config.json (a regular file, at most 4 MiB, not through a symlink) and parses it.
Result<ContainerSpec> LoadContainerSpec(const std::string& bundle);

// Who the container is, from containerd's CRI annotations (empty outside Kubernetes, e.g. `ctr`).
struct PodIdentity {
  std::string kube_namespace;  // io.kubernetes.cri.sandbox-namespace
  std::string pod;             // io.kubernetes.cri.sandbox-name
  std::string container;       // io.kubernetes.cri.container-name
  std::string image;           // io.kubernetes.cri.image-name
  std::string container_type;  // io.kubernetes.cri.container-type: "sandbox" or "container"
  std::string sandbox_id;      // io.kubernetes.cri.sandbox-id: the pod's sandbox container
  bool IsPodSandbox() const { return container_type == "sandbox"; }
};
PodIdentity PodIdentityOf(const ContainerSpec& spec);

inline constexpr const char* kPolicyAnnotation = "safex.dev/policy";

}  // namespace safex::supervisor::oci
