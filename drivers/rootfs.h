// The fresh root filesystem of one run: an empty directory with only what the sandbox needs. The
// gVisor and native backends build their sandbox's root from it.
//
// Contents: mount points for the backend's own mounts (/proc, /dev, ...) and every plan mount (a
// directory, or an empty file
// when a bind mount's host source is a file), and a minimal /etc written from scratch (nothing is
// copied from the host): passwd and group naming root and the sandbox user, hosts (localhost, or
// the run network's hosts file), nsswitch.conf (files only). The root is mounted read-only.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"

namespace safex::drivers {

// `root` must be an existing, empty directory private to the run. `mount_sources`: the host side
// of each plan mount ("" for tmpfs). `hosts` replaces the default /etc/hosts when non-empty.
// `infrastructure`: the mount points of what the backend mounts besides the plan ("/proc", ...).
Status PrepareRootfs(const std::string& root, const plan::Plan& plan,
                     const std::vector<std::string>& mount_sources, const std::string& hosts,
                     const std::vector<std::string>& infrastructure);

// The generated files, exposed for tests.
std::string PasswdFile(uint32_t uid, uint32_t gid);
std::string GroupFile(uint32_t gid);
std::string DefaultHostsFile();

}  // namespace safex::drivers
