// Small helpers around the runsc binary: version parsing and one-shot helper invocations
// (runsc kill, runsc delete, runsc --version) with bounded output and a deadline. No shell.
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

struct ToolOutput {
  ExitStatus status;
  std::string output;  // stdout and stderr together, at most the cap
  bool timed_out = false;
};

// Runs argv (argv[0] absolute) with an empty environment, stdin /dev/null, stdout+stderr
// captured; SIGKILLed at the deadline (timed_out is then set).
Result<ToolOutput> RunTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           size_t cap = 64 * 1024);

}  // namespace safex::drivers::gvisor
