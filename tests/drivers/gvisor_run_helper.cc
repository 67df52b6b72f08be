// gvisor_run_helper RUN_ID ARGV...: runs one sandbox through GvisorDriver (the test plan, an
// output mount at /out) and blocks until it ends. The crash-recovery test SIGKILLs this process
// mid-run to leave behind what a crashed supervisor would.
#include <cstdio>

#include "drivers/gvisor/gvisor_driver.h"
#include "tests/drivers/test_plans.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  safex::plan::Plan p = safex::drivers::testing::BasePlan();
  p.mounts.push_back(safex::drivers::testing::Output("/out", 1 << 20));
  safex::drivers::GvisorDriver driver;
  safex::drivers::RunRequest req;
  req.run_id = argv[1];
  for (int i = 2; i < argc; ++i) req.argv.push_back(argv[i]);
  auto r = driver.Run(p, req);
  std::printf("%s\n", r.ok() ? "done" : r.status().ToString().c_str());
  return r.ok() ? 0 : 1;
}
