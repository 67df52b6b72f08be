// A cache of `runsc --version` in the driver's state root, keyed by the binary's identity.
//
// Asking runsc its version costs a Go process start (40-150 ms measured here), once per
// `safex run`: more than everything else the supervisor adds to a run. The answer only changes when
// the binary does, so it is kept in `<state_root>/runsc-version` together with the binary's
// (device, inode, size, mtime, ctime); any change to the file (replaced, rewritten, chmod) changes
// one of them and the cache is ignored. The state root is root's own 0700 directory: whoever could
// forge the cache could replace runsc itself. A missing, foreign or unreadable cache is a miss,
// never an error; a cache that cannot be written costs only the next run's time.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

namespace safex::drivers::gvisor {

// The identity line written for `st` (exposed for tests).
std::string RunscIdentity(const struct stat& st);

// The cached `--version` output for a binary with this identity, if the cache holds one.
std::optional<std::string> ReadRunscVersionCache(const std::string& cache_path,
                                                 const struct stat& st);

// Writes the cache atomically (temporary file, rename), mode 0600. Best effort.
void WriteRunscVersionCache(const std::string& cache_path, const struct stat& st,
                            const std::string& version_output);

}  // namespace safex::drivers::gvisor
