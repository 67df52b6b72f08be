// Filesystems of the guest: the agent's own root, and the workload's root built from the spec.
//
// The workload's root (/wl in the agent's view) is a small tmpfs holding only mount points, /dev
// nodes and the /etc files the host sent, remounted read-only once built. Under it:
//   - kBind mounts: read-only bind mounts of paths inside the rootfs image (an erofs disk the host
//     built from the plan's host paths; the guest never sees any other host file);
//   - kInput: the input disk (erofs, read-only), or an empty read-only tmpfs when no input was
//   given;
//   - kTmpfs and kOutput: fresh size-capped tmpfs (charged to the workload's memory cgroup);
//   - /dev (null, zero, full, random, urandom, fd links, a size-capped /dev/shm), /sys read-only;
//     /proc is mounted by the workload's child after it enters its own pid namespace.
#pragma once

#include <chrono>
#include <string>

#include "drivers/microvm/guest_spec.h"

namespace safex::guest {

inline constexpr const char* kWorkloadRoot = "/wl";

// Mounts /dev (devtmpfs), /proc and /sys on the initramfs. Returns "" or an error.
std::string MountEarly();

// Moves the agent off the initramfs (rootfs, which cannot be pivot_root'ed away) onto a fresh
// tmpfs, carrying /dev, /proc and /sys along: after this the workload's child can pivot_root and
// detach everything the agent sees. Returns "" or an error.
std::string SwitchAgentRoot();

// Builds the workload's root at kWorkloadRoot. Returns "" or an error naming the mount.
std::string BuildWorkloadRoot(const microvm::GuestSpec& spec, std::chrono::milliseconds disk_wait);

// "/dev/vdX" of the virtio disk whose serial is `serial`, waiting up to `timeout`; "" if none.
std::string FindDiskBySerial(const std::string& serial, std::chrono::milliseconds timeout);

}  // namespace safex::guest
