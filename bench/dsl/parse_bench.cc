// Parse and format speed: a typical ~40-line policy, and a generated 5,000-line one (the goal is
// well under 100 ms for a whole `safex check` of it; the parse is a small part of that).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "dsl/formatter.h"
#include "dsl/parser.h"

namespace {

constexpr char kTypical[] = R"policy(# A typical policy: untrusted Python with a package index.
policy "python-untrusted" extends "base-untrusted" {
  trust     = untrusted
  isolation = gvisor                 # gvisor | microvm | native(trusted only)
  limits {
    wall_time = 30s   cpu_time = 20s   memory = 512MiB
    pids = 64         open_files = 256 output = 1MiB   disk = 64MiB
  }
  rootfs host_readonly ["/usr", "/lib", "/lib64", "/bin"]
  mount tmpfs at "/tmp" { size = 64MiB }
  mount input at "/data/in" { mode = ro }
  mount output at "/data/out" { size = 16MiB }
  network {
    default = deny
    egress "pypi.org:443"
    egress "files.pythonhosted.org:443"
  }
  env {
    set PYTHONDONTWRITEBYTECODE = "1"
    set LANG = "C.UTF-8"
  }
  syscalls {
    default = allow
    deny [ptrace, mount, umount2, bpf, keyctl, userfaultfd, io_uring_setup, perf_event_open]
  }
  validate stdout { max = 64KiB  utf8 = true  reject /AKIA[0-9A-Z]{16}/ }
  validate stderr { max = 64KiB }
  validate file "/data/out/result.json" { json = true  max = 1MiB }
  @override("SEC-123: pandas needs it") memory = 1GiB
  test "egress is limited" {
    run ["python3", "-c", "import urllib.request; urllib.request.urlopen('https://example.com')"]
    expect verdict = nonzero-exit
  }
  test "writes its result" {
    run ["python3", "-c", "open('/data/out/result.json', 'w').write('{}')"]
    expect verdict = ok
    expect file "/data/out/result.json"
  }
}
)policy";

// At least `lines` lines (a few more): policies of ~60 lines each, with every kind of value and
// comments.
std::string Generated(int lines) {
  std::string out;
  int n = 0;
  int policy = 0;
  char buf[256];
  while (n < lines) {
    std::snprintf(buf, sizeof buf, "# generated policy %d\npolicy \"p%d\" extends \"base\" {\n",
                  policy, policy);
    out += buf;
    out += "  trust = untrusted\n  isolation = gvisor  # comment\n  limits {\n";
    out += "    wall_time = 30s   cpu_time = 20s   memory = 512MiB\n";
    out += "    pids = 64         open_files = 256 output = 1MiB   disk = 64MiB\n  }\n";
    for (int i = 0; i < 10; ++i) {
      std::snprintf(buf, sizeof buf, "  mount tmpfs at \"/tmp/%d\" { size = %dMiB }\n", i, i + 1);
      out += buf;
    }
    out += "  network {\n    default = deny\n";
    for (int i = 0; i < 10; ++i) {
      std::snprintf(buf, sizeof buf, "    egress \"host%d.example.org:443\"\n", i);
      out += buf;
    }
    out += "  }\n  env {\n";
    for (int i = 0; i < 10; ++i) {
      std::snprintf(buf, sizeof buf, "    set VAR_%d = \"value \\\"%d\\\" \\u{e9}\"\n", i, i);
      out += buf;
    }
    out += "  }\n  syscalls {\n    default = allow\n    deny [\n";
    out += "      ptrace,  # debuggers\n      mount, umount2, bpf, keyctl,\n    ]\n  }\n";
    out += "  validate stdout { max = 64KiB  utf8 = true  reject /AKIA[0-9A-Z]{16}/ }\n";
    out += "  @override(\"SEC-1\") memory = 1GiB\n}\n\n";
    n = static_cast<int>(std::count(out.begin(), out.end(), '\n'));
    ++policy;
  }
  return out;
}

void BM_ParseTypical(benchmark::State& state) {
  const std::string text = kTypical;
  for (auto _ : state) {
    safex::dsl::ParseResult r = safex::dsl::Parse("typical.policy", text);
    if (!r.ok()) state.SkipWithError("typical policy does not parse");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ParseTypical);

void BM_ParseGenerated5000Lines(benchmark::State& state) {
  const std::string text = Generated(5000);
  for (auto _ : state) {
    safex::dsl::ParseResult r = safex::dsl::Parse("big.policy", text);
    if (!r.ok()) state.SkipWithError("generated policy does not parse");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes"] = static_cast<double>(text.size());
  state.counters["lines"] = static_cast<double>(std::count(text.begin(), text.end(), '\n'));
}
BENCHMARK(BM_ParseGenerated5000Lines)->Unit(benchmark::kMillisecond);

void BM_FormatGenerated5000Lines(benchmark::State& state) {
  const std::string text = Generated(5000);
  const safex::dsl::ParseResult r = safex::dsl::Parse("big.policy", text);
  if (!r.ok()) {
    state.SkipWithError("generated policy does not parse");
    return;
  }
  for (auto _ : state) {
    std::string out = safex::dsl::Format(r.file);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_FormatGenerated5000Lines)->Unit(benchmark::kMillisecond);

// The worst case for recovery: a 5,000-line file where every line is an error (capped at 100).
void BM_ParseAllErrors(benchmark::State& state) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "memory = 512MB\n";
  for (auto _ : state) {
    safex::dsl::ParseResult r = safex::dsl::Parse("bad.policy", text);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ParseAllErrors)->Unit(benchmark::kMillisecond);

// Hostile: 100,000 nested brackets in 1 MiB.
void BM_ParseDeepNesting(benchmark::State& state) {
  const std::string text = "a = " + std::string(1000000, '[');
  for (auto _ : state) {
    safex::dsl::ParseResult r = safex::dsl::Parse("deep.policy", text);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ParseDeepNesting)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
