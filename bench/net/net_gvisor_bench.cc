// Added wall time of a gVisor run with egress versus one with --network=none: the same plan and
// program (/bin/true), N runs each, alternating, through GvisorDriver; the egress runs get a
// RunNetwork (synchronous teardown, as the driver calls it) in an uplink namespace this benchmark
// creates. Run as root: build/bench/net/net_gvisor_bench [runs-per-mode]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/net/netns.h"
#include "drivers/net/nft.h"
#include "drivers/net/run_network.h"

namespace {

using namespace safex;
using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

plan::Mount BindRo(const std::string& p) {
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = m.target = p;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 30;
  const std::string id = std::to_string(::getpid());
  auto uplink = drivers::net::CreatePinnedNetns("/run/netns", "sxb-gu-" + id);
  if (!uplink.ok()) {
    std::fprintf(stderr, "%s\n", uplink.status().ToString().c_str());
    return 1;
  }
  drivers::net::NetworkConfig cfg;
  cfg.uplink_netns = "/run/netns/sxb-gu-" + id;
  cfg.state_dir = "/run/safex-bench-gvnet-" + id;
  cfg.pool_cidr = "198.18.130.0/24";
  drivers::GvisorOptions options;
  options.network_provider =
      [cfg](const plan::Plan& p,
            const std::string& run_id) -> Result<std::unique_ptr<drivers::net::RunNetwork>> {
    SAFEX_ASSIGN_OR_RETURN(auto resolved,
                           drivers::net::ResolveEgress(p.network.egress, plan::Ceilings{},
                                                       drivers::net::SystemResolver()));
    SAFEX_ASSIGN_OR_RETURN(auto n, drivers::net::RunNetwork::Create(cfg, run_id, resolved));
    return std::make_unique<drivers::net::RunNetwork>(std::move(n));
  };
  drivers::GvisorDriver driver(std::move(options));
  int rc = 0;
  if (Status st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    rc = 1;
  }
  plan::Plan p;
  p.policy_name = "net-bench";
  p.limits = {30'000'000'000ull, 10'000'000'000ull, 256ull << 20, 64, 256, 1 << 20, 64ull << 20, 1};
  p.mounts = {BindRo("/usr"), BindRo("/lib"), BindRo("/lib64"), BindRo("/bin")};
  p.env = {{"PATH", "/usr/bin:/bin"}};
  plan::Plan with = p;
  with.network.egress = {{"198.18.1.10", 443, plan::Protocol::kTcp}};
  std::vector<double> none_ms, egress_ms;
  for (int i = 0; i < runs + 2 && rc == 0; ++i) {
    for (int mode = 0; mode < 2; ++mode) {
      drivers::RunRequest req;
      req.run_id = "nb" + id + "-" + std::to_string(mode) + "-" + std::to_string(i);
      req.argv = {"/bin/true"};
      auto t0 = Clock::now();
      auto r = driver.Run(mode == 0 ? p : with, req);
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r.ok() || r->exit_code != 0) {
        std::fprintf(stderr, "run failed: %s\n",
                     r.ok() ? r->stderr_stream.data.c_str() : r.status().ToString().c_str());
        rc = 1;
        break;
      }
      if (i < 2) continue;  // warm-up
      (mode == 0 ? none_ms : egress_ms).push_back(ms);
    }
  }
  drivers::net::CloseSharedNftContexts();
  uplink->Reset();
  (void)drivers::net::RemoveNetnsPin(cfg.uplink_netns);
  for (int i = 0; i < 64; ++i) ::unlink((cfg.state_dir + "/slots/" + std::to_string(i)).c_str());
  ::rmdir((cfg.state_dir + "/slots").c_str());
  ::rmdir(cfg.state_dir.c_str());
  if (rc != 0) return rc;
  std::printf(
      "gVisor /bin/true, %d runs per mode (ms): network=none median %.1f, "
      "egress (netns + veth + rules) median %.1f, added %.1f\n",
      runs, Median(none_ms), Median(egress_ms), Median(egress_ms) - Median(none_ms));
  return 0;
}
