// Reading a whole small file (a /proc or /sys entry, a marker the supervisor wrote) without
// exceptions.
//
// Why not std::ifstream with istreambuf_iterator: libstdc++'s filebuf throws
// std::ios_base::failure from underflow() when read(2) fails, and the iterator calls it directly,
// so the stream's exception mask does not help. /proc/PID/* fails that way (ESRCH) when the
// process ends between the open and the read, which is an ordinary event for every caller that
// looks at processes it does not own (recovery, the OCI runtime's state, the leak checker).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace safex {

// The first `cap` bytes of `path` (all of it when shorter), read with open(2)/read(2).
// Nullopt when it cannot be opened or a read fails (no such file, a directory, a process that
// ended). It follows symlinks as open(2) does: callers name files of their own or of the kernel.
std::optional<std::string> ReadSmallFile(const std::string& path, size_t cap = size_t{1} << 20);

}  // namespace safex
