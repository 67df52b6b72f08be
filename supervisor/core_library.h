// The safex executable and its core (docs/architecture.md, "The executable and its core").
//
// `safex` is two files: the executable, which runs `safex submit` itself and links little else,
// and libsafex-core.so, which holds every other verb and safex-oci and is loaded with dlopen in
// the same process when one of them is asked for. Why: the dynamic loader's binding of the
// libraries a submit never calls (SQLite, libnl, libseccomp, RE2, spdlog, ...) was half of a
// pooled submit's CPU (docs/benchmarks.md).
//
// Security: the executable often runs as root, so the core is never found through the loader's
// search path (LD_LIBRARY_PATH, RPATH): it is looked for in two fixed places, opened without
// following a symlink, checked on the open descriptor, and loaded through /proc/self/fd, so what
// is loaded is the file that was checked.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::cli {

inline constexpr char kCoreLibraryName[] = "libsafex-core.so";
inline constexpr char kInstalledCoreDir[] = "/usr/local/lib/safex";
// The core's one exported function: the verbs' main. It refuses (exit 125) a build id that is
// not its own, so an executable never runs with the core of another build.
inline constexpr char kCoreEntryName[] = "safex_core_main_v1";
using CoreEntry = int (*)(int argc, char** argv, const char* build_id);

// Where the core is looked for, in order: the running executable's directory (a build tree, from
// /proc/self/exe), then kInstalledCoreDir.
std::vector<std::string> CoreLibraryDirs();

// Who may own the core and its directory: root, `euid`, and the owner of the running executable
// (the core is trusted as far as the executable that loads it, never further).
struct CoreOwners {
  uid_t euid;
  uid_t executable_owner;
};

// The core in the first of `dirs` that holds one, opened read-only without following a symlink,
// and checked on that descriptor: a regular file, owned by one of `owners` or root, that nobody
// else may write, in a directory of which the same holds. A directory without the core is
// skipped; a core that fails a check is refused (never passed over for the next place).
Result<UniqueFd> OpenCoreLibrary(const std::vector<std::string>& dirs, const CoreOwners& owners);

// Loads the core and runs the command line in it: the process exit status. 125 with a message
// when the core is missing, refused, cannot be loaded or is not of `build_id`'s build.
int RunCore(int argc, char** argv, const char* build_id);

}  // namespace safex::cli
