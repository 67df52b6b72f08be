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
#include "tests/support/other_user.h"
#include "tests/support/test_host_config.h"

namespace safex::containment {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// python-untrusted (the tightest example for untrusted code), the policy most cases run under.
constexpr int kPids = 32;
constexpr int kOpenFiles = 256;
constexpr uint64_t kMemory = 256 * kMiB;
constexpr uint64_t kTmpfs = 64 * kMiB;        // /tmp
constexpr uint64_t kOutputMount = 16 * kMiB;  // /data/out
constexpr uint64_t kDisk = 64 * kMiB;         // RLIMIT_FSIZE
constexpr double kWallLimit = 10.0;
// What `safex` itself may use while a hostile program runs (bounded, well under the program's).
constexpr uint64_t kSupervisorRssKib = 160 * 1024;

Invocation Probe(std::vector<std::string> argv, std::string label = "") {
  Invocation inv;
  inv.label = std::move(label);
  inv.argv = std::move(argv);
  return inv;
}

// The resource cases whose probe does real work before its limit (touching memory, writing
// files) run under base-untrusted - python-untrusted's scratch, disk and output limits, but 20
// CPU-s and 30 s of wall time - with the memory limit tightened to `memory`. On a slow backend
// (a microVM under TCG emulation runs a probe many times slower) the limit under test is then
// what stops the probe, not the CPU clock.
Invocation Roomy(Invocation inv, uint64_t memory) {
  inv.policy = "base-untrusted";
  inv.policy_extra = "  limits {\n    memory = " + std::to_string(memory >> 20) + "MiB\n  }\n";
  return inv;
}

bool In(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (v == a) return true;
  }
  return false;
}

bool IsErrnoValue(const std::string& v) {
  return v == "OK" ||
         (v.size() > 1 && v[0] == 'E' &&
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
  c.Expect(r.verdict() == verdict, "verdict " + r.verdict() + ", expected " + verdict + what +
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

// The `safex` process whose memory a run's record measured: `safex run` itself, or the
// `safex submit` client (the service's own peak is checked with the host, Suite::CheckHost).
std::string SupervisorName(const CaseEnv& env) { return env.submit ? "safex submit" : "safex"; }

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
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Probe({"r1_fork_bomb"}, "copes"),
                                   Probe({"r1_fork_bomb", "--fail-at-limit"}, "gives up")};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    // A program that copes with the failed fork ends ok, with the limit recorded; one that gives
    // up (exit 3) gets the verdict pids-limit. Either way the audit row names the limit.
    ExpectVerdict(k, rs[0], "ok", 0);
    ExpectVerdict(k, rs[1], "pids-limit", 3);
    for (const RunRecord& r : rs) {
      std::string l = " [" + r.inv.label + "]";
      k.Expect(Fired(r, "pids"), "limits_fired does not name pids" + l);
      k.Expect(r.audit && Has(r.audit->run.limits_fired, "pids"),
               "the audit row does not name pids" + l);
      int64_t forks = r.ObsInt("forks"), threads = r.ObsInt("threads");
      k.Expect(forks >= 0 && forks < kPids,
               "forked " + std::to_string(forks) + " children (pids = 32)" + l);
      k.Expect(threads >= 0 && threads < kPids,
               "created " + std::to_string(threads) + " threads" + l);
      k.Expect(r.Obs("fork_errno") == "EAGAIN", "fork failed with " + r.Obs("fork_errno") + l);
      k.Expect(r.Obs("thread_errno") == "EAGAIN",
               "pthread_create failed with " + r.Obs("thread_errno") + l);
    }
    k.Summary(rs[0].ProbeResult() +
              " (pids = 32); limits_fired pids; verdict ok when the program "
              "copes, pids-limit when it gives up");
  };
  return c;
}

// R2's heap bomb (Roomy): a microVM under TCG touches memory slowly, and its in-guest CPU clock
// also counts the host's contention; half python-untrusted's limit keeps that well inside 20 CPU-s.
constexpr uint64_t kR2Memory = 128 * kMiB;

Case R2() {
  Case c{"R2", "memory bomb; filling tmpfs or /dev/shm",
         "killed inside the run's memory limit; supervisor unaffected", 3};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{
        Roomy(Probe({"r2_memory_bomb", "heap"}, "heap"), kR2Memory),
        Roomy(Probe({"r2_memory_bomb", "fill", "/tmp", "/dev/shm"}, "fill"), kMemory)};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& heap = rs[0];
    ExpectVerdict(k, heap, "memory-limit", 137);
    k.Expect(Fired(heap, "memory"), "limits_fired does not name memory");
    uint64_t peak = ReportU64(heap, "peak_memory_bytes");
    k.Expect(peak > 0 && peak <= kR2Memory + kR2Memory / 8,
             "peak memory " + Mib(peak) + " (limit " + Mib(kR2Memory) + ")");
    ExpectSupervisorBounded(k, heap);
    const RunRecord& fill = rs[1];
    ExpectVerdict(k, fill, "ok", 0);
    k.Expect(In(fill.Obs("/tmp_errno"), {"ENOSPC", "EFBIG"}) &&
                 static_cast<uint64_t>(fill.ObsInt("/tmp_mib")) <= kTmpfs / kMiB,
             "/tmp took " + fill.Obs("/tmp_mib") + " MiB, then " + fill.Obs("/tmp_errno"));
    k.Expect(
        In(fill.Obs("/dev/shm_errno"), {"ENOSPC", "EFBIG", "EACCES", "ENOENT", "EROFS"}) &&
            static_cast<uint64_t>(fill.ObsInt("/dev/shm_mib")) <= kTmpfs / kMiB,
        "/dev/shm took " + fill.Obs("/dev/shm_mib") + " MiB, then " + fill.Obs("/dev/shm_errno"));
    k.Summary("killed at " + Mib(peak) + " (memory-limit, 137), " + SupervisorName(env) + " " +
              std::to_string(heap.proc.peak_rss_kib >> 10) + " MiB; " + fill.ProbeResult());
  };
  return c;
}

Case R3() {
  Case c{"R3", "disk fill in scratch",
         "ENOSPC or SIGXFSZ at the disk limit; host free space unchanged", 2};
  c.plan = [](CaseEnv&) {
    return std::vector<Invocation>{Roomy(Probe({"r3_disk_fill", "/tmp", "/data/out"}), kMemory)};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(In(r.Obs("/tmp_errno"), {"ENOSPC", "EFBIG"}),
             "/tmp stopped with " + r.Obs("/tmp_errno"));
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

// R4's /tmp run (Roomy): where /tmp has no inode cap of its own and its inodes are the sandbox
// kernel's memory, this limit is what stops the bomb - well within the CPU and wall time.
constexpr uint64_t kR4Memory = 64 * kMiB;
// An inode cap worth the name: reached well before this many files.
constexpr int64_t kR4MaxCap = 65536;

Case R4() {
  Case c{"R4", "inode exhaustion in scratch", "ENOSPC at the cap", 6};
  c.plan = [](CaseEnv&) {
    Invocation out = Roomy(
        Probe({"r4_inode_exhaustion", "--budget", "0", "/data/out"}, "output mount"), kR4Memory);
    Invocation tmp = Roomy(
        Probe({"r4_inode_exhaustion", "--progress", "--budget", "0", "/tmp"}, "/tmp"), kR4Memory);
    return std::vector<Invocation>{out, tmp};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& out = rs[0];
    ExpectVerdict(k, out, "ok", 0);
    int64_t out_files = out.ObsInt("/data/out_files");
    k.Expect(out.Obs("/data/out_errno") == "ENOSPC" && out_files >= 0 && out_files <= kR4MaxCap,
             "/data/out: no inode cap: " + out.Obs("/data/out_files") +
                 " files created, stopped by " +
                 (out.Obs("/data/out_errno") == "OK" ? out.Obs("/data/out_stop")
                                                     : out.Obs("/data/out_errno")) +
                 " (expected ENOSPC)");
    std::string summary = "/data/out ENOSPC after " + out.Obs("/data/out_files") + " files";
    const RunRecord& tmp = rs[1];
    if (tmp.verdict() == "ok" || env.backend != "gvisor") {
      // A tmpfs with an inode cap: ENOSPC, and the run goes on.
      ExpectVerdict(k, tmp, "ok", 0);
      int64_t files = tmp.ObsInt("/tmp_files");
      k.Expect(tmp.Obs("/tmp_errno") == "ENOSPC" && files >= 0 && files <= kR4MaxCap,
               "/tmp: no inode cap: " + tmp.Obs("/tmp_files") + " files created, stopped by " +
                   (tmp.Obs("/tmp_errno") == "OK" ? tmp.Obs("/tmp_stop") : tmp.Obs("/tmp_errno")) +
                   " (expected ENOSPC)");
      summary += "; /tmp ENOSPC after " + tmp.Obs("/tmp_files") + " files";
    } else {
      // gVisor: the sandbox's /tmp is the Sentry's own tmpfs, and runsc passes only mode, size,
      // uid and gid to it (no nr_inodes). Its inodes are Sentry memory, which is in the run's
      // memory cgroup: the run's memory limit is the cap. Contained only if that is what
      // stopped it: killed at the memory limit, never an escape, the host's inodes untouched
      // (Suite::CheckHost compares free inodes).
      ExpectVerdict(k, tmp, "memory-limit", 137);
      k.Expect(Fired(tmp, "memory"), "limits_fired does not name memory [" + tmp.inv.label + "]");
      uint64_t peak = ReportU64(tmp, "peak_memory_bytes");
      k.Expect(peak > 0 && peak <= kR4Memory + kR4Memory / 8,
               "/tmp run peak memory " + Mib(peak) + " (limit " + Mib(kR4Memory) + ")");
      int64_t files = tmp.ObsInt("in_progress_files");
      k.Expect(files > 0 && tmp.Obs("in_progress") == "/tmp",
               "/tmp: no progress line before the kill: " + tmp.ProbeResult());
      ExpectSupervisorBounded(k, tmp);
      k.Note(
          "gVisor's /tmp has no inode cap of its own (runsc passes only mode, size, uid and gid "
          "to the Sentry's tmpfs); its inodes are Sentry memory charged to the run: the bomb was "
          "killed at the run's memory limit (" +
          Mib(kR4Memory) + ") after more than " + std::to_string(files) +
          " files, host inodes unchanged");
      summary += "; /tmp (no inode cap inside gVisor) killed at the run's " + Mib(kR4Memory) +
                 " memory limit after more than " + std::to_string(files) +
                 " files (memory-limit, 137), host inodes unchanged";
    }
    k.Summary(summary);
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
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
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
              " bytes, truncated); " + SupervisorName(env) + " peak " +
              std::to_string(r.proc.peak_rss_kib >> 10) + " MiB");
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
    k.Expect(cpu_s <= wall_s * 1.25 + 0.5, "used " + std::to_string(cpu_s) + " CPU-s in " +
                                               std::to_string(wall_s) + " s (cpus = 1)");
    char buf[160];
    snprintf(buf, sizeof buf,
             "killed at %s (%s, exit %d): %.1f CPU-s in %.1f s wall with 9 threads",
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
    double wall = ReportU64(r, "wall_ns") / 1e9;
    char buf[200];
    if (r.verdict() == "cpu-limit") {
      // The probe is the init of its own pid namespace, which cannot stop itself where the
      // kernel drops SIGSTOP sent to a namespace init from inside (a guest's Linux kernel): its
      // raise(SIGSTOP) loop spins, and the CPU-time limit ends it before the deadline. Still
      // killed by the supervisor; the trapped signals bought it nothing.
      ExpectVerdict(k, r, "cpu-limit", 152);
      k.Expect(Fired(r, "cpu_time"), "limits_fired does not name cpu_time");
      k.Note(
          "the probe (pid 1 of its namespace) could not stop itself - the kernel ignores "
          "SIGSTOP sent to a namespace init from inside - so its loop spun until the CPU-time "
          "limit killed it");
      snprintf(buf, sizeof buf,
               "trapping; its self-SIGSTOP ignored (namespace init), so it spun: killed at the "
               "CPU-time limit after %.1f s (cpu-limit, 152)",
               wall);
    } else {
      ExpectVerdict(k, r, "timeout", 124);
      snprintf(buf, sizeof buf, "stopped and trapping, killed after %.1f s; timeout, exit 124",
               wall);
    }
    k.Expect(wall <= kWallLimit + 5, "killed after " + std::to_string(wall) + " s");
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
    std::vector<std::string> argv = {"f1_host_secrets",       canary,
                                     env.suite->audit_db(),   env.suite->secret_file(),
                                     env.suite->state_root(), env.suite->work() + "/host.sock"};
    if (env.submit) argv.push_back(env.suite->work() + "/serve/safex.sock");  // the service's
    return std::vector<Invocation>{Probe(argv)};
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
    k.Summary("exactly the policy's " + std::to_string(want.size()) + " variables (" +
              Join(want, " ") + "); the supervisor's secret variable absent");
  };
  return c;
}

Case F3() {
  Case c{"F3", "/proc/1/root, /proc/*/cwd to reach the host", "own pid namespace and /proc only",
         1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe({"f3_proc_root", Canary(env, "canary.txt", "host\n")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("reached").empty(), "host canary reached via " + r.Obs("reached"));
    k.Expect(r.ObsInt("pids_visible") >= 1 && r.ObsInt("pids_visible") <= 3,
             r.Obs("pids_visible") + " processes visible");
    // pid 1 is the sandbox's first process: the program itself, or in a session the session's
    // init (the launcher inside the sandbox that started this command), never a host process.
    const std::string first = env.session ? "/.safex-launch/safex-launch" : "/probes/f3_proc_root";
    k.Expect(r.Obs("pid1_cmdline").find(first) == 0,
             "pid 1 is not the sandbox's own first process: " + r.Obs("pid1_cmdline"));
    ExpectCanariesUnchanged(k, env);
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case F4() {
  Case c{"F4", "write outside scratch (/usr, /, input mounts)",
         "EROFS/EACCES; host files unchanged", 1};
  c.plan = [](CaseEnv& env) {
    std::string target = Canary(env, "target.txt", "host file\n");
    env.vars["new"] = env.dir + "/new.txt";
    Invocation inv =
        Probe({"f4_write_outside", "/usr/safex-f4", "/safex-f4", "/etc/safex-f4", "/bin/safex-f4",
               "/lib/safex-f4", "/probes/safex-f4", "/data/in/safex-f4", "=/data/in/existing.txt",
               "=/usr/bin/env", "=/probes/f4_write_outside", "=" + target, env.vars["new"]});
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
    k.Expect(access((r.input_dir + "/safex-f4").c_str(), F_OK) != 0,
             "created in the input directory");
    k.Summary(r.ProbeResult() + "; host and input unchanged");
  };
  return c;
}

Case F5() {
  Case c{"F5", "output file is a symlink to a host file",
         "collection refuses it; host file untouched", 1};
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
      k.Expect(ReadAll(delivered) == "{\"ok\":true}\n",
               "delivered result.json is not the run's file");
    }
    ExpectCanariesUnchanged(k, env);
    k.Summary(std::string(refused ? "left as a symlink: refused (122)"
                                  : "left as the regular file: collected as written (0)") +
              "; swapper gone before collection; host file untouched (" + r.ProbeResult() + ")");
  };
  return c;
}

Case F7() {
  Case c{"F7", "hardlink a host file into output", "impossible (separate filesystem) or refused",
         1};
  c.plan = [](CaseEnv&) {
    Invocation inv =
        Probe({"f7_output_hardlink", "/data/out", "/usr/bin/env", "/probes/f7_output_hardlink"});
    inv.output = true;
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectAllRefused(k, r, {"EXDEV", "EPERM", "EACCES", "EROFS"}, {"inside_output"});
    // A second name made inside the output itself: refused at collection where the host sees the
    // sandbox's filesystem (st_nlink 2), or - where outputs reach the host as copies (microVM) - a
    // plain copy of what the sandbox wrote. Never a host file.
    bool refused = Has(Refusals(r), "/data/out/result.json:hardlink");
    std::string delivered = r.output_dir + "/result.json";
    if (refused) {
      ExpectVerdict(k, r, "validator-rejected", 122);
    } else {
      ExpectVerdict(k, r, "ok", 0);
      k.Expect(ReadAll(delivered) == "{}\n",
               "result.json (2 links) was neither refused nor the "
               "sandbox's own bytes: " +
                   Join(Refusals(r)));
      k.Note(
          "a hardlink inside the output arrives as a copy of the sandbox's bytes (the output is "
          "copied out of the sandbox, not shared with it)");
    }
    k.Summary(r.ProbeResult() +
              (refused ? "; a second name inside the output refused (hardlink, 122)"
                       : "; a second name inside the output arrives as a plain copy"));
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
    k.Expect(fifo.proc.wall_seconds < 60,
             "collecting a FIFO took " + std::to_string(fifo.proc.wall_seconds) + " s");
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
      k.Note(
          "mknod of a block device node succeeded in the sandbox's /tmp without CAP_MKNOD; the "
          "node cannot be opened (" +
          r.Obs("mknod_node_open") + ")");
    } else {
      k.Expect(In(r.Obs("mknod_block"), {"EPERM", "EACCES", "EROFS"}),
               "mknod: " + r.Obs("mknod_block"));
    }
    if (r.Obs("fuse") == "OK") {
      k.Note("/dev/fuse is present and opens (the sandbox kernel's own device: " +
             r.Obs("dev_entries") + ")");
    }
    std::string mknod = r.Obs("mknod_block") == "OK"
                            ? "mknod of a block node OK but the node cannot be opened (" +
                                  r.Obs("mknod_node_open") + ")"
                            : "mknod " + r.Obs("mknod_block");
    k.Summary("host devices " + r.ProbeResult().substr(0, r.ProbeResult().find(';')) + "; " +
              mknod + "; no block devices; /dev = " + r.Obs("dev_entries"));
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
    k.Expect(r.ObsInt("helper_euid") > 0,
             "the setuid-root copy ran with euid " + r.Obs("helper_euid"));
    k.Expect(r.ObsInt("no_new_privs") == 1, "no_new_privs is " + r.Obs("no_new_privs"));
    // EINVAL: uid 0 does not exist in the run's user namespace (native maps one id only).
    k.Expect(In(r.Obs("setuid0"), {"EPERM", "EINVAL"}), "setuid(0): " + r.Obs("setuid0"));
    k.Summary(r.ProbeResult() + "; no_new_privs = 1");
  };
  return c;
}

// ---------------------------------------------------------------------------------------------
// P: privileges and kernel surface

// argv followed by the host pids a probe aims at: the suite's runner, its parent and, through
// the service, the `safex serve` process.
std::vector<std::string> WithSupervisorPids(std::vector<std::string> argv, CaseEnv& env) {
  argv.push_back(std::to_string(env.suite->runner_pid()));
  argv.push_back(std::to_string(getppid()));
  if (env.submit && env.suite->serve_pid() > 0)
    argv.push_back(std::to_string(env.suite->serve_pid()));
  return argv;
}

Case P1() {
  Case c{"P1", "ptrace the supervisor or another run", "not visible / EPERM", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe(WithSupervisorPids({"p1_ptrace"}, env))};
  };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    const nlohmann::json obs = r.probe.is_object() ? r.probe.value("obs", nlohmann::json::object())
                                                   : nlohmann::json::object();
    for (const auto& [key, v] : obs.items()) {
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
    k.Expect(r.Obs("unshare_newuser") == "EPERM",
             "unshare(CLONE_NEWUSER): " + r.Obs("unshare_newuser"));
    if (r.Obs("clone_newuser") == "OK") {
      k.Expect(In(r.Obs("inner_mount"), {"EPERM", "ENOSYS"}),
               "mount in the new namespace: " + r.Obs("inner_mount"));
      k.Expect(r.Obs("inner_sethostname") != "OK", "sethostname in the new namespace worked");
      k.Note(
          "clone(CLONE_NEWUSER) succeeds (the seccomp rules name unshare, not clone flags); the "
          "namespace is the sandbox kernel's own and grants nothing: mount " +
          r.Obs("inner_mount") + ", sethostname " + r.Obs("inner_sethostname"));
    } else {
      k.Expect(In(r.Obs("clone_newuser"), {"EPERM", "EINVAL", "ENOSYS"}),
               "clone: " + r.Obs("clone_newuser"));
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
    k.Expect(r.Obs("x32_mkdir") != "OK", "the x32 mkdir succeeded");
    // gVisor on ptrace runs the x86_64 call of the gate's number (39: getpid), not i386 mkdir.
    k.Expect(r.Obs("int80_mkdir") != "OK" || r.Obs("int80_native") == "OK",
             "the i386 mkdir succeeded");
    k.Expect(r.Obs("int80_unshare") != "OK" && !r.Obs("int80_unshare").empty(),
             "int 0x80 got past the plan's filter (x86_64 unshare)");
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
  Case c{"N1", "TCP/UDP to any outside address with network denied",
         "unreachable; no packet leaves", 2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    env.vars["targets"] = s->Endpoint("tcp_lo") + " " + s->Endpoint("udp_lo") + " " +
                          s->Endpoint("tcp_world") + " " + s->Endpoint("udp_world") + " " +
                          s->Endpoint("tcp_world2");
    return std::vector<Invocation>{
        Probe({"n1_egress_denied", s->Endpoint("tcp_lo"), s->Endpoint("udp_lo"),
               s->Endpoint("tcp_world"), s->Endpoint("udp_world"), s->Endpoint("tcp_world2")})};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(
        k, r, {"ENETUNREACH", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "EPERM", "EACCES"});
    for (const char* e : {"tcp_lo", "udp_lo", "tcp_world", "udp_world", "tcp_world2"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0,
               "the host endpoint " + env.suite->Endpoint(e) + " received traffic");
    }
    k.Summary(r.ProbeResult() +
              "; host listeners (loopback, 198.18.1.10, 198.19.255.254) saw nothing");
  };
  return c;
}

Case N2() {
  Case c{"N2", "DNS exfiltration", "no query leaves", 2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    std::vector<Invocation> v = {Probe(
        {"n2_dns_exfil", s->Endpoint("dns_lo"), s->Endpoint("udp_world"), s->Endpoint("tcp_world")},
        "network denied")};
    if (s->EgressUnavailable().empty()) {
      // Granted one TCP host:port: DNS to that host, or anywhere else, still goes nowhere.
      Invocation e = Probe({"n2_dns_exfil", s->Endpoint("udp_world"), "udp:198.18.1.11:53",
                            s->Endpoint("udp_granted_port")},
                           "egress granted to 198.18.1.10:8080");
      e.policy_extra = Suite::GrantEgressStatements();
      v.push_back(e);
    }
    return v;
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    for (const RunRecord& r : rs) {
      ExpectVerdict(k, r, "ok", 0);
      ExpectAllRefused(
          k, r, {"ENETUNREACH", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENOENT", "EPERM"});
    }
    for (const char* e : {"dns_lo", "udp_world", "tcp_world", "udp_granted_port"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0,
               "a query reached " + env.suite->Endpoint(e));
    }
    std::string summary = "/etc/resolv.conf " + rs[0].Obs("resolv_conf") + "; queries " +
                          rs[0].ProbeResult() + "; no query reached any resolver";
    if (rs.size() > 1)
      summary += "; with egress granted to one TCP host:port: " + rs[1].ProbeResult();
    k.Summary(summary);
  };
  return c;
}

Case N3() {
  Case c{"N3", "cloud metadata 169.254.169.254 even when some egress is granted", "unreachable", 3};
  c.not_runnable = [](CaseEnv& env) { return env.suite->EgressUnavailable(); };
  c.plan = [](CaseEnv& env) {
    // A policy granting the metadata address is refused at plan time...
    Invocation plan_time = Probe({"n3_metadata", "tcp:198.18.1.10:8080", "tcp:169.254.169.254:80"},
                                 "metadata egress policy");
    plan_time.policy = "notebook-egress";
    plan_time.policy_extra =
        "  @override(\"containment suite: try to grant the metadata service\")\n"
        "  network {\n    default = deny\n    egress \"169.254.169.254:80\"\n  }\n";
    plan_time.expect_refusal = true;
    plan_time.expect_probe_line = false;
    std::vector<Invocation> v = {plan_time};
    // ...and a run granted another destination cannot reach it (something answers there in the
    // suite's world).
    if (env.suite->EgressUnavailable().empty()) {
      Invocation run =
          Probe({"n3_metadata", env.suite->Endpoint("granted"), env.suite->Endpoint("metadata"),
                 "tcp:169.254.170.2:80", "tcp:[fd00:ec2::254]:80"},
                "egress granted to 198.18.1.10:8080");
      run.policy_extra = Suite::GrantEgressStatements();
      v.push_back(run);
    }
    return v;
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    k.Expect(r.Reason().find("does not compile") != std::string::npos,
             "a policy granting 169.254.169.254:80 was not refused at plan time: " + r.Reason());
    std::string diag = r.report.is_object() ? r.report.value("diagnostics", "") : "";
    k.Expect(diag.find("E073") != std::string::npos,
             "no E073 in the diagnostics: " + diag.substr(0, 200));
    std::string summary = "a policy granting 169.254.169.254:80 is refused at plan time (E073)";
    if (rs.size() > 1) {
      const RunRecord& run = rs[1];
      ExpectVerdict(k, run, "ok", 0);
      k.Expect(run.Obs("granted") == "OK",
               "the granted destination was not reachable: " + run.Obs("granted"));
      ExpectAllRefused(k, run,
                       {"ETIMEDOUT", "ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EPERM",
                        "EACCES", "EAFNOSUPPORT", "EADDRNOTAVAIL"},
                       {"granted"});
      k.Expect(env.suite->Hits(env.suite->Endpoint("metadata")) == 0,
               "the metadata listener in the test world was reached");
      uint64_t denied = ReportU64(run, "denied_egress");
      k.Expect(denied > 0, "no denied egress counted");
      std::string result = run.ProbeResult();
      size_t at = result.find("metadata ");
      summary += "; granted 198.18.1.10:8080 " + run.Obs("granted") + ", metadata " +
                 (at == std::string::npos ? result : result.substr(at + 9)) +
                 ", nothing reached the world's 169.254.169.254, " + std::to_string(denied) +
                 " denied attempts counted";
    }
    k.Summary(summary);
  };
  return c;
}

Case N4() {
  Case c{"N4", "the host's loopback services, the supervisor's socket, abstract unix sockets",
         "unreachable", 2};
  c.plan = [](CaseEnv& env) {
    Suite* s = env.suite;
    std::vector<std::string> argv = {"n4_host_loopback", s->Endpoint("tcp_lo"), s->Endpoint("unix"),
                                     s->Endpoint("abstract")};
    // Through the service: its own socket too (the supervisor a run could talk to).
    if (env.submit) argv.push_back("unix:" + s->work() + "/serve/safex.sock");
    return std::vector<Invocation>{Probe(argv)};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r,
                     {"ECONNREFUSED", "ENOENT", "ENETUNREACH", "ETIMEDOUT", "EACCES", "EPERM"});
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
    // The listener listens 20 s, the connector starts 2 s later and tries for 8 s: their windows
    // overlap even when the two sandboxes take different times to start (a microVM boots under
    // emulation); the check confirms it from the windows the probes report. base-untrusted's
    // 30 s of wall time fits both.
    Invocation listen = Probe({"n5_cross_run", "listen", port, name, "20"}, "listener, no network");
    Invocation connect =
        Probe({"n5_cross_run", "connect", "tcp:127.0.0.1:" + port, "abstract:" + name, "8"},
              "connector, no network");
    listen.policy = connect.policy = "base-untrusted";
    listen.group = connect.group = 1;
    connect.start_delay_ms = 2000;
    std::vector<Invocation> v = {listen, connect};
    if (env.suite->EgressUnavailable().empty()) {
      // Both granted egress: each gets its own namespace and link from the pool; the connector
      // tries the sandbox-side address of every slot, the listener's among them.
      Invocation el =
          Probe({"n5_cross_run", "listen", port, name + "-e", "20"}, "listener, egress");
      std::vector<std::string> argv = {"n5_cross_run", "connect"};
      for (const std::string& a : env.suite->PoolSandboxAddresses())
        argv.push_back("tcp:" + a + ":" + port);
      argv.push_back("6");
      Invocation ec = Probe(argv, "connector, egress");
      el.policy = ec.policy = "base-untrusted";
      el.policy_extra = ec.policy_extra = Suite::GrantEgressStatements();
      el.group = ec.group = 2;
      ec.start_delay_ms = 2000;
      v.push_back(el);
      v.push_back(ec);
    }
    return v;
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    for (size_t i = 0; i + 1 < rs.size(); i += 2) {
      const RunRecord& listener = rs[i];
      const RunRecord& connector = rs[i + 1];
      ExpectVerdict(k, listener, "ok", 0);
      ExpectVerdict(k, connector, "ok", 0);
      k.Expect(
          listener.Obs("tcp_listening") == "true" && listener.Obs("abstract_listening") == "true",
          "the listener run could not listen [" + listener.inv.label + "]");
      k.Expect(listener.ObsInt("accepted") == 0,
               "the listener run accepted a connection [" + listener.inv.label + "]");
      ExpectAllRefused(
          k, connector,
          {"ECONNREFUSED", "ENOENT", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH", "EPERM"});
      // The two runs were there at the same time, or the case showed nothing.
      int64_t l_from = listener.ObsInt("from"), l_until = listener.ObsInt("until");
      int64_t c_from = connector.ObsInt("from"), c_until = connector.ObsInt("until");
      k.Expect(l_from > 0 && c_from > 0 && c_from < l_until && c_until > l_from,
               "the connector tried during [" + connector.Obs("from") + ", " +
                   connector.Obs("until") + "], the listener listened during [" +
                   listener.Obs("from") + ", " + listener.Obs("until") + "]: no overlap [" +
                   listener.inv.label + "]");
    }
    std::string summary = "two runs at once, network denied: connector " + rs[1].ProbeResult() +
                          ", listener accepted 0";
    if (rs.size() > 3) {
      summary += "; both granted egress: connector " + rs[3].ProbeResult() + " on all " +
                 std::to_string(env.suite->PoolSandboxAddresses().size()) +
                 " run addresses of the pool, listener accepted 0";
    } else {
      summary += "; with egress: not yet runnable (" + env.suite->EgressUnavailable() + ")";
    }
    k.Summary(summary);
  };
  return c;
}

Case N6() {
  Case c{"N6", "raw/packet sockets, netlink route changes", "EPERM or confined", 1};
  c.plan = [](CaseEnv&) { return std::vector<Invocation>{Probe({"n6_raw_netlink"})}; };
  c.check = [](CaseEnv&, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    ExpectAllRefused(k, r,
                     {"EPERM", "EACCES", "EAFNOSUPPORT", "EPROTONOSUPPORT", "ENOTTY", "EOPNOTSUPP",
                      "ENODEV", "ESOCKTNOSUPPORT"});
    k.Summary(r.ProbeResult());
  };
  return c;
}

Case N7() {
  Case c{"N7", "granted egress host:port, then a different port of the same host",
         "only the granted pair works", 2};
  c.not_runnable = [](CaseEnv& env) { return env.suite->EgressUnavailable(); };
  c.plan = [](CaseEnv& env) {
    if (!env.suite->EgressUnavailable().empty()) return std::vector<Invocation>{};
    Suite* s = env.suite;
    Invocation inv = Probe({"n7_egress_port", s->Endpoint("granted"), s->Endpoint("other_port"),
                            s->Endpoint("tcp_world"), s->Endpoint("other_host"),
                            s->Endpoint("udp_granted_port")});
    inv.policy_extra = Suite::GrantEgressStatements();
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.Obs("granted") == "OK", "the granted pair was not reachable: " + r.Obs("granted"));
    ExpectAllRefused(k, r, {"ETIMEDOUT", "ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EPERM"},
                     {"granted"});
    for (const char* e : {"other_port", "tcp_world", "other_host", "udp_granted_port"}) {
      k.Expect(env.suite->Hits(env.suite->Endpoint(e)) == 0,
               "a destination that was not granted received traffic: " + env.suite->Endpoint(e));
    }
    k.Summary(r.ProbeResult() + "; the world's other listeners saw nothing; " +
              std::to_string(ReportU64(r, "denied_egress")) + " denied attempts counted");
  };
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
    k.Summary("only 0, 1, 2 (" + r.Obs("fds") +
              "), although safex was started holding a host file "
              "and a host directory open");
  };
  return c;
}

Case S2() {
  Case c{"S2", "signal the supervisor", "not visible", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{Probe(WithSupervisorPids({"s2_signal_supervisor"}, env))};
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
    double wall = ReportU64(r, "wall_ns") / 1e9;
    k.Expect(wall < kWallLimit * 0.8,
             "the run waited for the daemon (" + std::to_string(wall) + " s)");
    char buf[128];
    snprintf(buf, sizeof buf, "run ended with the probe after %.1f s; its daemon gone at teardown",
             wall);
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
    Invocation json =
        Probe({"s5_hostile_output", "json", "500000", "/data/out/result.json"}, "nested JSON");
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
      for (const auto& v : utf8.audit->run.validator_results)
        logged += v.name + v.outcome + v.detail;
      k.Expect(!HasRawControl(logged), "the audit log holds raw control bytes");
    }
    k.Expect(!HasRawControl(utf8.Reason()), "the report's reason holds raw control bytes");
    const RunRecord& secret = rs[1];
    ExpectVerdict(k, secret, "validator-rejected", 122);
    k.Expect(secret.proc.out.find("AKIAIOSFODNN7EXAMPLE") == std::string::npos,
             "the secret-shaped string was delivered");
    const RunRecord& json = rs[2];
    ExpectVerdict(k, json, "validator-rejected", 122);
    k.Expect(json.proc.wall_seconds < 30,
             "validating nested JSON took " + std::to_string(json.proc.wall_seconds) + " s");
    ExpectSupervisorBounded(k, json);
    k.Expect(access((json.output_dir + "/result.json").c_str(), F_OK) != 0,
             "the nested JSON was delivered");
    const RunRecord& ansi = rs[3];
    ExpectVerdict(k, ansi, "ok", 0);
    k.Expect(
        ansi.StdoutText().find("red") != std::string::npos && !HasRawControl(ansi.StdoutText()),
        "ANSI escapes not stripped: " +
            ansi.report.value("stdout", nlohmann::json::object()).dump().substr(0, 200));
    char buf[300];
    snprintf(
        buf, sizeof buf,
        "bad UTF-8/ANSI rejected (122), logged escaped; AKIA key rejected (122); 1 MB of nesting "
        "rejected in %.1f s, safex %llu MiB; ANSI stripped under control = strip",
        json.proc.wall_seconds, static_cast<unsigned long long>(json.proc.peak_rss_kib >> 10));
    k.Summary(buf);
  };
  return c;
}

Case S6() {
  Case c{"S6", "argv / environment with shell metacharacters", "passed verbatim, never interpreted",
         1};
  c.plan = [](CaseEnv& env) {
    env.vars["touched"] = env.dir + "/touched-by-shell";
    std::vector<std::string> hostile = {"$(touch " + env.vars["touched"] + ")",
                                        "`touch " + env.vars["touched"] + "`",
                                        "; touch " + env.vars["touched"],
                                        "*",
                                        "a b",
                                        "'\"",
                                        "$HOME",
                                        "\\",
                                        "-x",
                                        "|| true",
                                        "\t\n"};
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
  Case c{"S7",
         "backend missing or broken (runsc absent, cgroups unwritable, nft fails, audit DB "
         "unwritable)",
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
      // The backend's own binary and state: flags `safex run` has for gVisor.
      Invocation missing = refused("runsc missing");
      missing.flags = {"--runsc", "/nonexistent/runsc"};
      std::string fake = env.dir + "/runsc";  // a "runsc" that is not one: /bin/false
      WriteText(fake, ReadAll("/bin/false"));
      chmod(fake.c_str(), 0755);
      Invocation broken = refused("runsc broken");
      broken.flags = {"--runsc", fake};
      Invocation state = refused("state root unusable");
      state.flags = {"--state-root", "/proc/sys/safex-containment-state"};
      v.push_back(missing);
      v.push_back(broken);
      v.push_back(state);
    }
    Invocation cgroups = refused("cgroups unwritable");
    cgroups.readonly_cgroups = true;
    v.push_back(cgroups);
    // The backend absent from what the host offers (its operator switched it off): refused at
    // plan time, never run on the backend the host does offer instead.
    std::string other = env.backend == "gvisor" ? "microvm" : "gvisor";
    std::string offered = env.dir + "/host-without-" + env.backend + ".policy";
    WriteText(offered, "host {\n  backends = [" + other + "]\n}\n");
    env.vars["other_backend"] = other;
    Invocation off = refused("backend not offered by the host");
    off.flags = {"--host-config", offered};
    v.push_back(off);
    // An audit log in a place nobody can write: below a regular file.
    std::string blocker = env.dir + "/not-a-directory";
    WriteText(blocker, "");
    env.vars["audit_unwritable"] = blocker + "/audit.db";
    Invocation audit = refused("audit DB unwritable");
    audit.flags = {"--audit-db", env.vars["audit_unwritable"], "--audit-key",
                   blocker + "/audit.key"};
    v.push_back(audit);
    if (env.suite->EgressUnavailable().empty()) {
      // The network layer broken: egress granted, but the uplink namespace is not there.
      std::string hc = env.dir + "/host-broken-net.policy";
      WriteText(hc, std::string("host {\n") + testing::kTestBackends +
                        "  network {\n    pool = \"198.18.131.64/26\"\n    uplink = "
                        "\"/run/netns/sxcm-missing-uplink\"\n  }\n}\n");
      Invocation net = refused("network setup fails");
      net.policy_extra = Suite::GrantEgressStatements();
      net.flags = {"--host-config", hc};
      v.push_back(net);
    }
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
        // Recorded: CommonChecks found the attempt in the suite's audit log with this verdict.
        k.Expect(r.audit.has_value() && !r.audit->run.reason.empty() && !r.audit->run.exit_code,
                 l + ": the refusal is not in the audit log with its reason");
      }
      if (l == "runsc missing" || l == "runsc broken") {
        k.Expect(r.Reason().find("runsc") != std::string::npos, l + ": reason " + r.Reason());
      }
      if (l == "cgroups unwritable") {
        k.Expect(r.Reason().find("cgroup") != std::string::npos, l + ": reason " + r.Reason());
      }
      if (l == "backend not offered by the host") {
        std::string ran_on = r.report.is_object() ? r.report.value("backend", "") : "";
        k.Expect(ran_on != env.vars["other_backend"], l + ": ran on " + ran_on + " instead");
        std::string diag = r.report.is_object() ? r.report.value("diagnostics", "") : "";
        k.Expect(diag.find("backend " + env.backend + " is not permitted") != std::string::npos,
                 l + ": the diagnostics do not say that " + env.backend +
                     " is not permitted: " + diag.substr(0, 200));
      }
      seen.push_back(l + (r.verdict() == "setup-error" ? " (setup-error)" : ""));
    }
    std::string egress = env.suite->EgressUnavailable();
    std::string summary = "refused (125) before anything ran: " + Join(seen) +
                          "; recorded in the audit log except when the log itself is unwritable";
    if (!egress.empty()) summary += "; network failure: not yet runnable (" + egress + ")";
    if (env.backend != "gvisor") {
      k.Note("no `safex run` flag points the " + env.backend +
             " backend at a missing or broken "
             "binary or state directory (--runsc and --state-root are gVisor's), so only the "
             "backend-independent breakages are tried");
    }
    k.Summary(summary);
  };
  return c;
}

Case S8() {
  Case c{"S8", "another local user reads a run's staged input while it runs",
         "nothing of it is reachable: staged below a 0700 directory of root's", 4};
  c.plan = [](CaseEnv& env) {
    // The caller's input: a 0700 directory of its own with a secret, which the sandbox user must
    // read and uid 65534 on the host must not, from any path under the state root or the
    // microVM state root, while the run goes on.
    const std::string in = env.dir + "/in";
    mkdir(in.c_str(), 0700);
    const std::string secret = "staged-secret-" + env.suite->marker();
    WriteText(in + "/secret.txt", secret);
    env.vars["secret"] = secret;
    Invocation inv = Probe({"/bin/sh", "-c", "cat /data/in/secret.txt; sleep 4"});
    inv.input = true;
    inv.expect_probe_line = false;
    inv.during_delay_ms = 2500;
    auto* vars = &env.vars;
    inv.during = [vars, secret](const std::string& state_root) {
      std::string found, listed;
      bool ran = true;
      for (const std::string& root : {state_root, std::string("/var/lib/safex/microvm")}) {
        testing::OtherUserView v = testing::ViewAs(65534, 65534, root, secret);
        ran = ran && v.ran;
        for (const std::string& p : v.with_needle) found += (found.empty() ? "" : ", ") + p;
        for (const std::string& p : v.listable) {
          if (p.find("/private") != std::string::npos || p.find("/runs/") != std::string::npos) {
            listed += (listed.empty() ? "" : ", ") + p;
          }
        }
      }
      (*vars)["looked"] = ran ? "1" : "0";
      (*vars)["found"] = found;
      (*vars)["listed"] = listed;
    };
    return std::vector<Invocation>{inv};
  };
  c.check = [](CaseEnv& env, const std::vector<RunRecord>& rs, Check& k) {
    const RunRecord& r = rs[0];
    ExpectVerdict(k, r, "ok", 0);
    k.Expect(r.StdoutText().find(env.vars["secret"]) != std::string::npos,
             "the sandbox user could not read its own input");
    k.Expect(env.vars["looked"] == "1", "uid 65534 could not be set up to look");
    k.Expect(env.vars["found"].empty(), "uid 65534 read the staged input at " + env.vars["found"]);
    k.Expect(env.vars["listed"].empty(), "uid 65534 listed " + env.vars["listed"]);
    k.Summary(
        "the sandbox read its input; uid 65534 read nothing of it under the state roots "
        "during the run");
  };
  return c;
}

Case S9() {
  Case c{"S9", "program argv that looks like safex options (--runsc, --stdin, --input, ...)",
         "the program's own arguments, byte for byte; no option of safex is taken from them", 1};
  c.plan = [](CaseEnv& env) {
    // Each, if taken as safex's own option, leaves a mark the check looks for.
    const std::string fake_runsc = env.dir + "/evil-runsc";
    env.vars["marker"] = env.dir + "/evil-runsc-ran";
    WriteText(fake_runsc, "#!/bin/sh\necho ran > " + env.vars["marker"] + "\nexit 1\n");
    chmod(fake_runsc.c_str(), 0755);
    env.vars["output"] = env.dir + "/evil-output";
    env.vars["audit"] = env.dir + "/evil-audit.db";
    std::vector<std::string> hostile = {
        "--runsc",  fake_runsc,  "--stdin",          "/etc/shadow", "--input",
        "/root",    "--output",  env.vars["output"], "--audit-db",  env.vars["audit"],
        "--policy", "/dev/null", "--json",           "--"};
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
    k.Expect(access(env.vars["marker"].c_str(), F_OK) != 0, "the program's --runsc was executed");
    k.Expect(access(env.vars["output"].c_str(), F_OK) != 0, "the program's --output was used");
    k.Expect(access(env.vars["audit"].c_str(), F_OK) != 0, "the program's --audit-db was used");
    k.Summary(std::to_string(n) +
              " option-shaped arguments arrived byte for byte; none was taken by safex");
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
      k.Note(
          "runtime binaries visible read-only inside (the example policies bind the host's "
          "/usr): " +
          Join(visible) + "; every write open fails and their hashes are unchanged");
    }
    k.Summary(r.ProbeResult() +
              " on every write open; /proc/self/exe is the probe's own; runtime "
              "hashes unchanged");
  };
  return c;
}

Case C2() {
  Case c{"C2", "cwd through a leaked host fd (CVE-2024-21626 shape)",
         "no host directory fds reach the sandbox", 1};
  c.plan = [](CaseEnv& env) {
    return std::vector<Invocation>{
        Probe({"c2_leaked_fd_cwd", Canary(env, "canary.txt", "host\n")})};
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
  Case c{"C3", "cgroup release_agent escape (CVE-2022-0492 shape)", "no writable cgroupfs inside",
         1};
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
      R1(),
      R2(),
      R3(),
      R4(),
      R5(),
      R6(),
      R7(),
      R8(),
      R9(),
      F1(),
      F2(),
      F3(),
      F4(),
      F5(),
      F6(),
      F7(),
      F8(),
      F9(),
      F10(),
      F11(),
      P1(),
      P2(),
      P3(),
      SyscallCase("P4", "init_module, kexec_load, bpf, perf_event_open", "EPERM/ENOSYS",
                  "p4_kernel_syscalls"),
      SyscallCase("P5", "keyctl / add_key", "EPERM/ENOSYS", "p5_keyring"),
      SyscallCase("P6", "userfaultfd", "EPERM/ENOSYS", "p6_userfaultfd"),
      SyscallCase("P7", "io_uring_setup", "EPERM/ENOSYS", "p7_io_uring"),
      P8(),
      P9(),
      N1(),
      N2(),
      N3(),
      N4(),
      N5(),
      N6(),
      N7(),
      S1(),
      S2(),
      S3(),
      S4(),
      S5(),
      S6(),
      S7(),
      S8(),
      S9(),
      C1(),
      C2(),
      C3(),
  };
}

}  // namespace safex::containment
