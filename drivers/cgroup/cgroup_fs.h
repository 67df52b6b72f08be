// CgroupFs: the few file operations the cgroup module performs on a cgroup filesystem.
//
// The real implementation (HostCgroupFs) is plain syscalls on paths. It is an interface so that the
// cgroup logic can be unit-tested against a temporary directory laid out like a cgroup tree, with
// a test double that imitates what the kernel does on mkdir/rmdir/write (creating control files,
// EBUSY while processes remain). Operations return 0 or an errno value.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace safex::drivers::cgroup {

class CgroupFs {
 public:
  virtual ~CgroupFs() = default;

  virtual int MakeDir(const std::string& path) = 0;
  virtual int RemoveDir(const std::string& path) = 0;
  // Writes to an existing control file (never creates one), in a single write().
  virtual int WriteFile(const std::string& path, std::string_view data) = 0;
  virtual int ReadFile(const std::string& path, std::string* out) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // SIGKILLs `pid` if, once it is pinned by a pidfd, it is still listed in `procs_file` (so a
  // recycled pid outside the cgroup is never signalled). Returns 0 when killed or already gone.
  virtual int KillMember(pid_t pid, const std::string& procs_file) = 0;
};

// Plain syscalls on the host's paths.
class HostCgroupFs : public CgroupFs {
 public:
  int MakeDir(const std::string& path) override;
  int RemoveDir(const std::string& path) override;
  int WriteFile(const std::string& path, std::string_view data) override;
  int ReadFile(const std::string& path, std::string* out) override;
  bool Exists(const std::string& path) override;
  int KillMember(pid_t pid, const std::string& procs_file) override;
};

// The process-wide HostCgroupFs.
CgroupFs& HostFs();

}  // namespace safex::drivers::cgroup
