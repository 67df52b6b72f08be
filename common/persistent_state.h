// State that safex creates on purpose and keeps between runs, named once: the leak checker of the
// tests (tests/support/leak_check.cc) and docs/operating.md ("Files and directories") use this
// list; anything else a run leaves under a state root is a leak.
#pragma once

#include <string_view>

namespace safex {

struct PersistentEntry {
  std::string_view name;  // directly below the state root (/run/safex by default)
  // true: the entry itself is kept, but what is inside it belongs to single runs (each child is a
  // leak once its run is over); false: the entry and everything in it are kept.
  bool children_are_per_run;
  std::string_view why;
};

inline constexpr PersistentEntry kStateRootPersistent[] = {
    {"runsc-version", false,
     "cache of `runsc --version`, keyed by the binary (runsc_version_cache.h)"},
    {"private", true, "0700 parent of per-run input snapshots (supervisor/private_dir.h)"},
    {"serve.lock", false, "the daemon's instance lock (one safex serve per state dir)"},
    {"net", false, "the host's address leases, one file per /30 (drivers/net/address_pool.h)"},
    {"native", true, "0700 parent of the native backend's per-run directories"},
    {"native-ids", false,
     "the native backend's host id leases, one file per id (drivers/native/id_lease.h)"},
};

inline bool IsPersistentEntry(std::string_view name) {
  for (const PersistentEntry& e : kStateRootPersistent) {
    if (e.name == name) return true;
  }
  return false;
}

}  // namespace safex
