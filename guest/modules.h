// Kernel modules the guest needs (virtio transport, console, block, erofs, net), loaded from the
// initramfs in the order scripts/build-guest.sh resolved from each module's depends= field (the
// Debian cloud kernel ships them as modules and the initramfs carries no modules.dep).
#pragma once

#include <string>

namespace safex::guest {

// Loads every module named in `dir`/load.order (one file name per line), in that order. A module
// that is already loaded (EEXIST) is fine. Returns "" or an error naming the module.
std::string LoadModules(const std::string& dir);

}  // namespace safex::guest
