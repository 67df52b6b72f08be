// Sends the contents of the kOutput mounts to the host after the workload is gone, as a stream of
// kFileBegin / kFileData / kFileEnd frames (a bounded archive the host unpacks into a fresh host
// tmpfs; it never mounts a guest filesystem).
//
// The walk is fd-relative and never follows symlinks: directories, regular files, symlinks (as
// their target text) and FIFOs are sent; sockets and devices are skipped and counted. Entries
// beyond spec.max_output_files + 1 are skipped (the +1 lets the host's collector see that the
// cap was exceeded); file data beyond spec.max_output_bytes is cut, but the header carries the
// file's real size so the host can reproduce it as a sparse file.
#pragma once

#include <cstdint>

#include "drivers/microvm/guest_spec.h"
#include "guest/channel.h"

namespace safex::guest {

// Returns false when the channel broke. `skipped` gets the count of entries not sent.
bool SendOutputs(const microvm::GuestSpec& spec, Channel& channel, uint64_t* skipped);

}  // namespace safex::guest
