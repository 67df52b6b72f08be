// Which policy a container runs under. The node operator decides what each Kubernetes namespace
// may use (the host config's `oci { namespace ... }`, compiler/host_config.h); the namespace is
// read from containerd's own io.kubernetes.cri.sandbox-namespace annotation, never from a pod
// annotation. A pod's `safex.dev/policy` annotation only picks one of that set; without it the
// namespace's default applies. A container with no namespace annotation (plain `ctr`) falls
// under the "*" rule.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "compiler/host_config.h"
#include "supervisor/oci/container_spec.h"

namespace safex::supervisor::oci {

// The policy's name, or PermissionDenied saying why none may be used.
Result<std::string> ChoosePolicy(const compiler::OciSettings& oci, const ContainerSpec& spec);

}  // namespace safex::supervisor::oci
