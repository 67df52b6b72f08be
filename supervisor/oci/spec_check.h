// The OCI spec that kubelet or `ctr` wrote, checked against the plan of the policy the container
// runs under. The plan decides everything the sandbox is (limits, mounts, seccomp, user, network,
// read-only root); the spec may ask for no more than it allows. What the spec asks beyond the
// plan is refused, never silently dropped: privileged or added capabilities, devices, host
// namespaces, host mounts the policy does not have, limits above the policy's, an image the
// policy's `container { images }` does not list. What kubelet
// always adds is treated as docs/kubernetes.md says (notes name each one for the run's log).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "supervisor/oci/container_spec.h"

namespace safex::supervisor::oci {

struct SpecCheck {
  std::vector<std::string> refusals;  // each a reason the container may not run
  std::vector<std::string> notes;     // how each thing the spec asked for was treated
  // The spec's environment variables the plan lets a caller set (plan.caller.env); the others
  // are not passed, and their names are listed.
  std::map<std::string, std::string> env;
  std::vector<std::string> env_not_passed;
  std::string cwd;  // the spec's working directory where the plan allows it; "" : the plan's
  // The host file behind the spec's /dev/termination-log mount ("" : none): safex writes the
  // run's verdict there for kubelet (it is not bound into the sandbox).
  std::string termination_log;
};

// Whether the namespace file `path` of `type` is the host's own (the runtime's own namespace, or
// init's), or cannot be read. Injected for tests.
using IsHostNamespace = std::function<bool(const std::string& type, const std::string& path)>;
bool IsHostNamespaceFile(const std::string& type, const std::string& path);

SpecCheck CheckSpec(const ContainerSpec& spec, const plan::Plan& plan,
                    const IsHostNamespace& is_host = IsHostNamespaceFile);

// The capabilities a container runtime grants by default (containerd's and runc's default set):
// a spec that names any other asked for more than an ordinary container.
const std::vector<std::string>& DefaultContainerCapabilities();

}  // namespace safex::supervisor::oci
