// The owner lock of a run's directory: proof that a live process owns what is in it.
//
// <dir>/owner.lock is created ALREADY LOCKED: an unnamed O_TMPFILE is flock'ed, then linked into
// place, so that no sweeper can ever find the lock file of a live run unlocked. (Creating the
// file by name and then locking it leaves an instant in which a sweeper opens it, takes the lock
// and removes a live run's directory.) The lock belongs to the open file description, so the
// kernel drops it when the owner dies, however it dies. Header-only: the gVisor and microVM
// drivers and the supervisor's sweep share it.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex {

inline constexpr char kOwnerLockName[] = "owner.lock";

// Creates <dir>/owner.lock locked by the returned fd (close-on-exec). Hold it for the whole run.
// REQUIRES: `dir` is a fresh directory of the caller's (no owner.lock yet).
inline Result<UniqueFd> CreateOwnerLock(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) return Status::Errno("open(O_TMPFILE)", dir, errno).With("owner lock");
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return Status::Errno("flock", dir, errno).With("owner lock");
  }
  const std::string path = dir + "/" + kOwnerLockName;
  // Security: AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH (the supervisor runs as root); the fd is an
  // unnamed file just created in the run's own 0700 directory.
  if (linkat(fd.get(), "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) != 0) {
    return Status::Errno("linkat", path, errno).With("owner lock");
  }
  return fd;
}

enum class OwnerState { kAlive, kDead, kNoLock };

// Whether the owner of <dir> is alive. kDead comes with `lock` holding the dead owner's lock, so
// that no new owner can appear while the caller cleans up. kNoLock: there is no lock file (a run
// between mkdir and CreateOwnerLock, or a crash right there): the caller decides by age.
inline OwnerState ProbeOwner(const std::string& dir, UniqueFd* lock) {
  UniqueFd fd(open((dir + "/" + kOwnerLockName).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return OwnerState::kNoLock;
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return OwnerState::kAlive;
  *lock = std::move(fd);
  return OwnerState::kDead;
}

}  // namespace safex
