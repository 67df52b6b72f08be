// The fixture of the daemon's integration tests: a ServeHarness started with a leak snapshot
// taken while the daemon idles, the check that nothing is left behind, and requests sent as
// another local user.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/serve/serve_harness.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_support.h"

namespace safex::testing {

// Sends `request` on a fresh connection from a forked child running as uid/gid (no
// supplementary groups) and returns what the daemon answered.
std::string RequestAs(uid_t uid, gid_t gid, const std::string& socket, const std::string& request);

// A test of a microVM through the service: QEMU and the guest scripts/install-deps.sh installs
// (the service uses the installed guest, not this build's).
#define SAFEX_REQUIRE_INSTALLED_GUEST()                                                  \
  SAFEX_REQUIRE(access("/usr/bin/qemu-system-x86_64", X_OK) == 0 &&                      \
                    access("/usr/local/lib/safex/guest/vmlinuz", R_OK) == 0 &&           \
                    access("/usr/local/lib/safex/guest/initramfs.cpio", R_OK) == 0,      \
                "QEMU and the installed guest (scripts/install-deps.sh)")

class ServeFixture : public ::testing::Test {
 protected:
  // base-untrusted under the microVM backend, as policy "base-microvm".
  void WriteMicrovmPolicy() {
    h_.dir().Write(
        "policies/base-microvm.policy",
        "policy \"base-microvm\" extends \"base-untrusted\" {\n  isolation = microvm\n}\n");
  }

  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
  }

  LeakCheckOptions LeakOptions() {
    LeakCheckOptions o;
    o.state_root = h_.state_dir();
    return o;
  }
  // Snapshot once the daemon is up (its lock file and input directory are part of the baseline).
  // The daemon itself is in the snapshot ("process: PID [child] state=S ..."), and the leak
  // checker compares whole lines: a baseline taken while the daemon happened to be runnable
  // (state=R, likely on a loaded machine just after it answered /v1/health) would never match the
  // idle daemon later and read as a leak. So the baseline is one where the daemon sleeps in its
  // event loop, as it does whenever it has nothing to do, and every other process of the test's
  // (a private PostgreSQL server and its workers) sleeps too: CI once failed ServeShipTest on a
  // postmaster that was runnable in the baseline and asleep at the end, and one caught in disk
  // wait (D) or not yet reaped (Z) would do the same.
  void StartAndSnapshot(const ServeOptions& o = {}) {
    std::string err = h_.Start(o);
    ASSERT_EQ(err, "");
    const std::string idle = "process: " + std::to_string(h_.pid()) + " [child] state=S ";
    auto all_asleep = [this] {
      return std::none_of(before_.items.begin(), before_.items.end(), [](const std::string& i) {
        return i.starts_with("process: ") && i.find(" [child] state=") != std::string::npos &&
               i.find(" [child] state=S ") == std::string::npos;
      });
    };
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      before_ = LeakSnapshot::Take(LeakOptions());
      auto it = before_.items.lower_bound(idle);
      if (it != before_.items.end() && it->starts_with(idle) && all_asleep()) break;
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "the daemon and the test's other processes never showed as all sleeping:\n"
          << JoinLines({before_.items.begin(), before_.items.end()});
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void ExpectNoLeaks() {
    auto leaks = WaitForNoLeaks(before_, std::chrono::seconds(10), LeakOptions());
    EXPECT_TRUE(leaks.empty()) << "left behind:\n" << JoinLines(leaks);
    // No run record is left for a run that ended.
    std::string records = h_.dir().Join("runs");
    if (std::filesystem::exists(records)) {
      for (const auto& e : std::filesystem::directory_iterator(records)) {
        // The boot marker of the sweep (supervisor/sweep.h) is state kept on purpose.
        if (e.path().filename().string().starts_with(".boot-swept-")) continue;
        ADD_FAILURE() << "run record left: " << e.path();
      }
    }
  }

  ServeHarness h_;
  LeakSnapshot before_;
};

}  // namespace safex::testing
