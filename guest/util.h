// Small file and error helpers of the guest agent. It links no project library, only the few
// std-only sources guest/CMakeLists.txt lists (files are read with common/small_file.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace safex::guest {

// "what: strerror(errno)" for the current errno.
std::string ErrnoMessage(const std::string& what);

// Writes `data` to an existing file (a sysfs/cgroupfs control file) in one write(). 0 or errno.
int WriteControl(const std::string& path, std::string_view data);
// Creates (O_EXCL) and fills a regular file. 0 or errno.
int CreateFile(const std::string& path, std::string_view data, mode_t mode);
// write() until done; false on error (EINTR retried).
bool WriteAll(int fd, const char* data, size_t n);
// Creates every missing directory of an absolute path (mode 0755). 0 or errno.
int MakeDirs(const std::string& path);
std::string_view TrimNewline(std::string_view s);
// The guest clock that counts from the kernel's start (CLOCK_BOOTTIME), in nanoseconds.
uint64_t BootTimeNs();

// Diagnostics to the kernel console (the host keeps the last few KiB for boot-failure reports).
void Log(const std::string& msg);

}  // namespace safex::guest
