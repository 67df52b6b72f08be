// Small helpers around the runsc binary: version parsing. One-shot invocations (runsc kill,
// runsc delete, runsc --version) use RunTool (common/subprocess.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"

namespace safex::drivers::gvisor {

// "runsc version 0.0~20240729.0\nspec: 1.2.0" -> "0.0~20240729.0"; "" if absent.
std::string RunscVersionString(std::string_view version_output);
// The release date in a runsc version: "0.0~20240729.0" or "release-20240729.0" -> 20240729.
std::optional<int> RunscReleaseDate(std::string_view version);

}  // namespace safex::drivers::gvisor
