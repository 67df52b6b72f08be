// The attack catalogue (/work/shared/attack-catalogue.md), one Case per row: which probe runs
// under which example policy, and what "contained" means for it. Suite::CommonChecks adds to
// every run: a JSON report whose exit status matches, the run in the audit log with the same
// verdict, nothing left naming the run, and a probe line that does not claim an escape.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <set>

#include "tests/containment/suite.h"

namespace safex::containment {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// python-untrusted (the tightest example for untrusted code), the policy most cases run under.
constexpr int kPids = 32;
constexpr int kOpenFiles = 256;
constexpr uint64_t kMemory = 256 * kMiB;
constexpr uint64_t kTmpfs = 64 * kMiB;      // /tmp
constexpr uint64_t kOutputMount = 16 * kMiB;  // /data/out
constexpr uint64_t kDisk = 64 * kMiB;       // RLIMIT_FSIZE
constexpr double kWallLimit = 10.0;
// What `safex` itself may use while a hostile program runs (bounded, well under the program's).
constexpr uint64_t kSupervisorRssKib = 160 * 1024;

Invocation Probe(std::vector<std::string> argv, std::string label = "") {
  Invocation inv;
  inv.label = std::move(label);
  inv.argv = std::move(argv);
  return inv;
}

bool In(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (v == a) return true;
  }
  return false;
}

bool IsErrnoValue(const std::string& v) {
  return v == "OK" || (v.size() > 1 && v[0] == 'E' &&
                       std::all_of(v.begin() + 1, v.end(), [](char c) { return isupper(c) || isdigit(c); }));
}

// Every errno-valued observation (except `skip` keys) is one of `allowed`.
void ExpectAllRefused(Check& c, const RunRecord& r, std::initializer_list<const char*> allowed,
                      std::set<std::string> skip = {}) {
  if (!r.probe.is_object() || !r.probe.contains("obs")) return;
  for (const auto& [k, v] : r.probe["obs"].items()) {
    if (skip.count(k) || !v.is_string()) continue;
    std::string s = v.get<std::string>();
    if (!IsErrnoValue(s)) continue;
    c.Expect(In(s, allowed), k + " gave " + s);
  }
}

void ExpectVerdict(Check& c, const RunRecord& r, const std::string& verdict, int status) {
  std::string what = r.inv.label.empty() ? "" : " [" + r.inv.label + "]";
  c.Expect(r.verdict() == verdict,
           "verdict " + r.verdict() + ", expected " + verdict + what +
               (r.Reason().empty() ? "" : " (" + r.Reason() + ")"));
  c.Expect(r.proc.status == status, "exit status " + std::to_string(r.proc.status) + ", expected " +
                                        std::to_string(status) + what);
}

std::vector<std::string> LimitsFired(const RunRecord& r) {
  std::vector<std::string> out;
  if (r.report.is_object() && r.report.contains("limits_fired")) {
    for (const auto& l : r.report["limits_fired"]) {
      if (l.is_string()) out.push_back(l.get<std::string>());
    }
  }
  return out;
}

bool Fired(const RunRecord& r, const std::string& limit) {
  auto l = LimitsFired(r);
  return std::find(l.begin(), l.end(), limit) != l.end();
}

uint64_t ReportU64(const RunRecord& r, const std::string& key) {
  return r.report.is_object() && r.report.contains(key) && r.report[key].is_number_unsigned()
             ? r.report[key].get<uint64_t>()
             : 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The collection refusals of a run (files.refusals[]), as "path:reason".
std::vector<std::string> Refusals(const RunRecord& r) {
  std::vector<std::string> out;
  if (!r.report.is_object() || !r.report.contains("files")) return out;
  const auto& f = r.report["files"];
  if (!f.is_object() || !f.contains("refusals")) return out;
  for (const auto& x : f["refusals"]) {
    out.push_back(x.value("path", "") + ":" + x.value("reason", ""));
  }
  return out;
}

bool Absent(const RunRecord& r, const std::string& path) {
  if (!r.report.is_object() || !r.report.contains("files")) return false;
  const auto& f = r.report["files"];
  if (!f.is_object() || !f.contains("absent")) return false;
  for (const auto& a : f["absent"]) {
    if (a == path) return true;
  }
  return false;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The supervisor stayed bounded: `safex` itself, not the sandbox.
void ExpectSupervisorBounded(Check& c, const RunRecord& r) {
  c.Expect(r.proc.peak_rss_kib > 0 && r.proc.peak_rss_kib < kSupervisorRssKib,
           "safex peak RSS " + std::to_string(r.proc.peak_rss_kib >> 10) + " MiB (bound " +
               std::to_string(kSupervisorRssKib >> 10) + " MiB)");
}

// A host canary in the case's directory: created now, checked later.
std::string Canary(CaseEnv& env, const std::string& name, const std::string& content) {
  std::string p = env.dir + "/" + name;
  WriteText(p, content);
  env.vars["canary:" + p] = FileState::Of(p).sha256;
  return p;
}

void ExpectCanariesUnchanged(Check& c, CaseEnv& env) {
  for (const auto& [k, sha] : env.vars) {
    if (k.rfind("canary:", 0) != 0) continue;
    std::string p = k.substr(7);
    FileState s = FileState::Of(p);
    c.Expect(s.exists && s.sha256 == sha, "host file changed: " + p);
  }
}

std::string HexOf(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    out += kHex[ch >> 4];
    out += kHex[ch & 15];
  }
  return out;
}

std::string Mib(uint64_t b) { return std::to_string(b / kMiB) + " MiB"; }

// ---------------------------------------------------------------------------------------------
// R: resources

Case R1() {
  Case c{"R1", "fork / thread bomb",
         "fork fails at the pids limit; verdict names it; host pids back to baseline", 2};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"r1_fork_bomb"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "pids-limit", 0);
    k.Expect(Fired(r, "pids"), "limits_fired does not name pids");
    int64_t forks = r.ObsInt("forks"), threads = r.ObsInt("threads");
    k.Expect(forks >= 0 && forks < kPids, "forked " + std::to_string(forks) + " children (pids = 32)");
    k.Expect(threads >= 0 && threads < kPids, "created " + std::to_string(threads) + " threads");
    k.Expect(r.Obs("fork_errno") == "EAGAIN", "fork failed with " + r.Obs("fork_errno"));
    k.Expect(r.Obs("thread_errno") == "EAGAIN", "pthread_create failed with " + r.Obs("thread_errno"));
    k.Summary("fork EAGAIN after " + std::to_string(forks) + ", pthread_create EAGAIN after " +
              std::to_string(threads) + "; verdict pids-limit");
  };
  return c;
}

Case R2() {
  Case c{"R2", "memory bomb; filling tmpfs or /dev/shm",
         "killed inside the run's memory limit; supervisor unaffected", 3};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Probe({"r2_memory_bomb", "heap"}, "heap"),
                                   Probe({"r2_memory_bomb", "fill", "/tmp", "/dev/shm"}, "fill")};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& heap = rs[0];
    ExpectVerdict(k, heap, "memory-limit", 137);
    k.Expect(Fired(heap, "memory"), "limits_fired does not name memory");
    uint64_t peak = ReportU64(heap, "peak_memory_bytes");
    k.Expect(peak > 0 && peak <= kMemory + kMemory / 8,
             "peak memory " + Mib(peak) + " (limit " + Mib(kMemory) + ")");
    ExpectSupervisorBounded(k, heap);
    const RunRecord& fill = rs[1];
    ExpectVerdict(k, fill, "ok", 0);
    k.Expect(In(fill.Obs("/tmp_errno"), {"ENOSPC", "EFBIG"}) &&
                 static_cast<uint64_t>(fill.ObsInt("/tmp_mib")) <= kTmpfs / kMiB,
             "/tmp took " + fill.Obs("/tmp_mib") + " MiB, then " + fill.Obs("/tmp_errno"));
    k.Expect(In(fill.Obs("/dev/shm_errno"), {"ENOSPC", "EFBIG", "EACCES", "ENOENT", "EROFS"}) &&
                 static_cast<uint64_t>(fill.ObsInt("/dev/shm_mib")) <= kTmpfs / kMiB,
             "/dev/shm took " + fill.Obs("/dev/shm_mib") + " MiB, then " + fill.Obs("/dev/shm_errno"));
    k.Summary("killed at " + Mib(peak) + " (memory-limit, 137), safex " +
              std::to_string(heap.proc.peak_rss_kib >> 10) + " MiB; " + fill.ProbeResult());
  };
  return c;
}

Case R3() {
  Case c{"R3", "disk fill in scratch", "ENOSPC or SIGXFSZ at the disk limit; host free space unchanged",
         2};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Probe({"r3_disk_fill", "/tmp", "/data/out"})};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(In(r.Obs("/tmp_errno"), {"ENOSPC", "EFBIG"}), "/tmp stopped with " + r.Obs("/tmp_errno"));
    k.Expect(static_cast<uint64_t>(r.ObsInt("/tmp_bytes")) <= std::min(kTmpfs, kDisk),
             "/tmp took " + r.Obs("/tmp_bytes") + " bytes");
    k.Expect(In(r.Obs("/data/out_errno"), {"ENOSPC", "EFBIG"}),
             "/data/out stopped with " + r.Obs("/data/out_errno"));
    k.Expect(static_cast<uint64_t>(r.ObsInt("/data/out_bytes")) <= kOutputMount,
             "/data/out took " + r.Obs("/data/out_bytes") + " bytes");
    // Host free space: Suite::CheckHost (the runs' storage is memory: sentry tmpfs, host tmpfs).
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case R4() {
  Case c{"R4", "inode exhaustion in scratch", "ENOSPC at the cap", 6};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Probe({"r4_inode_exhaustion", "/tmp", "/data/out"})};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    for (const char* dir : {"/tmp", "/data/out"}) {
      std::string d = dir;
      k.Expect(r.Obs(d + "_errno") == "ENOSPC",
               d + ": no inode cap: " + r.Obs(d + "_files") + " files created, stopped by " +
                   (r.Obs(d + "_errno") == "OK" ? r.Obs(d + "_stop") : r.Obs(d + "_errno")) +
                   " (expected ENOSPC)");
    }
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case R5() {
  Case c{"R5", "stdout/stderr flood (GBs)",
         "capture capped and marked truncated; supervisor memory bounded", 2};
  c.plan = [](CaseEnv&) {
    Invocation inv = Probe({"r5_output_flood"});
    inv.expect_probe_line = false;  // rejected with the flood
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "output-limit", 123);
    uint64_t captured = 0;
    bool truncated = false;
    for (const char* s : {"stdout", "stderr"}) {
      if (!r.report.is_object() || !r.report.contains(s)) continue;
      captured += r.report[s].value("captured_bytes", 0ull);
      truncated = truncated || r.report[s].value("truncated", false);
    }
    k.Expect(truncated, "no stream is marked truncated");
    k.Expect(captured <= kMiB, "captured " + std::to_string(captured) + " bytes (output = 1 MiB)");
    ExpectSupervisorBounded(k, r);
    k.Summary("stopped at the 1 MiB output limit (captured " + std::to_string(captured) +
              " bytes, truncated); safex peak " + std::to_string(r.proc.peak_rss_kib >> 10) + " MiB");
  };
  return c;
}

Case R6() {
  Case c{"R6", "CPU spin on many threads", "CPU limit enforced; verdict says which limit", 9};
  c.plan = [](CaseEnv&) {
    Invocation inv = Probe({"r6_cpu_spin"});
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    // cpu_time = 5s, wall_time = 10s, cpus = 1: on a loaded host the wall clock may come first.
    bool cpu = r.verdict() == "cpu-limit" && r.proc.status == 152 && Fired(r, "cpu_time");
    bool wall = r.verdict() == "timeout" && r.proc.status == 124 && Fired(r, "wall_time");
    k.Expect(cpu || wall, "verdict " + r.verdict() + " exit " + std::to_string(r.proc.status) +
                              " limits " + Join(LimitsFired(r)) + " (expected cpu-limit/152)");
    double cpu_s = ReportU64(r, "cpu_ns") / 1e9, wall_s = ReportU64(r, "wall_ns") / 1e9;
    // 9 spinning threads, cpus = 1: the rate limit holds them to about one CPU.
    k.Expect(cpu_s <= wall_s * 1.25 + 0.5,
             "used " + std::to_string(cpu_s) + " CPU-s in " + std::to_string(wall_s) + " s (cpus = 1)");
    char buf[160];
    snprintf(buf, sizeof buf, "killed at %s (%s, exit %d): %.1f CPU-s in %.1f s wall with 9 threads",
             cpu ? "the CPU-time limit" : "the wall-time limit", r.verdict().c_str(), r.proc.status,
             cpu_s, wall_s);
    k.Summary(buf);
  };
  return c;
}

Case R7() {
  Case c{"R7", "sleep past the deadline; ignore SIGTERM",
         "killed at wall time (+ grace); verdict timeout; exit 124", 12};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"r7_sleep_past_deadline"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "timeout", 124);
    k.Expect(Fired(r, "wall_time"), "limits_fired does not name wall_time");
    double wall = ReportU64(r, "wall_ns") / 1e9;
    k.Expect(wall >= kWallLimit * 0.95 && wall <= kWallLimit + 5,
             "killed after " + std::to_string(wall) + " s (wall_time = 10 s)");
    char buf[96];
    snprintf(buf, sizeof buf, "killed after %.1f s (wall_time 10 s); timeout, exit 124", wall);
    k.Summary(buf);
  };
  return c;
}

Case R8() {
  Case c{"R8", "open files until EMFILE", "EMFILE inside only", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"r8_open_files"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("errno") == "EMFILE", "open failed with " + r.Obs("errno"));
    k.Expect(r.ObsInt("opened") >= 0 && r.ObsInt("opened") < kOpenFiles,
             "opened " + r.Obs("opened") + " files (open_files = 256)");
    k.Summary(r.ProbeResult() + " (open_files = 256)");
  };
  return c;
}

Case R9() {
  Case c{"R9", "stop itself (SIGSTOP), trap signals", "still killed at the deadline", 12};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"r9_sigstop"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "timeout", 124);
    double wall = ReportU64(r, "wall_ns") / 1e9;
    k.Expect(wall <= kWallLimit + 5, "killed after " + std::to_string(wall) + " s");
    char buf[96];
    snprintf(buf, sizeof buf, "stopped and trapping, killed after %.1f s; timeout, exit 124", wall);
    k.Summary(buf);
  };
  return c;
}

// ---------------------------------------------------------------------------------------------
// F: files

Case F1() {
  Case c{"F1", "read host secrets (/etc/shadow, /root, the audit DB, any *.sock)",
         "not present in the sandbox", 1};
  c.plan = [](CaseEnv& env) {
    std::string canary = Canary(env, "secret.txt", "host secret\n");
    return std::vector<Invocation>{Probe({"f1_host_secrets", canary, env.suite->audit_db(),
                                          env.suite->secret_file(), env.suite->state_root(),
                                          env.suite->work() + "/host.sock"})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ENOENT"});
    k.Expect(r.ObsInt("sockets_found") == 0, "unix sockets visible: " + r.Obs("sockets"));
    ExpectCanariesUnchanged(k, env);
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case F2() {
  Case c{"F2", "read /proc/self/environ, /proc/1/environ", "only the variables the policy sets", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"f2_environ", env.suite->marker()})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    std::vector<std::string> want = env.suite->PolicyEnvNames("python-untrusted", env.backend);
    k.Expect(!want.empty(), "could not read the policy's environment from safex compile");
    for (const char* which : {"self", "pid1"}) {
      std::string seen = r.Obs(which);
      std::vector<std::string> names;
      for (size_t p = 0; p <= seen.size() && !seen.empty();) {
        size_t q = seen.find(',', p);
        if (q == std::string::npos) q = seen.size();
        names.push_back(seen.substr(p, q - p));
        p = q + 1;
      }
      std::sort(names.begin(), names.end());
      k.Expect(names == want, std::string(which) + " environ has " + Join(names) +
                                  ", the policy sets " + Join(want));
    }
    k.Expect(r.StdoutText().find(env.suite->marker()) == std::string::npos,
             "the supervisor's secret variable reached the sandbox");
    k.Summary("exactly the policy's " + std::to_string(want.size()) + " variables (" + Join(want, " ") +
              "); the supervisor's secret variable absent");
  };
  return c;
}

Case F3() {
  Case c{"F3", "/proc/1/root, /proc/*/cwd to reach the host", "own pid namespace and /proc only", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"f3_proc_root", Canary(env, "canary.txt", "host\n")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("reached").empty(), "host canary reached via " + r.Obs("reached"));
    k.Expect(r.ObsInt("pids_visible") >= 1 && r.ObsInt("pids_visible") <= 3,
             r.Obs("pids_visible") + " processes visible");
    k.Expect(r.Obs("pid1_cmdline").find("/probes/f3_proc_root") == 0,
             "pid 1 is not the run's own program: " + r.Obs("pid1_cmdline"));
    ExpectCanariesUnchanged(k, env);
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case F4() {
  Case c{"F4", "write outside scratch (/usr, /, input mounts)", "EROFS/EACCES; host files unchanged", 1};
  c.plan = [](CaseEnv& env) {
    std::string target = Canary(env, "target.txt", "host file\n");
    env.vars["new"] = env.dir + "/new.txt";
    Invocation inv = Probe({"f4_write_outside", "/usr/safex-f4", "/safex-f4", "/etc/safex-f4",
                            "/bin/safex-f4", "/lib/safex-f4", "/probes/safex-f4",
                            "/data/in/safex-f4", "=/data/in/existing.txt", "=/usr/bin/env",
                            "=/probes/f4_write_outside", "=" + target, env.vars["new"]});
    inv.input = true;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EROFS", "EACCES", "ENOENT", "EPERM"});
    ExpectCanariesUnchanged(k, env);
    k.Expect(access(env.vars["new"].c_str(), F_OK) != 0, "created on the host: " + env.vars["new"]);
    k.Expect(ReadAll(r.input_dir + "/existing.txt") == "input file\n", "the input file changed");
    k.Expect(access((r.input_dir + "/safex-f4").c_str(), F_OK) != 0, "created in the input directory");
    k.Summary(r.ProbeResult() + "; host and input unchanged");
  };
  return c;
}

Case F5() {
  Case c{"F5", "output file is a symlink to a host file", "collection refuses it; host file untouched",
         1};
  c.plan = [](CaseEnv& env) {
    std::string target = Canary(env, "target.txt", "host file\n");
    Invocation inv = Probe({"f5_output_symlink", target, "/data/out/result.json"});
    inv.output = true;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "validator-rejected", 122);
    k.Expect(Has(Refusals(r), "/data/out/result.json:symlink"),
             "collection did not refuse the symlink: " + Join(Refusals(r)));
    ExpectCanariesUnchanged(k, env);
    struct stat st;
    k.Expect(lstat((r.output_dir + "/result.json").c_str(), &st) != 0,
             "something was delivered as result.json");
    k.Summary("symlink refused at collection (validator-rejected, 122); host file untouched");
  };
  return c;
}

Case F6() {
  Case c{"F6", "swap an output path for a symlink while it is collected",
         "collection is fd-relative after the run ends; refused", 2};
  c.plan = [](CaseEnv& env) {
    std::string target = Canary(env, "target.txt", "host file\n");
    Invocation inv = Probe({"f6_output_swap", target, "/data/out/result.json"});
    inv.output = true;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    // The swapper is killed with the run; what is left is either the regular file (collected as
    // it is) or the symlink (refused). Never the host file's content.
    bool refused = Has(Refusals(r), "/data/out/result.json:symlink");
    if (refused) {
      ExpectVerdict(k, r, "validator-rejected", 122);
    } else {
      ExpectVerdict(k, r, "ok", 0);
    }
    std::string delivered = r.output_dir + "/result.json";
    struct stat st;
    if (lstat(delivered.c_str(), &st) == 0) {
      k.Expect(S_ISREG(st.st_mode), "a non-regular result.json was delivered");
      k.Expect(ReadAll(delivered) == "{\"ok\":true}\n", "delivered result.json is not the run's file");
    }
    ExpectCanariesUnchanged(k, env);
    k.Summary(std::string(refused ? "left as a symlink: refused (122)"
                                  : "left as the regular file: collected as written (0)") +
              "; swapper gone before collection; host file untouched (" + r.ProbeResult() + ")");
  };
  return c;
}

Case F7() {
  Case c{"F7", "hardlink a host file into output", "impossible (separate filesystem) or refused", 1};
  c.plan = [](CaseEnv&) {
    Invocation inv =
        Probe({"f7_output_hardlink", "/data/out", "/usr/bin/env", "/probes/f7_output_hardlink"});
    inv.output = true;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "validator-rejected", 122);
    ExpectAllRefused(k, r, {"EXDEV", "EPERM", "EACCES", "EROFS"}, {"inside_output"});
    k.Expect(Has(Refusals(r), "/data/out/result.json:hardlink"),
             "a 2-link result.json was not refused: " + Join(Refusals(r)));
    k.Summary(r.ProbeResult() + "; a second name inside the output refused (hardlink, 122)");
  };
  return c;
}

Case F8() {
  Case c{"F8", "output is a FIFO, device, or a huge sparse file",
         "non-regular files refused; size checked before reading", 2};
  c.plan = [](CaseEnv&) {
    std::vector<Invocation> v;
    for (const char* mode : {"fifo", "device", "sparse"}) {
      Invocation inv = Probe({"f8_output_special", mode, "/data/out/result.json"}, mode);
      inv.output = true;
      v.push_back(inv);
    }
    return v;
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& fifo = rs[0];
    bool fifo_refused = Has(Refusals(fifo), "/data/out/result.json:fifo");
    bool fifo_absent = Absent(fifo, "/data/out/result.json");
    k.Expect(fifo_refused || fifo_absent,
             "FIFO output neither refused nor absent: " + Join(Refusals(fifo)));
    if (fifo_refused) ExpectVerdict(k, fifo, "validator-rejected", 122);
    if (fifo_absent) {
      ExpectVerdict(k, fifo, "ok", 0);
      k.Note("the FIFO never reached the host: the backend keeps it inside the sandbox (" +
             fifo.Obs("mkfifo") + " inside, absent at collection)");
    }
    k.Expect(fifo.proc.wall_seconds < 60, "collecting a FIFO took " + std::to_string(fifo.proc.wall_seconds) + " s");
    const RunRecord& dev = rs[1];
    bool dev_refused = Has(Refusals(dev), "/data/out/result.json:device");
    k.Expect(dev.Obs("mknod") != "OK" || dev_refused, "device node created and not refused");
    const RunRecord& sparse = rs[2];
    ExpectVerdict(k, sparse, "validator-rejected", 122);
    k.Expect(In(sparse.Obs("truncate_1tib"), {"EFBIG", "ENOSPC"}),
             "a 1 TiB file: " + sparse.Obs("truncate_1tib"));
    k.Expect(Has(Refusals(sparse), "/data/out/result.json:too-big"),
             "a 60 MiB sparse output was not refused unread: " + Join(Refusals(sparse)));
    ExpectSupervisorBounded(k, sparse);
    k.Summary(std::string("FIFO ") + (fifo_refused ? "refused" : "never reaches the host") +
              "; mknod " + dev.Obs("mknod") + "; 1 TiB " + sparse.Obs("truncate_1tib") +
              ", 60 MiB sparse refused unread (too-big, 122)");
  };
  return c;
}

Case F9() {
  Case c{"F9", "mknod, open /dev/sda, /dev/kmsg, /dev/mem", "minimal /dev; EPERM/ENOENT", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"f9_dev_nodes", "/tmp"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ENOENT", "EPERM", "EACCES", "ENXIO", "ENODEV"},
                     {"mknod_block", "fuse"});
    k.Expect(r.ObsInt("block_devices") == 0, "block devices in /dev: " + r.Obs("dev_entries"));
    if (r.Obs("mknod_block") == "OK") {
      k.Expect(r.Obs("mknod_node_open") != "OK", "a block device made with mknod could be opened");
      k.Note("mknod of a block device node succeeded in the sandbox's /tmp without CAP_MKNOD; the "
             "node cannot be opened (" + r.Obs("mknod_node_open") + ")");
    } else {
      k.Expect(In(r.Obs("mknod_block"), {"EPERM", "EACCES", "EROFS"}), "mknod: " + r.Obs("mknod_block"));
    }
    if (r.Obs("fuse") == "OK") {
      k.Note("/dev/fuse is present and opens (the sandbox kernel's own device: " + r.Obs("dev_entries") + ")");
    }
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case F10() {
  Case c{"F10", "write /proc/sys, /sys", "read-only or absent", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"f10_proc_sys_write"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EROFS", "EACCES", "ENOENT", "EPERM"});
    k.Summary(r.ProbeResult() + " (host values compared after the suite)");
  };
  return c;
}

Case F11() {
  Case c{"F11", "run a setuid binary to gain root", "no effect (nosuid, no_new_privs)", 1};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Probe({"f11_setuid", "/probes/f11_setuid_root"})};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.ObsInt("helper_euid") > 0, "the setuid-root copy ran with euid " + r.Obs("helper_euid"));
    k.Expect(r.ObsInt("no_new_privs") == 1, "no_new_privs is " + r.Obs("no_new_privs"));
    k.Expect(r.Obs("setuid0") == "EPERM", "setuid(0): " + r.Obs("setuid0"));
    k.Summary(r.ProbeResult() + "; no_new_privs = 1");
  };
  return c;
}

// ---------------------------------------------------------------------------------------------
// P: privileges and kernel surface

Case P1() {
  Case c{"P1", "ptrace the supervisor or another run", "not visible / EPERM", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"p1_ptrace", std::to_string(env.suite->runner_pid()),
                                          std::to_string(getppid())})};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    for (const auto& [key, v] : r.probe.value("obs", nlohmann::json::object()).items()) {
      if (key.rfind("host_pid_", 0) == 0) {
        k.Expect(v != "OK", "attached to host " + key);
      }
    }
    k.Expect(r.ObsInt("visible_processes") >= 1 && r.ObsInt("visible_processes") <= 3,
             "processes visible: " + r.Obs("visible_comms"));
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case P2() {
  Case c{"P2", "mount, pivot_root, chroot escape", "EPERM or confined", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"p2_mount_escape"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    ExpectVerdict(k, rs[0], "ok", 0);
    ExpectAllRefused(k, rs[0], {"EPERM", "ENOSYS"});
    k.Summary(rs[0].ProbeResult());
  };
  return c;
}

Case P3() {
  Case c{"P3", "unshare a new user namespace to gain caps", "EPERM or confined", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"p3_userns"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("unshare_newuser") == "EPERM", "unshare(CLONE_NEWUSER): " + r.Obs("unshare_newuser"));
    if (r.Obs("clone_newuser") == "OK") {
      k.Expect(In(r.Obs("inner_mount"), {"EPERM", "ENOSYS"}), "mount in the new namespace: " + r.Obs("inner_mount"));
      k.Expect(r.Obs("inner_sethostname") != "OK", "sethostname in the new namespace worked");
      k.Note("clone(CLONE_NEWUSER) succeeds (the seccomp rules name unshare, not clone flags); the "
             "namespace is the sandbox kernel's own and grants nothing: mount " + r.Obs("inner_mount") +
             ", sethostname " + r.Obs("inner_sethostname"));
    } else {
      k.Expect(In(r.Obs("clone_newuser"), {"EPERM", "EINVAL", "ENOSYS"}), "clone: " + r.Obs("clone_newuser"));
    }
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case SyscallCase(const char* id, const char* attack, const char* expected, const char* probe) {
  Case c{id, attack, expected, 1};
  std::string p = probe;
  c.plan = [p](CaseEnv&) { return std::vector<Invocation>{Probe({p})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    ExpectVerdict(k, rs[0], "ok", 0);
    ExpectAllRefused(k, rs[0], {"EPERM", "ENOSYS", "ENOENT", "EACCES"});
    k.Summary(rs[0].ProbeResult());
  };
  return c;
}

Case P8() {
  Case c{"P8", "32-bit `int 0x80` syscalls, x32 ABI", "killed or denied", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"p8_compat_abi", "/tmp"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("int80_created") == "false", "int 0x80 mkdir created the directory");
    k.Expect(r.Obs("x32_created") == "false", "x32 mkdir created the directory");
    k.Expect(r.Obs("int80_mkdir") != "OK" && r.Obs("x32_mkdir") != "OK", "a compat syscall succeeded");
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case P9() {
  Case c{"P9", "TIOCSTI terminal injection", "no shared terminal; denied", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"p9_tiocsti"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ENOTTY", "EIO", "ENXIO", "ENOENT", "EPERM", "EBADF"});
    k.Expect(r.Obs("isatty_any") == "false", "a standard descriptor is a terminal");
    k.Summary(r.ProbeResult());
  };
  return c;
}

// ---------------------------------------------------------------------------------------------
// N: network

Case N1() {
  Case c{"N1", "TCP/UDP to any outside address with network denied", "unreachable; no packet leaves",
         2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    env.vars["targets"] = s->Endpoint("tcp_lo") + " " + s->Endpoint("udp_lo") + " " +
                          s->Endpoint("tcp_world") + " " + s->Endpoint("udp_world") + " " +
                          s->Endpoint("tcp_world2");
    return std::vector<Invocation>{Probe({"n1_egress_denied", s->Endpoint("tcp_lo"),
                                          s->Endpoint("udp_lo"), s->Endpoint("tcp_world"),
                                          s->Endpoint("udp_world"), s->Endpoint("tcp_world2")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ENETUNREACH", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "EPERM",
                            "EACCES"});
    for (const char* e : {"tcp_lo", "udp_lo", "tcp_world", "udp_world", "tcp_world2"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0,
               "the host endpoint " + env.suite->Endpoint(e) + " received traffic");
    }
    k.Summary(r.ProbeResult() + "; host listeners (loopback, 198.18.1.10, 198.19.255.254) saw nothing");
  };
  return c;
}

Case N2() {
  Case c{"N2", "DNS exfiltration", "no query leaves", 2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    std::string tcp_world = s->Endpoint("tcp_world");
    return std::vector<Invocation>{Probe({"n2_dns_exfil", s->Endpoint("dns_lo"),
                                          s->Endpoint("udp_world"), s->Endpoint("tcp_world")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ENETUNREACH", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENOENT",
                            "EPERM"});
    for (const char* e : {"dns_lo", "udp_world", "tcp_world"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0,
               "a query reached " + env.suite->Endpoint(e));
    }
    k.Summary("/etc/resolv.conf " + r.Obs("resolv_conf") + "; queries " + r.ProbeResult() +
              "; no query reached the host's resolvers");
  };
  return c;
}

Case N3() {
  Case c{"N3", "cloud metadata 169.254.169.254 even when some egress is granted", "unreachable", 2};
  c.not_runnable = [](CaseEnv& env) {
    std::string why = env.suite->EgressUnavailable();
    if (!why.empty()) return why;
    // Egress works: the runtime half needs the run's uplink to be the suite's test world, which
    // `safex run` cannot be told yet.
    return std::string("egress works, but `safex run` has no way yet to use a test uplink");
  };
  // What can be shown already: a policy granting the metadata address is refused at plan time.
  c.plan = [](CaseEnv&) {
    Invocation inv = Probe({"n3_metadata", "tcp:169.254.169.254:80"}, "metadata egress policy");
    inv.policy = "notebook-egress";
    inv.policy_extra =
        "  @override(\"containment suite: try to grant the metadata service\")\n"
        "  network {\n    default = deny\n    egress \"169.254.169.254:80\"\n  }\n";
    inv.expect_refusal = true;
    inv.expect_probe_line = false;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    k.Expect(r.Reason().find("does not compile") != std::string::npos,
             "a policy granting 169.254.169.254:80 was not refused at plan time: " + r.Reason());
    std::string diag = r.report.is_object() ? r.report.value("diagnostics", "") : "";
    k.Expect(diag.find("E073") != std::string::npos, "no E073 in the diagnostics: " + diag.substr(0, 200));
    k.Summary("a policy granting egress to 169.254.169.254:80 is refused at plan time (E073)");
  };
  return c;
}

Case N4() {
  Case c{"N4", "the host's loopback services, the supervisor's socket, abstract unix sockets",
         "unreachable", 2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    return std::vector<Invocation>{
        Probe({"n4_host_loopback", s->Endpoint("tcp_lo"), s->Endpoint("unix"), s->Endpoint("abstract")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ECONNREFUSED", "ENOENT", "ENETUNREACH", "ETIMEDOUT", "EACCES", "EPERM"});
    for (const char* e : {"tcp_lo", "unix", "abstract"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0, "reached " + env.suite->Endpoint(e));
    }
    k.Summary(r.ProbeResult() + "; the host's listeners saw nothing");
  };
  return c;
}

Case N5() {
  Case c{"N5", "another concurrent run's network", "unreachable (one namespace per run)", 9};
  c.plan = [](CaseEnv& env) {
    std::string port = std::to_string(20000 + getpid() % 20000);
    std::string name = "safex-n5-" + std::to_string(getpid()) + "-" + env.backend;
    Invocation listen = Probe({"n5_cross_run", "listen", port, name, "8"}, "listener");
    Invocation connect =
        Probe({"n5_cross_run", "connect", "tcp:127.0.0.1:" + port, "abstract:" + name, "4"}, "connector");
    listen.group = connect.group = 1;
    connect.start_delay_ms = 2000;
    return std::vector<Invocation>{listen, connect};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& listener = rs[0];
    const RunRecord& connector = rs[1];
    ExpectVerdict(k, listener, "ok", 0);
    ExpectVerdict(k, connector, "ok", 0);
    k.Expect(listener.Obs("tcp_listening") == "true" && listener.Obs("abstract_listening") == "true",
             "the listener run could not listen");
    k.Expect(listener.ObsInt("accepted") == 0, "the listener run accepted a connection");
    ExpectAllRefused(k, connector, {"ECONNREFUSED", "ENOENT", "ETIMEDOUT", "ENETUNREACH"});
    std::string egress = env.suite->EgressUnavailable();
    k.Summary("two runs at once, network denied: connector " + connector.ProbeResult() +
              ", listener accepted 0" +
              (egress.empty() ? "" : "; with egress granted: not yet runnable (" + egress + ")"));
  };
  return c;
}

Case N6() {
  Case c{"N6", "raw/packet sockets, netlink route changes", "EPERM or confined", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"n6_raw_netlink"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EPERM", "EACCES", "EAFNOSUPPORT", "EPROTONOSUPPORT", "ENOTTY",
                            "EOPNOTSUPP", "ENODEV", "ESOCKTNOSUPPORT"});
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case N7() {
  Case c{"N7", "granted egress host:port, then a different port of the same host",
         "only the granted pair works", 2};
  c.not_runnable = [](CaseEnv& env) {
    std::string why = env.suite->EgressUnavailable();
    if (!why.empty()) return why;
    return std::string("egress works, but `safex run` has no way yet to use a test uplink");
  };
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>&, Check&) {};
  return c;
}

// ---------------------------------------------------------------------------------------------
// S: supervisor

Case S1() {
  Case c{"S1", "inherited supervisor file descriptors",
         "only 0,1,2 (and declared fds) open in the sandbox", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"s1_inherited_fds"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.ObsInt("extra") == 0, "descriptors beyond 0-2: " + r.Obs("fds"));
    k.Summary("only 0, 1, 2 (" + r.Obs("fds") + "), although safex was started holding a host file "
              "and a host directory open");
  };
  return c;
}

Case S2() {
  Case c{"S2", "signal the supervisor", "not visible", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"s2_signal_supervisor", std::to_string(env.suite->runner_pid()),
                                          std::to_string(getppid())})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"ESRCH", "EPERM"});
    k.Expect(env.suite->sigusr1_count() == 0, "the runner received SIGUSR1");
    k.Summary(r.ProbeResult() + "; kill(-1, 0) " + r.Obs("kill_all_0") + " (nothing else visible)");
  };
  return c;
}

Case S3() {
  Case c{"S3", "move itself out of its cgroup", "impossible", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"s3_cgroup_escape"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EROFS", "ENOENT", "EACCES", "EPERM"});
    k.Summary(r.ProbeResult() + " (no cgroupfs inside)");
  };
  return c;
}

Case S4() {
  Case c{"S4", "daemonise / double-fork to outlive the run", "every process gone at teardown", 2};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"s4_daemonize"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("daemon_forked") == "1", "the probe could not fork its daemon");
    k.Expect(r.proc.wall_seconds < kWallLimit, "the run waited for the daemon (" +
                                                   std::to_string(r.proc.wall_seconds) + " s)");
    char buf[128];
    snprintf(buf, sizeof buf, "run ended with the probe after %.1f s; its daemon gone at teardown",
             r.proc.wall_seconds);
    k.Summary(buf);
  };
  return c;
}

bool HasRawControl(const std::string& s) {
  for (unsigned char ch : s) {
    if (ch == 0x1b || ch == 0x07 || ch == 0 || ch >= 0x80) return true;
  }
  return false;
}

Case S5() {
  Case c{"S5", "hostile output: bad UTF-8, ANSI escapes, deeply nested JSON, secret-shaped strings",
         "validator verdict; logs escape it; bounded time and memory", 3};
  c.plan = [](CaseEnv&) {
    std::vector<Invocation> v;
    Invocation utf8 = Probe({"s5_hostile_output", "utf8"}, "bad utf-8 + ANSI");
    utf8.expect_probe_line = false;
    Invocation secret = Probe({"s5_hostile_output", "secret"}, "secret-shaped");
    secret.expect_probe_line = false;
    Invocation json = Probe({"s5_hostile_output", "json", "500000", "/data/out/result.json"}, "nested JSON");
    json.output = true;
    Invocation ansi = Probe({"s5_hostile_output", "ansi"}, "ANSI, control = strip");
    ansi.policy = "base-untrusted";
    ansi.expect_probe_line = false;
    v = {utf8, secret, json, ansi};
    return v;
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& utf8 = rs[0];
    ExpectVerdict(k, utf8, "validator-rejected", 122);
    k.Expect(utf8.StdoutText().empty() || !HasRawControl(utf8.StdoutText()),
             "raw control bytes delivered");
    if (utf8.audit) {
      std::string logged = utf8.audit->run.reason;
      for (const auto& v : utf8.audit->run.validator_results) logged += v.name + v.outcome + v.detail;
      k.Expect(!HasRawControl(logged), "the audit log holds raw control bytes");
    }
    k.Expect(!HasRawControl(utf8.Reason()), "the report's reason holds raw control bytes");
    const RunRecord& secret = rs[1];
    ExpectVerdict(k, secret, "validator-rejected", 122);
    k.Expect(secret.proc.out.find("AKIAIOSFODNN7EXAMPLE") == std::string::npos,
             "the secret-shaped string was delivered");
    const RunRecord& json = rs[2];
    ExpectVerdict(k, json, "validator-rejected", 122);
    k.Expect(json.proc.wall_seconds < 30, "validating nested JSON took " + std::to_string(json.proc.wall_seconds) + " s");
    ExpectSupervisorBounded(k, json);
    k.Expect(access((json.output_dir + "/result.json").c_str(), F_OK) != 0, "the nested JSON was delivered");
    const RunRecord& ansi = rs[3];
    ExpectVerdict(k, ansi, "ok", 0);
    k.Expect(ansi.StdoutText().find("red") != std::string::npos && !HasRawControl(ansi.StdoutText()),
             "ANSI escapes not stripped: " + ansi.report.value("stdout", nlohmann::json::object()).dump().substr(0, 200));
    char buf[300];
    snprintf(buf, sizeof buf,
             "bad UTF-8/ANSI rejected (122), logged escaped; AKIA key rejected (122); 1 MB of nesting "
             "rejected in %.1f s, safex %llu MiB; ANSI stripped under control = strip",
             json.proc.wall_seconds, static_cast<unsigned long long>(json.proc.peak_rss_kib >> 10));
    k.Summary(buf);
  };
  return c;
}

Case S6() {
  Case c{"S6", "argv / environment with shell metacharacters", "passed verbatim, never interpreted", 1};
  c.plan = [](CaseEnv& env) {
    env.vars["touched"] = env.dir + "/touched-by-shell";
    std::vector<std::string> hostile = {"$(touch " + env.vars["touched"] + ")",
                                        "`touch " + env.vars["touched"] + "`",
                                        "; touch " + env.vars["touched"],
                                        "*", "a b", "'\"", "$HOME", "\\", "-x", "|| true", "\t\n"};
    env.vars["n"] = std::to_string(hostile.size());
    std::vector<std::string> argv = {"s6_argv_verbatim"};
    for (size_t i = 0; i < hostile.size(); ++i) {
      env.vars["arg" + std::to_string(i + 1)] = HexOf(hostile[i]);
      argv.push_back(hostile[i]);
    }
    return std::vector<Invocation>{Probe(argv)};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    int n = std::stoi(env.vars["n"]);
    k.Expect(r.ObsInt("argc") == n + 1, "argc " + r.Obs("argc"));
    for (int i = 1; i <= n; ++i) {
      std::string key = "arg" + std::to_string(i);
      k.Expect(r.Obs(key) == env.vars[key], key + " arrived changed");
    }
    k.Expect(access(env.vars["touched"].c_str(), F_OK) != 0, "a metacharacter was interpreted");
    k.Summary(std::to_string(n) + " hostile arguments arrived byte for byte; nothing interpreted");
  };
  return c;
}

Case S7() {
  Case c{"S7", "backend missing or broken (runsc absent, cgroups unwritable, nft fails, audit DB unwritable)",
         "refused before anything runs; refusal recorded where possible", 2};
  c.plan = [](CaseEnv& env) {
    std::vector<Invocation> v;
    auto refused = [](std::string label) {
      Invocation inv = Probe({"s7_should_not_run"}, std::move(label));
      inv.expect_refusal = true;
      inv.expect_probe_line = false;
      return inv;
    };
    if (env.backend == "gvisor") {
      Invocation missing = refused("runsc missing");
      missing.flags = {"--runsc", "/nonexistent/runsc"};
      Invocation broken = refused("runsc broken");
      broken.flags = {"--runsc", "/bin/false"};
      v.push_back(missing);
      v.push_back(broken);
    }
    Invocation cgroups = refused("cgroups unwritable");
    cgroups.readonly_cgroups = true;
    v.push_back(cgroups);
    Invocation state = refused("state root unusable");
    state.flags = {"--state-root", "/proc/sys/safex-containment-state"};
    v.push_back(state);
    // An audit log in a place nobody can write: below a regular file.
    std::string blocker = env.dir + "/not-a-directory";
    WriteText(blocker, "");
    env.vars["audit_unwritable"] = blocker + "/audit.db";
    Invocation audit = refused("audit DB unwritable");
    audit.flags = {"--audit-db", env.vars["audit_unwritable"], "--audit-key", blocker + "/audit.key"};
    v.push_back(audit);
    return v;
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    std::vector<std::string> seen;
    for (const RunRecord& r : rs) {
      std::string l = r.inv.label;
      k.Expect(r.proc.out.find("\"ran\"") == std::string::npos, l + ": the program ran");
      if (l == "audit DB unwritable") {
        k.Expect(r.Reason().find("audit log") != std::string::npos, l + ": reason " + r.Reason());
        k.Expect(access(env.vars["audit_unwritable"].c_str(), F_OK) != 0, l + ": a log appeared");
      } else {
        // Recorded: CommonChecks found the refusal in the suite's audit log with this verdict.
        k.Expect(r.audit.has_value() && r.audit->run.state == "refused" &&
                     !r.audit->run.reason.empty(),
                 l + ": the refusal is not in the audit log");
      }
      if (l == "runsc missing" || l == "runsc broken") {
        k.Expect(r.Reason().find("runsc") != std::string::npos, l + ": reason " + r.Reason());
      }
      if (l == "cgroups unwritable") {
        k.Expect(r.Reason().find("cgroup") != std::string::npos, l + ": reason " + r.Reason());
      }
      seen.push_back(l);
    }
    std::string egress = env.suite->EgressUnavailable();
    k.Summary("refused (125) before anything ran: " + Join(seen) +
              "; recorded in the audit log except when the log itself is unwritable" +
              (egress.empty() ? "" : "; nft failure: not yet runnable (" + egress + ")"));
  };
  return c;
}

// ---------------------------------------------------------------------------------------------
// C: container escapes (CVE shapes)

Case C1() {
  Case c{"C1", "overwrite the runtime via /proc/self/exe (CVE-2019-5736 shape)",
         "runtime binaries unreachable; hashes unchanged", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{
        Probe({"c1_proc_self_exe", "/usr/local/bin/runsc", "/usr/bin/qemu-system-x86_64",
               env.suite->safex(), "/usr/bin/runsc"})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EACCES", "EROFS", "ETXTBSY", "ENOENT", "EPERM"});
    k.Expect(r.Obs("self_exe").rfind("/probes/", 0) == 0,
             "/proc/self/exe is " + r.Obs("self_exe") + ", not the run's own program");
    std::vector<std::string> visible;
    for (const std::string& p : {std::string("/usr/local/bin/runsc"),
                                 std::string("/usr/bin/qemu-system-x86_64"), env.suite->safex()}) {
      std::string e = r.Obs(p);
      if (!e.empty() && e != "ENOENT") visible.push_back(p);
    }
    if (!visible.empty()) {
      k.Note("runtime binaries visible read-only inside (the example policies bind the host's /usr): " +
             Join(visible) + "; every write open fails and their hashes are unchanged");
    }
    k.Summary(r.ProbeResult() + " on every write open; /proc/self/exe is the probe's own; runtime "
              "hashes unchanged");
  };
  return c;
}

Case C2() {
  Case c{"C2", "cwd through a leaked host fd (CVE-2024-21626 shape)",
         "no host directory fds reach the sandbox", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"c2_leaked_fd_cwd", Canary(env, "canary.txt", "host\n")})};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.ObsInt("dir_fds") == 0, "host directory descriptors inside");
    k.Expect(r.Obs("cwd") == "/tmp", "cwd is " + r.Obs("cwd") + ", not the policy's /tmp");
    k.Summary(r.ProbeResult() + " (safex was started holding a host directory open)");
  };
  return c;
}

Case C3() {
  Case c{"C3", "cgroup release_agent escape (CVE-2022-0492 shape)", "no writable cgroupfs inside", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"c3_release_agent"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r, {"EPERM", "ENOENT", "EROFS", "EACCES", "ENODEV"});
    k.Summary(r.ProbeResult() + "; " + r.Obs("cgroup_mounts") + " cgroup mounts inside");
  };
  return c;
}

}  // namespace

std::vector<Case> Catalogue() {
  return {
      R1(), R2(), R3(), R4(), R5(), R6(), R7(), R8(), R9(),
      F1(), F2(), F3(), F4(), F5(), F6(), F7(), F8(), F9(), F10(), F11(),
      P1(), P2(), P3(),
      SyscallCase("P4", "init_module, kexec_load, bpf, perf_event_open", "EPERM/ENOSYS",
                  "p4_kernel_syscalls"),
      SyscallCase("P5", "keyctl / add_key", "EPERM/ENOSYS", "p5_keyring"),
      SyscallCase("P6", "userfaultfd", "EPERM/ENOSYS", "p6_userfaultfd"),
      SyscallCase("P7", "io_uring_setup", "EPERM/ENOSYS", "p7_io_uring"),
      P8(), P9(),
      N1(), N2(), N3(), N4(), N5(), N6(), N7(),
      S1(), S2(), S3(), S4(), S5(), S6(), S7(),
      C1(), C2(), C3(),
  };
}

}  // namespace safex::containment
