// AddressPool: hands out one /30 of the operator's pool per run, never the same one to two live
// runs, across threads AND processes (several `safex run` CLIs and the daemon at once).
//
// Mechanism: one file per slot under <state_dir>/leases/<the /30's address>, e.g.
// leases/198.18.128.4, held with flock(LOCK_EX) for the
// whole life of the run. flock belongs to the open file description, so the kernel drops it when
// the owner dies, however it dies: a slot whose file is unlocked is free. The file's contents are
// the SlotRecord of the run that holds (or held) it, written BEFORE any kernel resource of the run
// is created; an unlocked slot with a non-empty record is therefore the leftover of a crashed run,
// and the record names everything that must be removed before the slot is used again.
// Slot files are never unlinked (unlink + flock races hand one slot to two owners).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::drivers::net {

// IPv4 in host byte order.
std::string Ipv4ToString(uint32_t addr);

// What a run owns, by name, so that a later process can remove it after a crash.
struct SlotRecord {
  std::string run_id;
  int64_t pid = 0;           // the owner when written (informational: liveness is the flock)
  std::string netns_pin;     // bind-mounted netns file, e.g. /run/netns/safex-<run-id>
  std::string uplink_netns;  // "" = the host's own namespace
  std::string host_veth;     // veth end in the uplink namespace
  std::string nft_table;     // inet table in the uplink namespace

  std::string Serialize() const;
  // Returns false on text that is not a record (e.g. a half-written file).
  static bool Parse(const std::string& text, SlotRecord* out);
};

// Removes what a stale record names. Ok means the slot may be reused.
using StaleCleaner = std::function<Status(const SlotRecord&)>;

// A held slot: move-only; destruction unlocks it WITHOUT clearing the record (so that a failed
// teardown is retried by the next owner or CleanupStale). Call Clear() once the run's resources
// are gone.
class SlotLease {
 public:
  SlotLease() = default;
  SlotLease(SlotLease&&) noexcept = default;
  SlotLease& operator=(SlotLease&&) noexcept = default;

  uint32_t index() const { return index_; }
  uint32_t subnet() const { return subnet_; }       // the /30's network address
  uint32_t gateway() const { return subnet_ + 1; }  // host (uplink) end of the veth
  uint32_t sandbox() const { return subnet_ + 2; }  // sandbox end
  static constexpr int kPrefix = 30;
  bool held() const { return fd_.valid(); }

  // Empties the record and unlocks: the slot is free.
  Status Clear();

 private:
  friend class AddressPool;
  UniqueFd fd_;
  uint32_t index_ = 0;
  uint32_t subnet_ = 0;
};

class AddressPool {
 public:
  // Parses cfg.pool_cidr and creates <state_dir>/slots (0700) when missing.
  static Result<AddressPool> Open(const std::string& pool_cidr, const std::string& state_dir,
                                  uint32_t max_slots);

  // Takes the lowest free slot and writes `record` into it. A stale slot met on the way is handed
  // to `cleaner` first; if cleaning fails the slot is skipped (never reused while its resources
  // may still exist). ResourceExhausted when every slot is held.
  Result<SlotLease> Acquire(const SlotRecord& record, const StaleCleaner& cleaner) const;

  // Cleans every stale slot (unlocked, non-empty record). Returns the first cleaning error after
  // trying them all; `cleaned` (optional) receives how many were cleaned.
  Status CleanStale(const StaleCleaner& cleaner, int* cleaned = nullptr) const;

  // Slots whose record is non-empty (held or stale): for leak checks.
  Result<int> CountRecords() const;

  uint32_t base() const { return base_; }
  int prefix() const { return prefix_; }
  uint32_t slot_count() const { return slots_; }
  // True when addr (host order) lies inside the pool.
  bool Contains(uint32_t addr) const;

 private:
  std::string SlotPath(uint32_t index) const;
  uint32_t base_ = 0;
  int prefix_ = 0;
  uint32_t slots_ = 0;
  std::string dir_;
};

}  // namespace safex::drivers::net
