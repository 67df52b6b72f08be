// The small pieces every clone-then-exec path of safex shares (common/subprocess.h, the native
// sandbox's first process, the microVM guest's workload child). Header-only: the guest agent is a
// separate static program that takes only headers and a few sources from the tree.
#pragma once

#include <signal.h>

#include <cstring>
#include <string>
#include <vector>

namespace safex {

// NUL-terminated pointers into `v` for execve's argv or envp; valid while `v` lives unchanged.
// Made before clone (it allocates).
inline std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Between clone and execve: ignored signals stay ignored across execve and handlers would run the
// parent's code, so every disposition goes back to the default, and nothing stays blocked. No
// allocation. Returns false (errno set) when the mask cannot be cleared.
inline bool ResetSignalsForExec() {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    (void)sigaction(sig, &dfl, nullptr);  // EINVAL for glibc's reserved signals is fine
  }
  sigset_t none;
  sigemptyset(&none);
  return sigprocmask(SIG_SETMASK, &none, nullptr) == 0;
}

}  // namespace safex
