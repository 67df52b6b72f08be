// Throughput of the output validators on realistic program output.
// Goal (issue): >= 200 MiB/s for size + UTF-8 + a 10-pattern RE2 reject set on 100 MiB.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "supervisor/output/json_check.h"
#include "supervisor/output/stream_validator.h"
#include "supervisor/output/text_scan.h"

namespace safex::output {
namespace {

constexpr size_t kMiB = 1 << 20;

// Secret shapes a policy would plausibly reject or redact.
const std::vector<std::string>& TenPatterns() {
  static const std::vector<std::string> p = {
      "AKIA[0-9A-Z]{16}",
      "-----BEGIN [A-Z ]*PRIVATE KEY-----",
      "gh[pousr]_[A-Za-z0-9]{36}",
      "github_pat_[A-Za-z0-9_]{82}",
      "xox[baprs]-[0-9A-Za-z-]{10,48}",
      "AIza[0-9A-Za-z_-]{35}",
      "sk_live_[0-9a-zA-Z]{24}",
      "eyJ[A-Za-z0-9_-]{10,}\\.eyJ[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]{10,}",
      "(?i)password\\s*[:=]\\s*\\S{6,}",
      "glpat-[0-9A-Za-z_-]{20}",
  };
  return p;
}

// Log lines, JSON lines, some non-ASCII; no secrets. Deterministic.
std::string RealisticOutput(size_t bytes) {
  std::mt19937_64 rng(42);
  static const char* kLevels[] = {"INFO", "DEBUG", "WARN", "ERROR"};
  static const char* kWords[] = {
      "processed", "request", "cache", "miss", "retrying", "connected", "worker", "batch",
      "completed", "café",    "naïve", "東京", "résumé",   "€",         "items",  "latency"};
  std::string out;
  out.reserve(bytes + 512);
  char buf[512];
  while (out.size() < bytes) {
    const uint64_t r = rng();
    if (r % 10 == 0) {
      snprintf(buf, sizeof buf,
               "{\"ts\":%llu,\"event\":\"%s\",\"id\":\"%016llx\",\"values\":[%llu,%llu,%llu],"
               "\"ok\":%s}\n",
               static_cast<unsigned long long>(1700000000000ULL + r % 100000000), kWords[r % 16],
               static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(r % 1000),
               static_cast<unsigned long long>(r % 77), static_cast<unsigned long long>(r % 13),
               (r & 1) ? "true" : "false");
    } else {
      snprintf(buf, sizeof buf,
               "2024-05-01T12:%02llu:%02llu.%03lluZ %s worker-%llu %s %s id=%llx "
               "path=/api/v1/items/%llu status=%d duration_ms=%llu.%llu\n",
               static_cast<unsigned long long>(r % 60),
               static_cast<unsigned long long>(r / 60 % 60),
               static_cast<unsigned long long>(r % 1000), kLevels[r % 4],
               static_cast<unsigned long long>(r % 8), kWords[(r >> 8) % 16],
               kWords[(r >> 16) % 16], static_cast<unsigned long long>(rng()),
               static_cast<unsigned long long>(r % 100000), (r & 7) ? 200 : 404,
               static_cast<unsigned long long>(r % 500), static_cast<unsigned long long>(r % 10));
    }
    out += buf;
  }
  out.resize(bytes);
  // Do not end inside a UTF-8 sequence.
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
  return out;
}

const std::string& Output100MiB() {
  static const std::string s = RealisticOutput(100 * kMiB);
  return s;
}

ValidatorSet Set(bool strip, plan::RegexAction action) {
  plan::Validator v;
  v.target = plan::ValidatorTarget::kStdout;
  v.max_bytes = 128 * kMiB;
  v.on_overflow = plan::OverflowAction::kReject;
  v.utf8 = true;
  if (strip) v.control = plan::ControlChars::kStrip;
  for (const std::string& p : TenPatterns()) v.regex.push_back({p, action, "[REDACTED]"});
  Result<ValidatorSet> r = ValidatorSet::Compile({v});
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

// The goal: size + UTF-8 + 10-pattern RE2 set, plus the report's SHA-256 digest. The
// supervisor owns the captured bytes and hands them over (no copy of what is delivered).
void BM_StreamSizeUtf8Regex10(benchmark::State& state) {
  const std::string& out = Output100MiB();
  const ValidatorSet set = Set(false, plan::RegexAction::kReject);
  for (auto _ : state) {
    state.PauseTiming();
    std::string captured = out;
    state.ResumeTiming();
    ValidationReport r = set.ValidateStreamOwned(plan::ValidatorTarget::kStdout,
                                                 std::move(captured), out.size(), false);
    if (r.rejected) state.SkipWithError("rejected");
    benchmark::DoNotOptimize(r);
    state.PauseTiming();
    r = ValidationReport();  // free outside the timing
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_StreamSizeUtf8Regex10)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same through the string_view overload (the delivered text is copied).
void BM_StreamSizeUtf8Regex10Copy(benchmark::State& state) {
  const std::string& out = Output100MiB();
  const ValidatorSet set = Set(false, plan::RegexAction::kReject);
  for (auto _ : state) {
    ValidationReport r = set.ValidateStream(plan::ValidatorTarget::kStdout, out, out.size(), false);
    if (r.rejected) state.SkipWithError("rejected");
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_StreamSizeUtf8Regex10Copy)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with control = strip and the 10 patterns as redact rules (nothing matches).
void BM_StreamStripRedact10(benchmark::State& state) {
  const std::string& out = Output100MiB();
  const ValidatorSet set = Set(true, plan::RegexAction::kRedact);
  for (auto _ : state) {
    ValidationReport r = set.ValidateStream(plan::ValidatorTarget::kStdout, out, out.size(), false);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_StreamStripRedact10)->Unit(benchmark::kMillisecond)->UseRealTime();

// Parts, to see where the time goes.
void BM_ScanUtf8Only(benchmark::State& state) {
  const std::string& out = Output100MiB();
  ScanOptions o;
  o.utf8 = true;
  for (auto _ : state) benchmark::DoNotOptimize(ScanText(out, o));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_ScanUtf8Only)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ScanUtf8StripLines(benchmark::State& state) {
  const std::string& out = Output100MiB();
  ScanOptions o;
  o.utf8 = true;
  o.control = plan::ControlChars::kStrip;
  o.max_lines = 10000000;
  for (auto _ : state) benchmark::DoNotOptimize(ScanText(out, o));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_ScanUtf8StripLines)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Regex10Only(benchmark::State& state) {
  const std::string& out = Output100MiB();
  plan::Validator v;
  v.target = plan::ValidatorTarget::kStdout;
  for (const std::string& p : TenPatterns()) v.regex.push_back({p, plan::RegexAction::kReject, ""});
  Result<ValidatorSet> set = ValidatorSet::Compile({v});
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        set->ValidateStream(plan::ValidatorTarget::kStdout, out, out.size(), false));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_Regex10Only)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Sha256(benchmark::State& state) {
  const std::string& out = Output100MiB();
  for (auto _ : state) benchmark::DoNotOptimize(Sha256Hex(out));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}
BENCHMARK(BM_Sha256)->Unit(benchmark::kMillisecond)->UseRealTime();

// JSON checker on a realistic document (an array of records), about 64 MiB.
void BM_JsonCheck(benchmark::State& state) {
  static const std::string doc = [] {
    std::mt19937_64 rng(7);
    std::string s = "{\"status\":\"done\",\"results\":[";
    char buf[512];
    for (size_t i = 0; s.size() < 64 * kMiB; ++i) {
      const uint64_t r = rng();
      snprintf(buf, sizeof buf,
               "%s{\"id\":%zu,\"name\":\"item-%llx caf\\u00e9 \xe6\x9d\xb1\",\"score\":%llu.%03llu,"
               "\"tags\":[\"a\",\"b\",\"c\"],\"nested\":{\"ok\":true,\"n\":null,\"v\":-%llue-3}}",
               i ? "," : "", i, static_cast<unsigned long long>(rng()),
               static_cast<unsigned long long>(r % 100), static_cast<unsigned long long>(r % 1000),
               static_cast<unsigned long long>(r % 99999));
      s += buf;
    }
    s += "]}";
    return s;
  }();
  JsonCheckOptions o;
  o.required = {{"status", "string"}, {"results", "array"}};
  for (auto _ : state) {
    JsonCheckResult r = CheckJson(doc, o);
    if (!r.ok) state.SkipWithError(r.message.c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * doc.size()));
}
BENCHMARK(BM_JsonCheck)->Unit(benchmark::kMillisecond)->UseRealTime();

// A hostile document: 100 MiB of '[' is rejected at the depth cap after 64 bytes.
void BM_JsonDeepReject(benchmark::State& state) {
  static const std::string doc(100 * kMiB, '[');
  JsonCheckOptions o;
  for (auto _ : state) benchmark::DoNotOptimize(CheckJson(doc, o));
}
BENCHMARK(BM_JsonDeepReject)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace safex::output

BENCHMARK_MAIN();
