// Median wall time of RunNetwork set-up and teardown with one egress rule (namespace + veth +
// addresses + routes + both nftables rulesets + address slot), against an uplink namespace this
// benchmark creates (the host's own network is never touched). Run as root:
//   build/bench/net/net_bench [iterations]
// Prints create / teardown / total medians and p90 in milliseconds, for the synchronous
// Teardown() and for TeardownInBackground() (the time a run waits; the removal finishes on a
// background thread, drained between iterations and timed separately).
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "drivers/net/netns.h"
#include "drivers/net/nft.h"
#include "drivers/net/run_network.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace safex::drivers::net;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "net_bench: needs root\n");
    return 2;
  }
  const std::string id = std::to_string(::getpid());
  const std::string uplink_name = "sxb-u-" + id;
  // The uplink: a namespace of our own, pinned like the run namespaces.
  auto uplink = CreatePinnedNetns("/run/netns", uplink_name);
  if (!uplink.ok()) {
    std::fprintf(stderr, "net_bench: %s\n", uplink.status().ToString().c_str());
    return 1;
  }
  NetworkConfig cfg;
  cfg.uplink_netns = "/run/netns/" + uplink_name;
  cfg.state_dir = "/run/safex-bench-net-" + id;
  cfg.pool_cidr = "198.18.128.0/24";

  ResolvedEgress e;
  e.rule = {"198.18.1.10", 443, safex::plan::Protocol::kTcp};
  e.literal = true;
  e.addresses.push_back(*safex::plan::IpAddress::Parse("198.18.1.10"));

  struct Series {
    std::vector<double> create, teardown, total, drain;
  };
  Series sync, background;
  int rc = 0;
  for (int mode = 0; mode < 2 && rc == 0; ++mode) {
    Series& out = mode == 0 ? sync : background;
    for (int i = 0; i < iterations + 5; ++i) {
      auto t0 = Clock::now();
      auto net = RunNetwork::Create(
          cfg, "bench-" + id + "-" + std::to_string(mode) + "-" + std::to_string(i), {e});
      auto t1 = Clock::now();
      if (!net.ok()) {
        std::fprintf(stderr, "net_bench: %s\n", net.status().ToString().c_str());
        rc = 1;
        break;
      }
      safex::Status st;
      if (mode == 0) {
        st = net->Teardown();  // reads the drop counters first, as every run's audit event does
      } else {
        net->TeardownInBackground();
      }
      auto t2 = Clock::now();
      if (mode == 1) st = WaitForBackgroundTeardowns();
      auto t3 = Clock::now();
      if (!st.ok()) {
        std::fprintf(stderr, "net_bench: %s\n", st.ToString().c_str());
        rc = 1;
        break;
      }
      if (i < 5) continue;  // warm-up
      out.create.push_back(Ms(t1 - t0));
      out.teardown.push_back(Ms(t2 - t1));
      out.total.push_back(Ms(t2 - t0));
      out.drain.push_back(Ms(t3 - t2));
    }
  }
  CloseSharedNftContexts();
  uplink->Reset();
  (void)RemoveNetnsPin(cfg.uplink_netns);
  std::string slots = cfg.state_dir + "/slots";
  for (int i = 0; i < 64; ++i) ::unlink((slots + "/" + std::to_string(i)).c_str());
  ::rmdir(slots.c_str());
  ::rmdir(cfg.state_dir.c_str());
  if (rc != 0) return rc;
  auto row = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-34s median %7.2f  p90 %7.2f\n", what, Percentile(v, 0.5), Percentile(v, 0.9));
  };
  std::printf("RunNetwork, 1 egress rule, %d iterations per mode (ms)\n", iterations);
  std::printf("synchronous Teardown():\n");
  row("create", sync.create);
  row("teardown (counters + removal)", sync.teardown);
  row("create + teardown", sync.total);
  std::printf("TeardownInBackground():\n");
  row("create", background.create);
  row("teardown on the run's path", background.teardown);
  row("create + teardown on the run's path", background.total);
  row("background removal, waited after", background.drain);
  return 0;
}
