#include "tests/containment/suite.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "common/sha256.h"
#include "tests/support/leak_check.h"

extern char** environ;

namespace safex::containment {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_sigusr1{0};
void OnSigusr1(int) { ++g_sigusr1; }

std::string ReadFile(const std::string& path, size_t cap = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > cap) s.resize(cap);
  return s;
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs sv;
  if (statvfs(path.c_str(), &sv) != 0) return 0;
  return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Markdown table cells: one line, no pipes.
std::string CellText(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  if (out.size() > 260) out = out.substr(0, 257) + "...";
  return out;
}

std::string Now() {
  time_t t = time(nullptr);
  char buf[64];
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

bool PlanTimeRefusal(const std::string& reason) {
  return reason.find("does not compile") != std::string::npos ||
         reason.find("plan refused") != std::string::npos;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
std::string RunRecord::verdict() const {
  return report.is_object() && report.contains("verdict") && report["verdict"].is_string()
             ? report["verdict"].get<std::string>()
             : "";
}

std::string RunRecord::run_id() const {
  return report.is_object() && report.contains("run_id") && report["run_id"].is_string()
             ? report["run_id"].get<std::string>()
             : "";
}

std::string RunRecord::Obs(const std::string& key) const {
  if (!probe.is_object() || !probe.contains("obs") || !probe["obs"].contains(key)) return "";
  const auto& v = probe["obs"][key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

int64_t RunRecord::ObsInt(const std::string& key, int64_t missing) const {
  if (!probe.is_object() || !probe.contains("obs") || !probe["obs"].contains(key)) return missing;
  const auto& v = probe["obs"][key];
  return v.is_number_integer() ? v.get<int64_t>() : missing;
}

std::string RunRecord::ProbeResult() const {
  return probe.is_object() && probe.contains("result") && probe["result"].is_string()
             ? probe["result"].get<std::string>()
             : "";
}

std::string RunRecord::Reason() const {
  return report.is_object() && report.contains("reason") && report["reason"].is_string()
             ? report["reason"].get<std::string>()
             : "";
}

std::string RunRecord::StdoutText() const {
  if (!report.is_object() || !report.contains("stdout") || !report["stdout"].is_object()) return "";
  const auto& t = report["stdout"]["text"];
  return t.is_string() ? t.get<std::string>() : "";
}

bool Check::Expect(bool ok, const std::string& what) {
  if (!ok) failures_.push_back(what);
  return ok;
}

const char* CellStateName(CellState s) {
  switch (s) {
    case CellState::kContained: return "contained";
    case CellState::kNotContained: return "NOT CONTAINED";
    case CellState::kRefusedAtPlan: return "refused at plan time";
    case CellState::kBackendNotAvailable: return "backend not available";
    case CellState::kNotYetRunnable: return "not yet runnable";
  }
  return "?";
}

FileState FileState::Of(const std::string& path) {
  FileState s;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.sha256 = S_ISREG(st.st_mode) ? Sha256Hex(ReadFile(path, 512 << 20)) : "(not a regular file)";
  return s;
}

// ---------------------------------------------------------------------------------------------
Suite::Suite(SuiteOptions options) : o_(std::move(options)), cases_(Catalogue()) {}

Suite::~Suite() {
  listeners_.reset();
  if (!world_netns_.empty()) {
    RunWatched({{"/usr/sbin/ip", "netns", "del", world_netns_}, {"PATH=/usr/sbin:/usr/bin"}});
  }
  if (leaked_file_fd_ >= 0) close(leaked_file_fd_);
  if (leaked_dir_fd_ >= 0) close(leaked_dir_fd_);
  signal(SIGUSR1, SIG_DFL);
  std::error_code ec;
  if (!work_.empty()) fs::remove_all(work_, ec);
}

int Suite::sigusr1_count() const { return g_sigusr1.load(); }

std::string Suite::Endpoint(const std::string& name) const {
  auto it = endpoints_.find(name);
  return it == endpoints_.end() ? "" : it->second;
}

bool Suite::SetUp() {
  started_at_ = Now();
  if (geteuid() != 0) {
    error_ = "the containment suite needs root (safex run)";
    return false;
  }
  char tmpl[] = "/tmp/sxtest-containment-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    error_ = std::string("mkdtemp: ") + strerror(errno);
    return false;
  }
  work_ = tmpl;
  probes_ = work_ + "/probes";
  state_root_ = work_ + "/state";
  policy_dir_ = work_ + "/policies";
  for (const std::string& d : {probes_, state_root_, policy_dir_, work_ + "/audit", work_ + "/cases"}) {
    if (mkdir(d.c_str(), 0700) != 0) {
      error_ = "mkdir " + d + ": " + strerror(errno);
      return false;
    }
  }
  chmod(probes_.c_str(), 0755);
  audit_db_ = work_ + "/audit/audit.db";
  audit_key_ = work_ + "/audit/audit.key";

  // The probes, root-owned and read-only to the sandbox; plus a setuid-root copy for F11.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.probes_dir, ec)) {
    if (!e.is_regular_file() || access(e.path().c_str(), X_OK) != 0) continue;
    std::string to = probes_ + "/" + e.path().filename().string();
    fs::copy_file(e.path(), to, fs::copy_options::overwrite_existing, ec);
    if (ec || chown(to.c_str(), 0, 0) != 0 || chmod(to.c_str(), 0755) != 0) {
      error_ = "copying probe " + e.path().string() + ": " + ec.message();
      return false;
    }
  }
  if (access((probes_ + "/f11_setuid").c_str(), X_OK) != 0) {
    error_ = "no probes in " + o_.probes_dir + " (build the containment_probes target)";
    return false;
  }
  fs::copy_file(probes_ + "/f11_setuid", probes_ + "/f11_setuid_root", ec);
  if (ec || chmod((probes_ + "/f11_setuid_root").c_str(), 04755) != 0) {
    error_ = "setuid copy for F11 failed";
    return false;
  }

  // A secret only the supervisor's side has: in its environment, in a file it holds open, under
  // a directory it holds open.
  marker_ = "sxcm" + RandomHex(8);
  secret_file_ = work_ + "/secret.txt";
  if (!WriteFile(secret_file_, "secret " + marker_ + "\n", 0600)) {
    error_ = "cannot write " + secret_file_;
    return false;
  }
  leaked_file_fd_ = open(secret_file_.c_str(), O_RDONLY | O_CLOEXEC);
  leaked_dir_fd_ = open(work_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  signal(SIGUSR1, OnSigusr1);

  // Endpoints the network probes try: the host's loopback, unix sockets, and an "outside world"
  // namespace of the suite's own (198.18.1.10 and 198.19.255.254 on its loopback).
  listeners_ = std::make_unique<HostListeners>();
  endpoints_["tcp_lo"] = listeners_->Tcp("127.0.0.1");
  endpoints_["udp_lo"] = listeners_->Udp("127.0.0.1");
  endpoints_["dns_lo"] = listeners_->Udp("127.0.0.1");
  endpoints_["unix"] = listeners_->Unix(work_ + "/host.sock");
  endpoints_["abstract"] = listeners_->Abstract("safex-containment-" + std::to_string(getpid()));
  world_netns_ = "sxcm-" + std::to_string(getpid());
  const std::vector<std::string> path_env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{
           {"/usr/sbin/ip", "netns", "add", world_netns_},
           {"/usr/sbin/ip", "-n", world_netns_, "link", "set", "lo", "up"},
           {"/usr/sbin/ip", "-n", world_netns_, "addr", "add", "198.18.1.10/32", "dev", "lo"},
           {"/usr/sbin/ip", "-n", world_netns_, "addr", "add", "198.19.255.254/32", "dev", "lo"}}) {
    ProcessResult r = RunWatched({cmd, path_env});
    if (r.status != 0) {
      error_ = "test network namespace: " + Trim(r.err);
      return false;
    }
  }
  int world_fd = open(("/run/netns/" + world_netns_).c_str(), O_RDONLY | O_CLOEXEC);
  endpoints_["tcp_world"] = listeners_->Tcp("198.18.1.10", 80, world_fd);
  endpoints_["udp_world"] = listeners_->Udp("198.18.1.10", 53, world_fd);
  endpoints_["tcp_world2"] = listeners_->Tcp("198.19.255.254", 443, world_fd);
  if (world_fd >= 0) close(world_fd);
  for (const auto& [name, spec] : endpoints_) {
    if (spec.empty()) {
      error_ = "listener " + name + ": " + listeners_->error();
      return false;
    }
  }
  listeners_->Start();

  // The host as it is before any run.
  for (const std::string& f : {std::string("/usr/local/bin/runsc"), o_.safex, secret_file_,
                               std::string("/usr/bin/qemu-system-x86_64")}) {
    host_files_[f] = FileState::Of(f);
  }
  for (const auto& e : fs::directory_iterator(probes_, ec)) {
    host_files_[e.path().string()] = FileState::Of(e.path().string());
  }
  std::vector<std::string> settings = {"/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
                                       "/sys/kernel/uevent_helper",
                                       "/sys/kernel/mm/transparent_hugepage/enabled",
                                       "/sys/class/net/lo/mtu"};
  for (const std::string& point : CgroupMountPoints()) settings.push_back(point + "/release_agent");
  for (const std::string& s : settings) {
    if (access(s.c_str(), R_OK) == 0) host_settings_[s] = ReadFile(s, 4096);
  }
  for (const std::string& p : {std::string("/tmp"), work_, std::string("/var/lib"),
                               std::string("/run")}) {
    free_bytes_[p] = FreeBytes(p);
  }
  testing::LeakCheckOptions lo;
  lo.state_root = state_root_;
  leak_baseline_ = testing::LeakSnapshot::Take(lo).items;
  return true;
}

std::string Suite::WrapperPolicy(const std::string& example, const std::string& backend,
                                 const std::string& extra) {
  std::lock_guard<std::mutex> l(mu_);
  std::string key = example + "\n" + backend + "\n" + extra;
  auto it = policies_.find(key);
  if (it != policies_.end()) return it->second;
  std::string name = "containment-" + example + "-" + backend + "-" + Sha256Hex(key).substr(0, 8);
  std::string text = "# Written by the containment suite: the example policy \"" + example +
                     "\", unchanged but for the probes (bound read-only at /probes)" +
                     (backend == "gvisor" ? "" : " and the backend") + ".\n";
  text += "policy \"" + name + "\" extends \"" + example + "\" {\n";
  // Tightening: gvisor -> microvm is allowed by `extends`; the base examples all say gvisor.
  if (backend != "gvisor") text += "  isolation = " + backend + "\n";
  text += "  @override(\"containment suite: the probe programs, read-only\")\n";
  text += "  mount bind \"" + probes_ + "\" at \"/probes\" { mode = ro }\n";
  text += extra;
  text += "}\n";
  std::string path = policy_dir_ + "/" + name + ".policy";
  WriteFile(path, text);
  policies_[key] = path;
  return path;
}

std::vector<std::string> Suite::PolicyEnvNames(const std::string& example,
                                               const std::string& backend) {
  std::string policy = WrapperPolicy(example, backend, "");
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = env_names_.find(policy);
    if (it != env_names_.end()) return it->second;
  }
  ProcessResult r = RunWatched({{o_.safex, "compile", "--search-path",
                                 o_.source_dir + "/policies/examples", policy},
                                {"PATH=/usr/bin:/bin"}});
  std::vector<std::string> names;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_object() && j.contains("plan") && j["plan"].is_object()) j = j["plan"];
  if (j.is_object() && j.contains("env") && j["env"].is_object()) {
    for (const auto& [k, v] : j["env"].items()) names.push_back(k);
  }
  std::sort(names.begin(), names.end());
  std::lock_guard<std::mutex> l(mu_);
  env_names_[policy] = names;
  return names;
}

std::string Suite::EgressUnavailable() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (egress_) return *egress_;
  }
  // A run granted one literal destination in the suite's own test range. The probe sends
  // nothing; whether the run starts at all is the question.
  CaseEnv env{this, "gvisor", work_ + "/cases/egress-detect", {}};
  mkdir(env.dir.c_str(), 0700);
  Invocation inv;
  inv.label = "egress detection";
  inv.policy_extra =
      "  @override(\"containment suite: does safex run grant egress yet?\")\n"
      "  network {\n    default = deny\n    egress \"198.18.1.10:80\"\n  }\n";
  inv.argv = {"s6_argv_verbatim", "egress"};
  RunRecord r = Execute(inv, env);
  std::string why;
  if (r.verdict() == "ok") {
    why = "";
  } else if (r.Reason().find("network provider") != std::string::npos) {
    why = "needs egress in `safex run` (drivers/net is not wired into it yet)";
  } else {
    why = "egress run failed: " + r.verdict() + ": " + r.Reason();
  }
  std::lock_guard<std::mutex> l(mu_);
  egress_ = why;
  return why;
}

RunRecord Suite::Execute(const Invocation& inv, CaseEnv& env) {
  RunRecord r;
  r.inv = inv;
  r.policy_path = WrapperPolicy(inv.policy, env.backend, inv.policy_extra);
  auto has_flag = [&](const std::string& f) {
    return std::find(inv.flags.begin(), inv.flags.end(), f) != inv.flags.end();
  };
  std::vector<std::string> args = {o_.safex, "run", "--policy", r.policy_path, "--search-path",
                                   o_.source_dir + "/policies/examples", "--json"};
  std::string db = audit_db_;
  if (!has_flag("--audit-db")) {
    args.insert(args.end(), {"--audit-db", audit_db_, "--audit-key", audit_key_});
  } else {
    db.clear();  // the case chose another log (S7): nothing to look up here
  }
  if (!has_flag("--state-root")) args.insert(args.end(), {"--state-root", state_root_});
  std::string tag = inv.label.empty() ? "run" : inv.label;
  for (char& c : tag) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '-';
  }
  if (inv.input) {
    r.input_dir = env.dir + "/in";
    if (access(r.input_dir.c_str(), F_OK) != 0) {
      mkdir(r.input_dir.c_str(), 0755);
      WriteFile(r.input_dir + "/existing.txt", "input file\n");
    }
    args.insert(args.end(), {"--input", r.input_dir});
  }
  if (inv.output) {
    r.output_dir = env.dir + "/out-" + tag;
    args.insert(args.end(), {"--output", r.output_dir});
  }
  args.insert(args.end(), inv.flags.begin(), inv.flags.end());
  args.push_back("--");
  for (size_t i = 0; i < inv.argv.size(); ++i) {
    args.push_back(i == 0 && !inv.argv[0].empty() && inv.argv[0][0] != '/' ? "/probes/" + inv.argv[0]
                                                                          : inv.argv[i]);
  }
  ProcessOptions po;
  po.argv = args;
  for (char** e = environ; *e != nullptr; ++e) po.env.emplace_back(*e);
  po.env.push_back("SAFEX_CONTAINMENT_SECRET=" + marker_);
  po.leaked_fds = {leaked_file_fd_, leaked_dir_fd_};
  po.readonly_cgroups = inv.readonly_cgroups;
  po.deadline = std::chrono::seconds(180);
  if (inv.start_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(inv.start_delay_ms));
  r.proc = RunWatched(po);
  r.report = nlohmann::json::parse(r.proc.out, nullptr, false);
  if (r.report.is_discarded()) r.report = nullptr;
  std::istringstream lines(r.StdoutText());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("case")) r.probe = j;
  }
  std::string id = r.run_id();
  if (!id.empty() && !db.empty()) {
    audit::AuditOptions ao;
    ao.read_only = true;
    auto log = audit::AuditLog::Open(db, ao);
    if (!log.ok()) {
      r.audit_error = log.status().message();
    } else {
      auto d = (*log)->GetRun(id);
      if (d.ok()) {
        r.audit = *d;
      } else {
        r.audit_error = d.status().message();
      }
    }
  }
  testing::LeakCheckOptions lo;
  lo.state_root = state_root_;
  bool egress = r.report.is_object() && r.report.contains("backend_mode") &&
                r.report["backend_mode"].is_string() &&
                r.report["backend_mode"].get<std::string>().find("netns") != std::string::npos;
  if (!id.empty()) {
    // Teardown is synchronous in `safex run`; a short settle covers the kernel reaping.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    do {
      r.leftovers = testing::ResourcesNamingRun(id, lo, egress);
      if (r.leftovers.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < until);
  }
  return r;
}

void Suite::DiscoverBackends() {
  for (const std::string& b : kBackends) {
    CaseEnv env{this, b, work_ + "/cases/discover-" + b, {}};
    mkdir(env.dir.c_str(), 0700);
    Invocation inv;
    inv.label = "discovery";
    inv.argv = {"s6_argv_verbatim", "hello"};
    RunRecord r = Execute(inv, env);
    BackendStatus s;
    if (r.verdict() == "ok" && r.probe.is_object()) {
      s.available = true;
    } else if (r.Reason().find("not available in this build") != std::string::npos) {
      s.reason = "backend not available";
    } else if (r.report.is_object()) {
      s.reason = "backend not available: " + r.verdict() + ": " + r.Reason();
    } else {
      s.reason = "backend not available: safex printed no report: " + Trim(r.proc.err);
    }
    backends_[b] = s;
  }
}

void Suite::CommonChecks(const RunRecord& r, const std::string& backend, Check& c) const {
  const std::string what = r.inv.label.empty() ? "" : " [" + r.inv.label + "]";
  if (!c.Expect(!r.proc.spawn_failed, "safex could not be started" + what + ": " + r.proc.err)) return;
  c.Expect(!r.proc.timed_out, "safex did not finish within its deadline" + what);
  if (!c.Expect(r.report.is_object(), "safex --json printed no report" + what + ": " +
                                          r.proc.out.substr(0, 200) + " " + r.proc.err.substr(0, 300))) {
    return;
  }
  c.Expect(r.report.contains("exit_status") && r.report["exit_status"] == r.proc.status,
           "exit status " + std::to_string(r.proc.status) + " differs from the report's" + what);
  const std::string v = r.verdict();
  const std::string id = r.run_id();
  c.Expect(!id.empty(), "the report has no run id" + what);
  if (r.inv.expect_refusal) {
    c.Expect(v == "refused" || v == "setup-error", "expected a refusal, got verdict " + v + what);
    c.Expect(r.proc.status == 125, "expected exit 125, got " + std::to_string(r.proc.status) + what);
    c.Expect(r.StdoutText().empty() && !r.probe.is_object(),
             "the program ran although the run should have been refused" + what);
  } else if (v != "refused") {
    c.Expect(r.report["backend"] == backend,
             "ran on backend " + r.report["backend"].dump() + ", not " + backend + what);
    if (r.inv.expect_probe_line) {
      c.Expect(r.probe.is_object(), "no probe result line in stdout" + what + " (verdict " + v +
                                        ", stdout " + r.StdoutText().substr(0, 120) + ")");
    }
    if (r.probe.is_object()) {
      c.Expect(r.probe.contains("escaped") && r.probe["escaped"] == false,
               "the probe reports that it escaped" + what + ": " + r.ProbeResult());
    }
  }
  // The audit log has the run, with the same verdict, finished or refused.
  if (!id.empty() && std::find(r.inv.flags.begin(), r.inv.flags.end(), "--audit-db") ==
                         r.inv.flags.end()) {
    if (c.Expect(r.audit.has_value(), "no audit row for run " + id + what + ": " + r.audit_error)) {
      c.Expect(r.audit->run.verdict == v,
               "audit verdict " + r.audit->run.verdict + " != reported " + v + what);
      std::string want_state = v == "refused" ? "refused" : "finished";
      // A setup error after the start event is a finished run; before it, a refusal.
      bool state_ok = r.audit->run.state == want_state ||
                      (v == "setup-error" && r.audit->run.state == "refused");
      c.Expect(state_ok, "audit state " + r.audit->run.state + " for verdict " + v + what);
    }
  }
  if (!r.leftovers.empty()) {
    std::string l;
    for (const auto& s : r.leftovers) l += (l.empty() ? "" : "; ") + s;
    c.Expect(false, "left behind after run " + id + what + ": " + l);
  }
}

void Suite::RunCase(const Case& c, const std::string& backend) {
  auto start = std::chrono::steady_clock::now();
  CaseEnv env{this, backend, work_ + "/cases/" + c.id + "-" + backend, {}};
  mkdir(env.dir.c_str(), 0755);
  Cell cell;
  std::string not_runnable = c.not_runnable ? c.not_runnable(env) : "";
  // A case that cannot run yet may still have a part that runs now (N3: the plan-time refusal);
  // the cell then stays "not yet runnable" unless that part fails.
  std::vector<Invocation> invs = c.plan ? c.plan(env) : std::vector<Invocation>{};
  if (invs.empty()) {
    cell.state = CellState::kNotYetRunnable;
    cell.text = "not yet runnable: " + (not_runnable.empty() ? "no runs" : not_runnable);
  } else {
    std::vector<RunRecord> records(invs.size());
    // Invocations run in order; those sharing a non-zero group run at the same time.
    for (size_t i = 0; i < invs.size();) {
      size_t j = i + 1;
      if (invs[i].group != 0) {
        while (j < invs.size() && invs[j].group == invs[i].group) ++j;
      }
      std::vector<std::thread> threads;
      for (size_t k = i; k < j; ++k) {
        threads.emplace_back([&, k] { records[k] = Execute(invs[k], env); });
      }
      for (auto& t : threads) t.join();
      i = j;
    }
    Check check;
    for (const RunRecord& r : records) CommonChecks(r, backend, check);
    c.check(env, records, check);
    std::string plan_refusal;
    for (const RunRecord& r : records) {
      if (!r.inv.expect_refusal && r.verdict() == "refused" && PlanTimeRefusal(r.Reason())) {
        plan_refusal = r.Reason();
      }
    }
    cell.failures = check.failures();
    cell.notes = check.notes();
    if (!plan_refusal.empty()) {
      // Nothing ran: the backend would not take the policy. Listed as such, never as a pass (the
      // checks that failed because nothing ran are kept in the details).
      cell.state = CellState::kRefusedAtPlan;
      cell.text = "refused at plan time: " + plan_refusal;
    } else if (!check.ok()) {
      cell.state = CellState::kNotContained;
      cell.text = "NOT CONTAINED: " + check.failures().front();
    } else if (!not_runnable.empty()) {
      cell.state = CellState::kNotYetRunnable;
      cell.text = "not yet runnable: " + not_runnable + " (shown now: " + check.summary() + ")";
    } else {
      cell.state = CellState::kContained;
      cell.text = "contained: " + check.summary();
    }
    cell.runs = std::move(records);
  }
  cell.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> l(mu_);
  cells_[c.id][backend] = std::move(cell);
}

void Suite::RunAll() {
  auto start = std::chrono::steady_clock::now();
  struct Job {
    const Case* c;
    std::string backend;
  };
  std::vector<Job> jobs;
  for (const Case& c : cases_) {
    if (!o_.only_cases.empty() &&
        std::find(o_.only_cases.begin(), o_.only_cases.end(), c.id) == o_.only_cases.end()) {
      continue;
    }
    for (const std::string& b : kBackends) {
      const BackendStatus& s = backends_[b];
      if (!s.available) {
        Cell cell;
        cell.state = CellState::kBackendNotAvailable;
        cell.text = s.reason;
        cells_[c.id][b] = cell;
        continue;
      }
      jobs.push_back({&c, b});
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return a.c->weight > b.c->weight; });
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, o_.jobs); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) RunCase(*jobs[i].c, jobs[i].backend);
    });
  }
  for (auto& t : workers) t.join();
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Suite::CheckHost() {
  for (const auto& [path, before] : host_files_) {
    FileState after = FileState::Of(path);
    if (!(after == before)) host_failures_.push_back("host file changed: " + path);
  }
  for (const auto& [path, before] : host_settings_) {
    std::string after = ReadFile(path, 4096);
    if (after != before) {
      host_failures_.push_back("host setting changed: " + path + ": '" + Trim(before) + "' -> '" +
                               Trim(after) + "'");
    }
  }
  // Other work on this machine moves free space too; a sandbox that wrote to the host's disk
  // would have written up to 1 GiB (the probes' cap), so 256 MiB is the tolerance.
  constexpr uint64_t kTolerance = 256ull << 20;
  for (const auto& [path, before] : free_bytes_) {
    uint64_t after = FreeBytes(path);
    if (after + kTolerance < before) {
      host_failures_.push_back("free space of " + path + " dropped from " +
                               std::to_string(before >> 20) + " MiB to " +
                               std::to_string(after >> 20) + " MiB");
    }
    host_notes_.push_back("free space of " + path + ": " + std::to_string(before >> 20) +
                          " MiB before, " + std::to_string(after >> 20) + " MiB after");
  }
  if (g_sigusr1.load() != 0) {
    host_failures_.push_back("the runner received " + std::to_string(g_sigusr1.load()) +
                             " SIGUSR1 from a sandbox");
  }
  if (listeners_->TotalHits() != 0) {
    for (const auto& [name, spec] : endpoints_) {
      if (listeners_->Hits(spec) > 0) {
        host_failures_.push_back("host endpoint " + spec + " was reached " +
                                 std::to_string(listeners_->Hits(spec)) + " times");
      }
    }
  }
  // Things the probes tried to create on the host, by name.
  for (const std::string& p :
       {std::string("/usr/safex-f4"), std::string("/safex-f4"), std::string("/etc/safex-f4"),
        std::string("/bin/safex-f4"), std::string("/lib/safex-f4"), probes_ + "/safex-f4",
        std::string("/tmp/safex-p8-i386"), std::string("/tmp/safex-p8-x32"),
        std::string("/tmp/safex-r3-fill"), std::string("/tmp/safex-r4"),
        std::string("/tmp/safex-f7-scratch"), std::string("/tmp/safex-c3"),
        std::string("/tmp/safex-p2")}) {
    if (access(p.c_str(), F_OK) == 0) host_failures_.push_back("created on the host: " + p);
  }
  for (const std::string& point : CgroupMountPoints()) {
    if (access((point + "/safex-s3-probe").c_str(), F_OK) == 0) {
      host_failures_.push_back("cgroup created on the host: " + point + "/safex-s3-probe");
    }
  }
  if (ReadFile("/proc/net/route").find("004D12C6") != std::string::npos) {
    host_failures_.push_back("route 198.18.77.0/24 (N6) appeared on the host");
  }
  // Nothing left behind, machine-wide (other tests' resources can show up here: re-run alone).
  testing::LeakCheckOptions lo;
  lo.state_root = state_root_;
  testing::LeakSnapshot before;
  before.items = leak_baseline_;
  for (const std::string& l : testing::WaitForNoLeaks(before, std::chrono::seconds(5), lo)) {
    host_failures_.push_back("left behind: " + l);
  }
  std::error_code ec;
  if (fs::exists(state_root_) && !fs::is_empty(state_root_, ec)) {
    host_failures_.push_back("state root " + state_root_ + " is not empty");
  }
  // The audit log's hash chain holds over every run of the suite.
  audit::AuditOptions ao;
  ao.read_only = true;
  auto log = audit::AuditLog::Open(audit_db_, ao);
  if (!log.ok()) {
    host_failures_.push_back("audit log: " + log.status().message());
  } else {
    auto v = (*log)->Verify();
    if (!v.ok() || !v->ok) {
      host_failures_.push_back("audit log does not verify: " +
                               (v.ok() ? v->problem : v.status().message()));
    } else {
      host_notes_.push_back("audit log: " + std::to_string(v->events) +
                            " events, hash chain verified");
    }
  }
}

std::string Suite::Report() const {
  std::ostringstream md;
  md << "# Containment: the attack catalogue on every backend\n\n";
  md << "Generated by the containment suite (`tests/containment/`, label `containment`) on "
     << started_at_ << ". Do not edit by hand: run the suite with "
     << "`SAFEX_UPDATE_CONTAINMENT_DOC=1` (see the end of this page).\n\n";
  md << "Every case of the attack catalogue is a small static probe program "
        "(`tests/containment/probes/`) that tries its attack for real inside a run of `safex run` "
        "under an example policy (`policies/examples/`, unchanged but for a read-only bind of the "
        "probes at `/probes`). A cell says what was observed:\n\n";
  md << "- **contained**: the expected outcome, the right verdict and exit status, the run in the "
        "audit log with that verdict, nothing left behind that names the run, and the probe itself "
        "saw no escape. The text is the probe's own observation.\n"
        "- **NOT CONTAINED**: an expectation failed (the first failure is shown; all are listed "
        "below). Never counted as a pass.\n"
        "- **refused at plan time**: the backend refused the policy before anything ran. Never "
        "counted as a pass.\n"
        "- **backend not available**: this build or host cannot run the backend at all.\n"
        "- **not yet runnable**: the case needs something `safex` does not do yet (said which).\n\n";
  md << "Backends:";
  for (const std::string& b : kBackends) {
    auto it = backends_.find(b);
    md << " `" << b << "` ("
       << (it != backends_.end() && it->second.available ? "available"
                                                          : it == backends_.end() ? "not probed"
                                                                                  : it->second.reason)
       << ");";
  }
  md << "\n\n| id | attack | expected |";
  for (const std::string& b : kBackends) md << " " << b << " |";
  md << "\n|---|---|---|";
  for (size_t i = 0; i < kBackends.size(); ++i) md << "---|";
  md << "\n";
  std::map<std::string, std::map<CellState, int>> counts;
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    md << "| " << c.id << " | " << CellText(c.attack) << " | " << CellText(c.expected) << " |";
    for (const std::string& b : kBackends) {
      auto cell = row->second.find(b);
      if (cell == row->second.end()) {
        md << " (not run) |";
        continue;
      }
      ++counts[b][cell->second.state];
      std::string text = CellText(cell->second.text);
      if (cell->second.state == CellState::kNotContained) text = "**" + text + "**";
      md << " " << text << " |";
    }
    md << "\n";
  }
  md << "\n## Summary\n\n";
  for (const std::string& b : kBackends) {
    md << "- `" << b << "`:";
    for (CellState s : {CellState::kContained, CellState::kNotContained, CellState::kRefusedAtPlan,
                        CellState::kNotYetRunnable, CellState::kBackendNotAvailable}) {
      if (counts[b][s] > 0) md << " " << counts[b][s] << " " << CellStateName(s) << ";";
    }
    md << "\n";
  }
  md << "- wall time of the runs: " << static_cast<int>(seconds_ + 0.5) << " s (" << o_.jobs
     << " at a time)\n";

  md << "\n## Not contained: what failed\n\n";
  bool any = false;
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    for (const auto& [b, cell] : row->second) {
      if (cell.failures.empty()) continue;
      any = true;
      md << "- **" << c.id << " on " << b << "**:\n";
      for (const std::string& f : cell.failures) md << "  - " << CellText(f) << "\n";
    }
  }
  if (!any) md << "Nothing.\n";
  md << "\n## Notes: contained, with a deviation from the catalogue's wording\n\n";
  any = false;
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    for (const auto& [b, cell] : row->second) {
      for (const std::string& n : cell.notes) {
        any = true;
        md << "- " << c.id << " on " << b << ": " << CellText(n) << "\n";
      }
    }
  }
  if (!any) md << "None.\n";

  md << "\n## The host, before and after\n\n";
  md << "Checked after every run of the suite: SHA-256 of `runsc`, `qemu-system-x86_64`, the "
        "`safex` binary and every probe; the suite's secret file; the host's hostname, "
        "domainname, `uevent_helper`, transparent hugepage setting, `lo` MTU and every cgroup "
        "`release_agent`; free space of `/tmp`, `/var/lib`, `/run` and the suite's directory; the "
        "files the probes try to create on the host; SIGUSR1s received by the runner; connections "
        "to the host endpoints the network probes aim at; the shared leak checker "
        "(`tests/support/leak_check.h`) machine-wide; the audit log's hash chain.\n\n";
  if (host_failures_.empty()) {
    md << "- **unchanged**: every check above held.\n";
  } else {
    for (const std::string& f : host_failures_) md << "- **FAILED**: " << CellText(f) << "\n";
  }
  for (const std::string& n : host_notes_) md << "- " << CellText(n) << "\n";

  md << "\n## Every run\n\n";
  md << "One line per `safex run`: case, backend, label, verdict, exit status, wall seconds of "
        "`safex`, peak resident memory of `safex` itself, and the probe's result line.\n\n";
  md << "| case | backend | run | verdict | exit | wall s | safex RSS MiB | probe result |\n";
  md << "|---|---|---|---|---|---|---|---|\n";
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    for (const auto& [b, cell] : row->second) {
      for (const RunRecord& r : cell.runs) {
        char wall[32];
        snprintf(wall, sizeof wall, "%.1f", r.proc.wall_seconds);
        std::string probe = r.ProbeResult();
        if (probe.empty() && r.verdict() == "refused") probe = "(refused: " + r.Reason() + ")";
        md << "| " << c.id << " | " << b << " | " << CellText(r.inv.label.empty() ? "-" : r.inv.label)
           << " | " << r.verdict() << " | " << r.proc.status << " | " << wall << " | "
           << (r.proc.peak_rss_kib >> 10) << " | " << CellText(probe) << " |\n";
      }
    }
  }
  md << "\n## Running it\n\n";
  md << "```\n"
        "cmake --build build --target containment_test containment_probes safex\n"
        "cd build && ctest -L containment --output-on-failure      # as root\n"
        "# regenerate this page:\n"
        "SAFEX_UPDATE_CONTAINMENT_DOC=1 build/tests/containment/containment_test "
        "--gtest_filter='Containment.*'\n"
        "```\n\n";
  md << "The suite also has a self-test (`ContainmentSelfTest`): it runs a few probes with no "
        "sandbox at all (plain fork/exec in a throwaway directory) and checks that they detect "
        "their own success there and that the suite's checks call it an escape, so a broken "
        "probe cannot pass as a contained case.\n";
  return md.str();
}

}  // namespace safex::containment
