// What `safex check` costs inside the process: read, parse, resolve extends, lower, tighten,
// verify. Goals: < 5 ms per example policy, < 100 ms for a 5,000-line policy.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "compiler/compiler.h"
#include "compiler/host_config.h"
#include "plan/verify.h"

namespace {

const char* kExamples[] = {"base-untrusted",   "python-untrusted", "node-untrusted",
                           "compile-and-test", "notebook-egress",  "trusted-tool"};

safex::compiler::CompileOptions Options() {
  safex::compiler::CompileOptions opt;
  auto c = safex::compiler::LoadHostConfig(std::string(SAFEX_BENCH_SOURCE_DIR) +
                                           "/policies/host.policy");
  if (c.ok()) opt.ceilings = *c;
  return opt;
}

void BM_CheckExample(benchmark::State& state) {
  std::string path = std::string(SAFEX_BENCH_SOURCE_DIR) + "/policies/examples/" +
                     kExamples[state.range(0)] + ".policy";
  auto opt = Options();
  for (auto _ : state) {
    auto r = safex::compiler::CompileFile(path, opt);
    if (!r.ok()) state.SkipWithError("example does not compile");
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(kExamples[state.range(0)]);
}
BENCHMARK(BM_CheckExample)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

// A valid policy of exactly 5,000 lines: every section, 320 syscall rules, 250 environment
// variables, 60 validators with 30 patterns each (one statement per line), comments for the rest.
std::string Generated5000() {
  std::string s =
      "policy \"big\" {\n  trust = untrusted\n  isolation = gvisor\n  limits {\n"
      "    wall_time = 30s\n    cpu_time = 20s\n    memory = 512MiB\n    pids = 64\n"
      "    open_files = 256\n    output = 64MiB\n    disk = 64MiB\n    cpus = 1\n  }\n"
      "  rootfs host_readonly [\"/usr\", \"/lib\"]\n"
      "  mount tmpfs at \"/tmp\" { size = 64MiB }\n"
      "  mount output at \"/out\" { size = 16MiB }\n"
      "  outputs {\n    max_files = 16\n    max_total = 16MiB\n  }\n"
      "  network {\n    egress \"pypi.org:443\"\n  }\n";
  s += "  syscalls {\n    default = allow\n";
  const auto& names = safex::plan::KnownSyscalls();
  for (size_t i = 0; i < names.size() && i < 320; ++i) s += "    deny [" + names[i] + "]\n";
  s += "  }\n  env {\n";
  for (int i = 0; i < 250; ++i)
    s += "    set VAR_" + std::to_string(i) + " = \"value " + std::to_string(i) + "\"\n";
  s += "  }\n";
  for (int v = 0; v < 60; ++v) {
    s += "  validate stdout {\n    max = 1MiB\n";
    for (int k = 0; k < 30; ++k) {
      s += "    reject /secret_" + std::to_string(v) + "_" + std::to_string(k) + "_[0-9a-f]{8}/\n";
    }
    s += "  }\n";
  }
  size_t lines = 0;
  for (char c : s) lines += c == '\n';
  while (lines < 4999) {
    s += "  # padding comment line " + std::to_string(lines) + "\n";
    ++lines;
  }
  s += "}\n";
  return s;
}

void BM_Check5000Lines(benchmark::State& state) {
  char dir[] = "/tmp/safex-bench.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    state.SkipWithError("mkdtemp");
    return;
  }
  std::string path = std::string(dir) + "/big.policy";
  std::ofstream(path) << Generated5000();
  auto opt = Options();
  for (auto _ : state) {
    auto r = safex::compiler::CompileFile(path, opt);
    if (!r.ok()) state.SkipWithError(safex::compiler::RenderAll(r).substr(0, 300).c_str());
    benchmark::DoNotOptimize(r);
  }
  unlink(path.c_str());
  rmdir(dir);
}
BENCHMARK(BM_Check5000Lines)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
