// IdLease: the host uid and gid of one native run, from the operator's reserved range
// (`backends { native { first_id ids } }`), never held by two live runs at once, across threads
// and processes (several `safex run` and the service).
//
// Mechanism (as drivers/net/address_pool.h): one file per id under <dir>/<id>, flock'ed for the
// whole run; the kernel drops the lock when the owner dies, however it dies, so an unlocked file
// is a free id. Files are never unlinked (unlink + flock races would hand one id to two runs).
// The file holds the run id of its last holder, for the operator.
//
// Why an id of its own per run: the program's processes are that uid on the host, so a
// concurrent run (another uid, another pid namespace) can neither signal, ptrace nor read /proc
// of it, and nothing it creates is owned by an id another process of the host has. Reuse after
// a run is safe because nothing of the run outlives it: every process of the run is in its pid
// namespace, which dies with its first process, and its files are on the run's own mounts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::drivers::native {

class IdLease {
 public:
  IdLease() = default;
  IdLease(IdLease&&) noexcept = default;
  IdLease& operator=(IdLease&&) noexcept = default;

  // Holds a free id of [first, first + count) for `run_id`; `dir` is created 0700 if missing.
  // Starts at a place derived from the run id, so concurrent runs rarely contend. Unavailable
  // when every id is held.
  static Result<IdLease> Acquire(const std::string& dir, uint32_t first, uint32_t count,
                                 const std::string& run_id);

  bool held() const { return fd_.valid(); }
  uint32_t id() const { return id_; }
  uid_t uid() const { return static_cast<uid_t>(id_); }
  gid_t gid() const { return static_cast<gid_t>(id_); }

 private:
  UniqueFd fd_;
  uint32_t id_ = 0;
};

// Fails with FailedPrecondition naming the first account of `passwd` (or group of `group`) whose
// id is in [first, first + count): such an id is not the run's alone.
Status CheckIdsUnassigned(uint32_t first, uint32_t count, const std::string& passwd = "/etc/passwd",
                          const std::string& group = "/etc/group");

}  // namespace safex::drivers::native
