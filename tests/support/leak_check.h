// Leak checker for integration tests: what sandbox resources exist on the machine before and after.
//
// A snapshot lists, as readable strings ("kind: detail"):
//   process  runsc, runsc-gofer, runsc-sandbox and their stubs (exe -> runsc), qemu-system-*, and
//            every descendant of the test process (a child not reaped is a leak too)
//   cgroup   every directory below <parent> (default "safex") in every hierarchy (v1 and v2)
//   netns    /run/netns pins, and every network namespace inode held by any process
//   link     virtual network links of the host namespace (veths among them)
//   nft      nftables tables of the host namespace whose name starts with "safex"
//   mount    mounts whose source, mount point or options mention "safex", or under the state root
//   state    entries under the state root (runsc state / run directories), /run/runsc,
//            /run/safex-* (other components' state directories)
//   tmp      /tmp/safex-*
//
// Usage:
//   auto before = safex::testing::LeakSnapshot::Take();
//   ... runs ...
//   SAFEX_EXPECT_NO_LEAKS(before);   // waits up to a few seconds for teardown to settle
// or derive a fixture from safex::testing::LeakCheckedTest.
//
// Snapshots are machine-wide: integration tests must not run concurrently with other tests that
// create sandbox resources (safex_gtest gives integration/containment tests a shared
// RESOURCE_LOCK for that reason).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace safex::testing {

struct LeakCheckOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  std::vector<std::string> cgroup_parents = {"safex"};
  std::string state_root = "/run/safex";
};

struct LeakSnapshot {
  std::set<std::string> items;
  static LeakSnapshot Take(const LeakCheckOptions& options = {});
};

// Items in `after` that were not in `before` (sorted).
std::vector<std::string> Diff(const LeakSnapshot& before, const LeakSnapshot& after);

// Takes snapshots until nothing new remains or `settle` has passed (other processes' teardown,
// e.g. init reaping orphaned zombies, can lag a little); returns the last difference.
std::vector<std::string> WaitForNoLeaks(const LeakSnapshot& before,
                                        std::chrono::milliseconds settle = std::chrono::seconds(5),
                                        const LeakCheckOptions& options = {});

std::string JoinLines(const std::vector<std::string>& lines);

// Everything on the machine that still carries one run's name: entries under the state roots
// (options.state_root, /run/safex, /var/lib/safex/microvm/runs) and cgroup directories below
// options.cgroup_parents whose names contain `run_id`, processes whose command line names it,
// mounts naming it, its network namespace pin (safex-<run id>), its host veth (sx<12 hex of
// SHA-256(run id)>) and, when `check_nft`, its uplink nftables table (safex_<same>). Precise where
// a machine-wide snapshot is not: other tests' resources never match. Empty when nothing is left.
std::vector<std::string> ResourcesNamingRun(const std::string& run_id,
                                            const LeakCheckOptions& options = {},
                                            bool check_nft = false);

// Fixture: snapshot in SetUp, EXPECT no leaks in TearDown.
class LeakCheckedTest : public ::testing::Test {
 protected:
  void SetUp() override { leak_before_ = LeakSnapshot::Take(); }
  void TearDown() override {
    std::vector<std::string> leaks = WaitForNoLeaks(leak_before_);
    EXPECT_TRUE(leaks.empty()) << "resources left behind:\n" << JoinLines(leaks);
  }
  LeakSnapshot leak_before_;
};

}  // namespace safex::testing

#define SAFEX_EXPECT_NO_LEAKS(before)                                                   \
  do {                                                                                  \
    std::vector<std::string> safex_leaks_ = ::safex::testing::WaitForNoLeaks(before);   \
    EXPECT_TRUE(safex_leaks_.empty())                                                   \
        << "resources left behind:\n" << ::safex::testing::JoinLines(safex_leaks_);     \
  } while (0)
