#include "drivers/gvisor/program_lookup.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

namespace safex::drivers::gvisor {
namespace {

enum class Presence { kAbsent, kPresent, kUnknown };

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The plan mount whose target covers `path` most closely (nullptr: none).
const plan::Mount* CoveringMount(const plan::Plan& plan, const std::string& path) {
  const plan::Mount* best = nullptr;
  for (const plan::Mount& m : plan.mounts) {
    const bool covers = path == m.target || m.target == "/" ||
                        (path.size() > m.target.size() && path.starts_with(m.target) &&
                         path[m.target.size()] == '/');
    if (covers && (best == nullptr || m.target.size() > best->target.size())) best = &m;
  }
  return best;
}

// Walks `rest` ("a/b/c") below the host directory `root`, without following a symlink.
Presence BelowHostDir(const std::string& root, const std::string& rest) {
  char real[PATH_MAX];
  // The mount itself follows symlinks in its source (as /bin -> usr/bin on Debian), so the
  // source is resolved the same way; below it, nothing is followed.
  if (realpath(root.c_str(), real) == nullptr) return Presence::kUnknown;
  std::string at = real;
  for (const std::string& part : Split(rest, '/')) {
    if (part.empty()) continue;
    if (part == "." || part == "..") return Presence::kUnknown;
    at += "/" + part;
    struct stat st {};
    if (lstat(at.c_str(), &st) != 0)
      return errno == ENOENT ? Presence::kAbsent : Presence::kUnknown;
    if (S_ISLNK(st.st_mode)) return Presence::kUnknown;
  }
  return Presence::kPresent;
}

Presence InSandbox(const plan::Plan& plan, const std::string& path, const std::string& input_dir) {
  const plan::Mount* m = CoveringMount(plan, path);
  if (m == nullptr) return Presence::kUnknown;  // the generated root: mount points and /etc
  const std::string rest = path.size() > m->target.size() ? path.substr(m->target.size()) : "";
  switch (m->kind) {
    case plan::MountKind::kBind:
      return BelowHostDir(m->source, rest);
    case plan::MountKind::kInput:
      if (input_dir.empty()) return rest.empty() ? Presence::kPresent : Presence::kAbsent;
      return BelowHostDir(input_dir, rest);
    case plan::MountKind::kTmpfs:
    case plan::MountKind::kOutput:
      return rest.empty() || rest == "/" ? Presence::kPresent : Presence::kAbsent;
  }
  return Presence::kUnknown;
}

}  // namespace

std::optional<std::string> CertainlyMissingProgram(const plan::Plan& plan, const std::string& argv0,
                                                   const std::string& input_dir) {
  if (argv0.empty()) return std::nullopt;
  std::vector<std::string> candidates;
  if (argv0.find('/') != std::string::npos) {
    if (argv0[0] == '/') {
      candidates.push_back(argv0);
    } else {
      const std::string& cwd = plan.process.cwd.empty() ? "/" : plan.process.cwd;
      candidates.push_back((cwd == "/" ? "" : cwd) + "/" + argv0);
    }
  } else {
    auto path = plan.env.find("PATH");
    if (path == plan.env.end()) return std::nullopt;  // runsc's own default: not ours to judge
    for (const std::string& dir : Split(path->second, ':')) {
      if (dir.empty() || dir[0] != '/') return std::nullopt;  // relative PATH entries: unknown
      candidates.push_back((dir == "/" ? "" : dir) + "/" + argv0);
    }
  }
  for (const std::string& c : candidates) {
    if (InSandbox(plan, c, input_dir) != Presence::kAbsent) return std::nullopt;
  }
  if (argv0.find('/') != std::string::npos) {
    return "the program " + argv0 + " does not exist in the sandbox (decided before starting it)";
  }
  return "the program \"" + argv0 + "\" is not in the sandbox's PATH " + plan.env.at("PATH") +
         " (decided before starting it)";
}

}  // namespace safex::drivers::gvisor
