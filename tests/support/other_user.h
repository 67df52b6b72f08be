// What another local user can see: the attacker of the host-side review ("su nobody -c 'cat
// STATE/input-*/*'"), as a forked child that drops to that uid and walks a tree.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace safex::testing {

struct OtherUserView {
  std::vector<std::string> readable;     // regular files below `root` it could open and read
  std::vector<std::string> with_needle;  // ... whose content contains the needle
  std::vector<std::string> listable;     // directories it could list
  bool ran = false;                      // the child ran (fork, setresuid worked)
};

// Forks; the child drops every group and capability (setgroups(0), setresgid, setresuid to
// uid/gid), walks `root` (not following symlinks, at most `max_entries` entries) and reports what
// it could list and read. The parent waits for it (at most 30 s).
OtherUserView ViewAs(uid_t uid, gid_t gid, const std::string& root, const std::string& needle,
                     size_t max_entries = 20000);

}  // namespace safex::testing
