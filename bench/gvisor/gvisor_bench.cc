// GvisorDriver::Run versus a bare `runsc run` of an equivalent bundle, side by side in one
// process: /bin/true and `python3 -c pass`, N runs per case, interleaved so that machine load
// affects every case alike. Reports the median wall time of each and the ratio to bare runsc.
//
//   raw          runsc --network=none --oci-seccomp --overlay2=none run (runsc makes its cgroup)
//   raw+flags    the same plus the driver's --strace (fork-like syscalls) and --debug-log pipe
//   driver       GvisorDriver::Run: private dir, rootfs, cgroup, spec, runsc, supervision,
//                accounting reads, teardown (delete, cgroup rmdir, unmount, rm -r)
//
// Run as root: build/bench/gvisor/gvisor_bench [runs-per-case]   (default 20)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench/gvisor/raw_runsc.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "drivers/gvisor/gvisor_driver.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/rootfs.h"
#include "drivers/run_dir.h"

namespace {

using namespace safex;
namespace gvisor = safex::drivers::gvisor;
using Clock = std::chrono::steady_clock;
using bench::Median;
using bench::RawBundle;
using bench::RawRun;

plan::Mount BindRo(const std::string& p) {
  plan::Mount m;
  m.kind = plan::MountKind::kBind;
  m.source = m.target = p;
  return m;
}

plan::Plan BenchPlan() {
  plan::Plan p;
  p.backend = plan::Backend::kGvisor;
  p.limits = {30'000'000'000ull, 30'000'000'000ull, 256ull << 20, 64, 256, 1 << 20, 64ull << 20, 1};
  p.mounts = {BindRo("/usr"), BindRo("/lib"), BindRo("/lib64"), BindRo("/bin")};
  plan::Mount tmp;
  tmp.kind = plan::MountKind::kTmpfs;
  tmp.target = "/tmp";
  tmp.read_only = false;
  tmp.size_bytes = 16 << 20;
  tmp.noexec = true;
  p.mounts.push_back(tmp);
  p.env = {{"PATH", "/usr/bin:/bin"}};
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  drivers::GvisorDriver driver;
  if (Status st = driver.Probe(); !st.ok()) {
    std::fprintf(stderr, "gvisor unavailable: %s\n", st.ToString().c_str());
    return 1;
  }
  struct Case {
    const char* name;
    std::vector<std::string> argv;
    RawBundle bundle;
    std::vector<double> raw, raw_flags, drv, drv_cpu;
  };
  std::vector<Case> cases;
  cases.push_back({"/bin/true", {"/bin/true"}, {}, {}, {}, {}, {}});
  cases.push_back({"python3 -c pass", {"/usr/bin/python3", "-c", "pass"}, {}, {}, {}, {}, {}});
  plan::Plan plan = BenchPlan();
  for (size_t c = 0; c < cases.size(); ++c) {
    if (Status st = cases[c].bundle.Make(plan, cases[c].argv, std::to_string(c)); !st.ok()) {
      std::fprintf(stderr, "bundle: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  int n = 0;
  for (int i = 0; i < runs; ++i) {
    for (Case& c : cases) {
      auto raw = RawRun(c.bundle, n++, false);
      auto rawf = RawRun(c.bundle, n++, true);
      drivers::RunRequest req;
      req.run_id = "bench-" + std::to_string(getpid()) + "-" + std::to_string(n++);
      req.argv = c.argv;
      auto t0 = Clock::now();
      auto r = driver.Run(plan, req);
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!raw.ok() || !rawf.ok() || !r.ok() || r->exit_code != 0) {
        std::fprintf(stderr, "run failed: %s %s %s\n", raw.status().ToString().c_str(),
                     rawf.status().ToString().c_str(), r.status().ToString().c_str());
        return 1;
      }
      c.raw.push_back(*raw);
      c.raw_flags.push_back(*rawf);
      c.drv.push_back(ms);
      c.drv_cpu.push_back(static_cast<double>(r->cpu_ns) / 1e6);
    }
  }
  std::printf("gvisor_bench: %d runs per case, runsc %s, median wall ms\n", runs,
              driver.runsc_version().c_str());
  std::printf("%-18s %10s %12s %10s %14s %16s\n", "program", "raw", "raw+flags", "driver",
              "driver/raw", "driver cgroup CPU");
  for (Case& c : cases) {
    double raw = Median(c.raw), rawf = Median(c.raw_flags), drv = Median(c.drv);
    std::printf("%-18s %10.1f %12.1f %10.1f %13.2fx %14.1f ms\n", c.name, raw, rawf, drv, drv / raw,
                Median(c.drv_cpu));
  }
  return 0;
}
