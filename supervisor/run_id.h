// Run identifiers: 16 lowercase hex characters from the kernel's CSPRNG, e.g. "3f9a0c1b7d2e4a55".
// Short enough for interface and cgroup names, unguessable, never reused.
#pragma once

#include <string>

#include "common/status.h"

namespace safex::supervisor {

Result<std::string> NewRunId();
bool IsValidRunId(const std::string& id);

}  // namespace safex::supervisor
