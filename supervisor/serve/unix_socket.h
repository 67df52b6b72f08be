// The daemon's Unix socket: listening (with the operator's mode and group), the peer's
// credentials, and the client's connect.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "supervisor/serve/access.h"

namespace safex::serve {

// Binds and listens on `path` (non-blocking, close-on-exec). The parent directory is created
// (0755) when missing. A stale socket file at `path` is replaced (the caller holds the instance
// lock, so no live daemon owns it); anything else there is an error. The socket gets `mode` and,
// when set, group `gid` before it listens, so nobody can connect under looser permissions.
Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode, std::optional<gid_t> gid,
                            int backlog);

// SO_PEERCRED (and SO_PEERGROUPS where the kernel has it) of a connected socket.
Result<Caller> PeerOf(int fd);

// Connects to the daemon (blocking, close-on-exec). Unavailable with a clear message when nothing
// listens there.
Result<UniqueFd> ConnectUnix(const std::string& path);

}  // namespace safex::serve
