// Translates a verified plan and a run request into the GuestSpec the guest agent enforces.
// Pure: no I/O, so every mapping is unit-tested (tests/microvm/guest_spec_builder_test.cc).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "drivers/exec_candidates.h"
#include "drivers/microvm/guest_spec.h"
#include "plan/plan.h"

namespace safex::microvm {

// Used when the plan's environment has no PATH.
inline constexpr const char* kDefaultPathSearch = drivers::kDefaultExecPath;

struct GuestSpecInputs {
  // For each plan mount (same index): the rootfs disk and the path inside its image backing a kBind
  // mount, and whether that source is a regular file. Ignored for other kinds.
  std::vector<uint32_t> disks;
  std::vector<std::string> image_paths;
  std::vector<bool> is_file;
  bool has_input_image = false;  // the input disk is attached (RunRequest::input_dir given)
  bool has_stdin = false;
  std::string hosts_file;  // /etc/hosts; "" for the default (localhost only)
  std::optional<GuestNetwork> network;
};

// Fails with InvalidArgument for input the guest could not honour exactly (NUL in argv or env,
// an empty argv) and Unavailable for what the microVM backend cannot provide (a writable bind
// mount of a host path: the guest sees an immutable image of it).
Result<GuestSpec> BuildGuestSpec(const plan::Plan& plan, const std::vector<std::string>& argv,
                                 const GuestSpecInputs& inputs);

// A pooled VM's spec, before any request exists (GuestSpec::request_later): the same as
// BuildGuestSpec's but without argv and stdin, which BuildGuestRequest brings at the hand-over.
Result<GuestSpec> BuildGuestSpecAhead(const plan::Plan& plan, const GuestSpecInputs& inputs);
// Fails with InvalidArgument as BuildGuestSpec does for argv.
Result<GuestRequest> BuildGuestRequest(const std::vector<std::string>& argv, bool has_stdin);

// The generated /etc files (the same content as the gVisor backend's root).
std::vector<std::pair<std::string, std::string>> EtcFiles(uint32_t uid, uint32_t gid,
                                                          const std::string& hosts_file);

}  // namespace safex::microvm
