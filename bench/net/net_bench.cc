// Median wall time of RunNetwork set-up and teardown with one egress rule (namespace + veth +
// addresses + routes + both nftables rulesets + address slot), against an uplink namespace this
// benchmark creates (the host's own network is never touched). Run as root:
//   build/bench/net/net_bench [iterations]
// Prints create / teardown / total medians and p90 in milliseconds.
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

  std::vector<double> create, teardown, total;
  int rc = 0;
  for (int i = 0; i < iterations + 5; ++i) {
    auto t0 = Clock::now();
    auto net = RunNetwork::Create(cfg, "bench-" + id + "-" + std::to_string(i), {e});
    auto t1 = Clock::now();
    if (!net.ok()) {
      std::fprintf(stderr, "net_bench: %s\n", net.status().ToString().c_str());
      rc = 1;
      break;
    }
    (void)net->DeniedCount();  // the audit event reads the counters at the end of every run
    auto st = net->Teardown();
    auto t2 = Clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "net_bench: %s\n", st.ToString().c_str());
      rc = 1;
      break;
    }
    if (i < 5) continue;  // warm-up
    create.push_back(Ms(t1 - t0));
    teardown.push_back(Ms(t2 - t1));
    total.push_back(Ms(t2 - t0));
  }
  (void)uplink->Release();
  (void)RemoveNetnsPin(cfg.uplink_netns);
  std::string slots = cfg.state_dir + "/slots";
  for (int i = 0; i < 64; ++i) ::unlink((slots + "/" + std::to_string(i)).c_str());
  ::rmdir(slots.c_str());
  ::rmdir(cfg.state_dir.c_str());
  if (rc != 0 || total.empty()) return rc;
  std::printf("RunNetwork, 1 egress rule, %zu iterations (ms)\n", total.size());
  std::printf("  create    median %7.2f  p90 %7.2f\n", Percentile(create, 0.5),
              Percentile(create, 0.9));
  std::printf("  teardown  median %7.2f  p90 %7.2f  (includes reading the drop counters)\n",
              Percentile(teardown, 0.5), Percentile(teardown, 0.9));
  std::printf("  total     median %7.2f  p90 %7.2f\n", Percentile(total, 0.5),
              Percentile(total, 0.9));
  return 0;
}
