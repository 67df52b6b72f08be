// Directories on the privileged path that other host users must not read or change.
//
// The state root (/run/safex) stays traversable by everyone (0755): the service's socket lives in
// it and its group's members must reach it. Everything the supervisor stages for a run that
// carries a caller's data (the input snapshot, request files) therefore lives one level down, in
// <state root>/private (0700, root's): no other host user can traverse to it, whatever the modes
// of the files below. (A sandbox user reads its input through the backend, not through the host
// path: gVisor's gofer and the microVM image builder open it as root; inside the sandbox only the
// snapshot's own modes count.)
#pragma once

#include <string>

#include "common/status.h"

namespace safex::supervisor {

// <state_root>/private.
std::string PrivateRootFor(const std::string& state_root);

// Makes sure `dir` is a directory no other user can reach into: created 0700 when missing (its
// parent must exist), and then, fd-relative and without following a symlink, it must be a real
// directory owned by the effective uid with no group or other permission bits. An existing one
// with group/other bits is refused (a directory someone else made or loosened is not trusted; the
// operator removes it), never silently reused.
Status EnsurePrivateDir(const std::string& dir);

// Checks that `dir` (a state root, a records directory's parent) is a directory that only the
// effective uid can change: owned by it, not writable by group or others (or sticky). A root that
// another user can write to would let them swap our subdirectories for symlinks.
Status CheckTrustedDir(const std::string& dir);

}  // namespace safex::supervisor
