// Directory listing and tree removal for privileged code: one implementation each.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace safex {

// The names in directory `path` (without "." and ".."), sorted. NotFound when it does not exist.
Result<std::vector<std::string>> ListDirectory(const std::string& path);
// The same, with nothing for a directory that is missing or unreadable (for sweeps that look for
// leftovers: no directory, no leftovers).
std::vector<std::string> ListDirectoryOrEmpty(const std::string& path);
// The same for an open directory (`dirfd` stays open and the caller's).
Result<std::vector<std::string>> ListDirectoryAt(int dirfd);

// Removes the tree at `path`, fd-relative and depth first, without following a symlink and
// without crossing into another filesystem (a mount point below `path` is an error: something was
// left mounted, and what is mounted there is not ours to delete). Directories made read-only (an
// input snapshot) are made writable for the owner first. A missing `path` is not an error.
Status RemoveTree(const std::string& path);

}  // namespace safex
