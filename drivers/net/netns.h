// Network namespaces: creating, pinning, entering (on a helper thread only) and removing them.
//
// A network namespace belongs to a thread, not a process. Nothing here ever moves the calling
// thread: work that must happen "inside" a namespace (opening a netlink socket there, writing its
// /proc/sys/net, running libnftables) runs on a short-lived helper thread that joins the namespace
// and ends. Sockets opened on that thread stay bound to the namespace after it ends.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::drivers::net {

// Runs fn on a new thread that has first joined the network namespace `netns_fd`
// (setns CLONE_NEWNET) and returns its status. netns_fd < 0: fn runs on a new thread in the
// caller's namespace.
Status RunInNetns(int netns_fd, const std::function<Status()>& fn);

// Opens a network namespace file (O_RDONLY|O_CLOEXEC); "" opens the process's own namespace
// (/proc/self/ns/net: the thread group leader's, i.e. the host's for the supervisor).
Result<UniqueFd> OpenNetns(const std::string& path);

// Creates a fresh network namespace pinned by a bind mount at <netns_dir>/<name> (created as a
// shared mount point first if needed, as iproute2 does, so `ip netns` sees and can remove it) and
// returns an fd of it. IPv6 is switched off inside it before any interface exists (the runs are
// IPv4-only; router solicitations would otherwise count as denied egress). On failure nothing
// remains.
Result<UniqueFd> CreatePinnedNetns(const std::string& netns_dir, const std::string& name);

// Unmounts (MNT_DETACH) and unlinks a pin. A missing pin is not an error. The namespace itself is
// freed by the kernel when its last user (fd, process, pin) is gone.
Status RemoveNetnsPin(const std::string& path);

// Writes value to a /proc/sys path as seen from the calling thread's network namespace.
Status WriteProcSys(const std::string& path, const std::string& value);
Result<std::string> ReadProcSys(const std::string& path);

}  // namespace safex::drivers::net
