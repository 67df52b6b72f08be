// native_run_helper RUN_ID ARGV...: runs one native sandbox through NativeDriver (the test plan)
// and blocks until it ends. The crash-recovery test SIGKILLs this process mid-run to leave behind
// what a crashed supervisor would.
#include <cstdio>

#include "tests/native/native_test_fixture.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  safex::drivers::NativeDriver driver;
  safex::drivers::RunRequest req;
  req.run_id = argv[1];
  for (int i = 2; i < argc; ++i) req.argv.push_back(argv[i]);
  auto r = driver.Run(safex::drivers::testing::NativePlan(), req);
  std::printf("%s\n", r.ok() ? "done" : r.status().ToString().c_str());
  return r.ok() ? 0 : 1;
}
