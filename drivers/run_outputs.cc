#include "drivers/run_outputs.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/fs_tree.h"
#include "common/unique_fd.h"

namespace safex::drivers {
namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0) return Status::Errno("mkdir", path, errno);
  return Status::Ok();
}

}  // namespace

Result<std::string> InputSource(const std::string& input_dir, const std::string& run_dir) {
  if (input_dir.empty()) {
    const std::string empty = run_dir + "/input-empty";
    if (access(empty.c_str(), F_OK) != 0) SAFEX_RETURN_IF_ERROR(MakeDir(empty, 0555));
    return empty;
  }
  struct stat st;
  if (input_dir[0] != '/' || stat(input_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("input_dir must be an existing absolute directory: '" +
                                   input_dir + "'");
  }
  return input_dir;
}

Status MoveInputInto(const std::string& snapshot, const std::string& dest) {
  UniqueFd from(open(snapshot.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!from) return Status::Errno("open input snapshot", snapshot, errno);
  UniqueFd to(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!to) return Status::Errno("open sandbox input", dest, errno);
  struct stat src_st, dst_st;
  if (fstat(from.get(), &src_st) != 0) return Status::Errno("stat", snapshot, errno);
  if (fstat(to.get(), &dst_st) != 0) return Status::Errno("stat", dest, errno);
  if (src_st.st_dev != dst_st.st_dev) {
    return Status::FailedPrecondition(
        "the input snapshot and the pooled sandbox are on different filesystems (" + snapshot +
        ", " + dest + ")");
  }
  SAFEX_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectoryAt(from.get()));
  for (const std::string& name : names) {
    if (renameat2(from.get(), name.c_str(), to.get(), name.c_str(), RENAME_NOREPLACE) != 0) {
      return Status::Errno("move input entry", dest + "/" + name, errno);
    }
  }
  if (fchown(to.get(), src_st.st_uid, src_st.st_gid) != 0) {
    return Status::Errno("chown", dest, errno);
  }
  if (fchmod(to.get(), src_st.st_mode & 07777) != 0) return Status::Errno("chmod", dest, errno);
  return Status::Ok();
}

Result<std::string> RunOutputs::Add(const std::string& run_dir, const plan::Mount& m,
                                    size_t index, uid_t uid, gid_t gid) {
  if (m.size_bytes == 0) return Status::InvalidArgument("output mount without a size: " + m.target);
  if (mounts_.empty()) SAFEX_RETURN_IF_ERROR(MakeDir(run_dir + "/out", 0700));
  const std::string dir = run_dir + "/out/" + std::to_string(mounts_.size());
  SAFEX_RETURN_IF_ERROR(MakeDir(dir, 0700));
  TmpfsMount::Options o;
  o.size_bytes = m.size_bytes;
  o.uid = uid;
  o.gid = gid;
  o.mode = 0700;
  o.nosuid = true;
  o.nodev = true;
  o.noexec = true;
  SAFEX_ASSIGN_OR_RETURN(TmpfsMount tm, TmpfsMount::Mount(dir, o));
  mounts_.push_back(std::move(tm));
  plan_index_.push_back(index);
  return dir;
}

std::vector<std::pair<std::string, uint64_t>> RunOutputs::Full(const plan::Plan& plan) const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (size_t i = 0; i < mounts_.size(); ++i) {
    if (!mounts_[i].Full()) continue;
    const plan::Mount& m = plan.mounts[plan_index_[i]];
    out.emplace_back(m.target, m.size_bytes);
  }
  return out;
}

void RunOutputs::Collect(const plan::Plan& plan, const OutputCollector& collect,
                         const Note& note) {
  if (!collect) return;
  for (size_t i = 0; i < mounts_.size(); ++i) {
    auto fd = mounts_[i].OpenRoot();
    if (!fd.ok()) {
      note("output " + mounts_[i].path(), fd.status());
      continue;
    }
    UniqueFd owned(*fd);
    collect(plan.mounts[plan_index_[i]], owned.get());
  }
}

void RunOutputs::UnmountAll(const Note& note) {
  for (TmpfsMount& m : mounts_) note("unmount " + m.path(), m.Unmount());
  mounts_.clear();
  plan_index_.clear();
}

}  // namespace safex::drivers
