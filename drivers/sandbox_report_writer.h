// The child side of drivers/sandbox_report.h: the process that is about to become the program
// writes what it got (/proc/self/status, limits, mountinfo, read under everything applied) in
// the report's framing. Used by the native sandbox's first process and the microVM guest
// agent's workload child (gVisor's launcher, in C, has its own copy in launch/).
// No allocation: it runs between clone and execve in a process that may not call malloc. Standard
// library only (the guest agent links it statically). Not thread-safe (one static buffer).
#pragma once

namespace safex::drivers {

// Writes the whole report to `fd`. False (errno set) when a write failed; a source that cannot be
// read is sent empty (the host then sees "unreadable").
bool WriteSandboxReport(int fd);

}  // namespace safex::drivers
