// The host config's `oci { }` section (compiler/host_config.h, OciSettings): the node's OCI
// runtime settings and which policies each Kubernetes namespace may use.
#pragma once

#include "compiler/host_config.h"
#include "compiler/values.h"
#include "dsl/ast.h"

namespace safex::compiler {

void OciSection(const dsl::Statement& s, Diags& d, OciSettings& oci);

}  // namespace safex::compiler
