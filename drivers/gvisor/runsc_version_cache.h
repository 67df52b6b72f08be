// What safex knows of the runsc binary (its `--version` output and its SHA-256), cached in the
// driver's state root and keyed by the binary's identity.
//
// Asking runsc its version costs a Go process start (40-150 ms measured here), and hashing its
// 30 MiB some 60 ms, once per `safex run`: more than everything else the supervisor adds to a run.
// Both only change when the binary does, so they are kept in `<state_root>/runsc-version`
// together with the binary's (device, inode, size, mtime, ctime); any change to the file
// (replaced, rewritten, chmod) changes one of them and the cache is ignored. The state root is
// root's own 0700 directory: whoever could forge the cache could replace runsc itself. A missing,
// foreign, older-format or unreadable cache is a miss, never an error; a cache that cannot be
// written costs only the next run's time.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "common/status.h"

namespace safex::drivers::gvisor {

struct RunscFacts {
  std::string sha256;          // of the binary's bytes, lowercase hex
  std::string version_output;  // what `runsc --version` printed
};

// The identity line written for `st` (exposed for tests).
std::string RunscIdentity(const struct stat& st);

// The cached facts of a binary with this identity, if the cache holds them.
std::optional<RunscFacts> ReadRunscVersionCache(const std::string& cache_path,
                                                const struct stat& st);

// Writes the cache atomically (temporary file, rename), mode 0600. Best effort.
void WriteRunscVersionCache(const std::string& cache_path, const struct stat& st,
                            const RunscFacts& facts);

// SHA-256 of the binary at `path`, which must still be the file `st` describes (the same
// identity before and after the read): a binary replaced meanwhile is an error, never the hash
// of one file recorded under the identity of another.
Result<std::string> HashRunsc(const std::string& path, const struct stat& st);

}  // namespace safex::drivers::gvisor
