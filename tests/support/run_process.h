// Runs a program for a test (argv only, never a shell), feeding stdin and capturing stdout and
// stderr, with a deadline after which it is killed. Shared by every test that drives the `safex`
// binary.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace safex::testing {

struct ProcessOutput {
  int status = -1;         // exit status, or 128 + signal
  bool timed_out = false;  // killed at the deadline
  std::string out;
  std::string err;
};

ProcessOutput RunProcess(const std::vector<std::string>& argv, const std::string& stdin_data = "",
                         std::chrono::seconds deadline = std::chrono::seconds(120),
                         const std::string& cwd = "");

// RunProcess of the built `safex` with `args`.
ProcessOutput RunSafex(const std::vector<std::string>& args, const std::string& stdin_data = "",
                       std::chrono::seconds deadline = std::chrono::seconds(120));

}  // namespace safex::testing
