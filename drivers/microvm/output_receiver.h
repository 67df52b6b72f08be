// OutputReceiver: unpacks the guest's output stream (kFileBegin/kFileData/kFileEnd, see
// guest/output_sender.h) into one fresh host tmpfs per kOutput mount.
//
// Why not read the guest's disk: a filesystem image written by a (possibly compromised) guest must
// never be parsed by the host kernel. The stream is parsed here in userspace, defensively:
//   - each tmpfs is created detached (fsopen/fsmount): it is in no mount namespace, so nothing can
//     leak into the host's mount table, and it disappears with the last fd; size= is the mount's
//     size (+ slack for metadata), nr_inodes is bounded, nosuid/nodev/noexec;
//   - every path is checked component by component (no "", ".", "..", NUL, over-long names, at
//     most 32 levels) and resolved fd-relative with O_NOFOLLOW, so an entry can only be created
//     inside a directory the stream created earlier; existing names are never replaced;
//   - only directories, regular files, symlinks (stored, never followed) and FIFOs are created;
//     permission bits are masked to 0777;
//   - the number of entries and the bytes written are capped; a file whose data was cut (caps or
//     ENOSPC) gets its announced size as a sparse file, so the collector sees the real size.
// A stream that breaks these rules is a protocol violation: the caller kills the VM and the run's
// result says so. What was already unpacked is still handed to the collector, which validates it
// like any other output (supervisor/output).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "drivers/microvm/guest_spec.h"

namespace safex::microvm {

struct OutputMountSpec {
  uint32_t mount_index = 0;  // index in the plan's mounts (= GuestSpec::mounts)
  uint64_t size_bytes = 0;
};

class OutputReceiver {
 public:
  struct Caps {
    uint64_t max_entries = 100000;  // directories, files, links, FIFOs together
    uint64_t max_total_bytes = 0;   // data across all mounts; 0: each mount's size bounds it
    uint64_t max_sparse_size = 1ull << 40;  // largest size a cut file may be reproduced with
  };

  // Creates one detached tmpfs per mount. Needs CAP_SYS_ADMIN.
  static Result<OutputReceiver> Create(const std::vector<OutputMountSpec>& mounts, Caps caps);

  OutputReceiver(OutputReceiver&&) noexcept;
  OutputReceiver& operator=(OutputReceiver&&) noexcept;
  ~OutputReceiver();

  // Stream events, in order. A non-ok status is a protocol violation (or a host error).
  Status Begin(const FileHeader& h);
  Status Data(std::string_view bytes);
  Status End();
  bool in_file() const;

  // O_DIRECTORY fd of mount `mount_index`'s root; -1 if unknown.
  int RootFd(uint32_t mount_index) const;
  uint64_t entries() const;
  uint64_t bytes_written() const;
  // Files whose data was cut short (caps, ENOSPC).
  uint64_t truncated_files() const;

  // Validates one path of the stream; exposed for tests.
  static bool ValidPath(std::string_view path);

 private:
  struct State;
  explicit OutputReceiver(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace safex::microvm
