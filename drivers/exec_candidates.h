// How a sandbox's first process finds the program: argv[0] with a slash is used as it is; a bare
// name is tried in each absolute directory of the plan's PATH, in order, as a shell would (never
// the supervisor's PATH, and never the working directory for an empty entry). The list is made
// before clone (it allocates); the walk runs between clone and execve (it does not). Shared by the
// native sandbox and the microVM guest agent (standard library only).
#pragma once

#include <string>
#include <vector>

namespace safex::drivers {

// The search path when the plan's environment has no PATH (the list runc and runsc default to).
inline constexpr const char* kDefaultExecPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::vector<std::string> ExecCandidates(const std::string& program, const std::string& path);

// execve's each candidate (nullptr-terminated) until one starts; returns the errno to report
// when none did: that of the last, except that EACCES from any candidate wins over ENOENT
// (a shell's 126 over 127). Returns only on failure.
int ExecFirstCandidate(const char* const* candidates, char* const* argv, char* const* envp);

}  // namespace safex::drivers
