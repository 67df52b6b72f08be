#include "tests/containment/suite.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "common/persistent_state.h"
#include "common/sha256.h"
#include "common/small_file.h"
#include "compiler/host_config.h"
#include "supervisor/serve/client.h"
#include "tests/net/net_world.h"
#include "tests/support/leak_check.h"
#include "tests/support/test_host_config.h"

extern char** environ;

namespace safex::containment {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_sigusr1{0};
void OnSigusr1(int) { ++g_sigusr1; }

// "" when it cannot be read: the leak check reads /proc of processes that may end meanwhile.
std::string ReadFile(const std::string& path, size_t cap = 1 << 20) {
  return ReadSmallFile(path, cap).value_or("");
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

// Bytes of the regular files directly in `dir` (the microVM driver's image cache).
uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

constexpr char kMicrovmImageCache[] = "/var/lib/safex/microvm/images";

uint64_t FreeBytes(const std::string& path) {
  struct statvfs sv;
  if (statvfs(path.c_str(), &sv) != 0) return 0;
  return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
}

uint64_t FreeInodes(const std::string& path) {
  struct statvfs sv;
  if (statvfs(path.c_str(), &sv) != 0) return 0;
  return sv.f_favail;
}

// A member of a JSON object, or nullptr (never the const operator[], whose missing key is
// undefined behaviour).
const nlohmann::json* Member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Markdown table cells: one line, no pipes.
std::string CellText(std::string s, size_t cap = 260) {
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
  if (out.size() > cap) out = out.substr(0, cap - 3) + "...";
  return out;
}

// How a run's policy differs from python-untrusted, for the table of runs: the example it
// extends and the statements the case added ("" for python-untrusted as it is).
std::string PolicyText(const Invocation& inv) {
  std::string extra;
  bool space = false;
  for (char c : inv.policy_extra) {
    if (c == '\n' || c == ' ') {
      space = !extra.empty();
      continue;
    }
    if (space) extra += ' ';
    space = false;
    extra += c;
  }
  if (inv.policy == "python-untrusted" && extra.empty()) return "python-untrusted";
  return inv.policy + (extra.empty() ? "" : " + `" + extra + "`");
}

std::string Now() {
  time_t t = time(nullptr);
  char buf[64];
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The suite's runs get their per-run links from this pool (kept apart from other tests' pools;
// every address in it belongs to a namespace safex creates for one of the suite's runs).
constexpr char kPool[] = "198.18.131.0/26";
constexpr int kPoolSlots = 16;

// Why the service cannot make a case's runs ("" when it can make all of them).
std::string SubmitUnsupportedOf(const std::vector<Invocation>& invs, bool session) {
  for (const Invocation& inv : invs) {
    std::string why = session ? inv.SessionUnsupported() : inv.SubmitUnsupported();
    if (!why.empty()) return (inv.label.empty() ? "" : inv.label + ": ") + why;
  }
  return "";
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
  const nlohmann::json* out = Member(report, "stdout");
  const nlohmann::json* t = out != nullptr ? Member(*out, "text") : nullptr;
  return t != nullptr && t->is_string() ? t->get<std::string>() : "";
}

std::string RunRecord::Evidence() const {
  auto text = [this](const char* key) {
    const nlohmann::json* v = Member(report, key);
    if (v == nullptr || v->is_null()) return std::string("-");
    return v->is_string() ? v->get<std::string>() : v->dump();
  };
  // The last n bytes, on one line (the report lists failures as markdown list items).
  auto tail = [](const std::string& s, size_t n) {
    std::string t = Trim(s.size() > n ? "..." + s.substr(s.size() - n) : s);
    std::replace(t.begin(), t.end(), '\n', ' ');
    return t;
  };
  char head[160];
  snprintf(head, sizeof head, "%s: exit %d after %.1f s%s%s",
           inv.label.empty() ? "the run" : inv.label.c_str(), proc.status, proc.wall_seconds,
           proc.timed_out ? " (the suite killed it)" : "",
           proc.spawn_failed ? " (not started)" : "");
  std::string e = std::string(head) + "; run " + run_id() + " (" + text("backend_mode") +
                  "), verdict " + verdict() + ", limit " + text("limit") + " (" +
                  text("limit_detail") + "), wall_ns " + text("wall_ns") + ", cpu_ns " +
                  text("cpu_ns");
  if (std::string d = text("diagnostics"); d != "-") e += "; diagnostics: " + tail(d, 600);
  if (std::string r = Reason(); !r.empty()) e += "; reason: " + tail(r, 300);
  if (audit && !audit->run.reason.empty() && audit->run.reason != Reason()) {
    e += "; audit log: " + tail(audit->run.reason, 800);  // the backend's own words
  }
  if (!proc.err.empty()) e += "; safex stderr: " + tail(proc.err, 800);
  if (report.is_null()) e += "; stdout (not JSON): " + tail(proc.out, 400);
  return e;
}

std::string Invocation::SessionUnsupported() const {
  if (input) return "it gives the run input files (a session's command takes none)";
  return SubmitUnsupported();
}

std::string Invocation::SubmitUnsupported() const {
  if (output) return "it collects an output directory (`safex submit` has no --output)";
  if (!flags.empty()) return "it needs `safex run` flags (" + flags.front() + ")";
  if (readonly_cgroups) return "it breaks the cgroups of one `safex run` process";
  if (policy_extra.find("egress") != std::string::npos) {
    return "it is granted egress (not tried through the service yet: the network cases aim at "
           "the address pool of the suite's own `safex run` config)";
  }
  return "";
}

bool Check::Expect(bool ok, const std::string& what) {
  if (!ok) failures_.push_back(what);
  return ok;
}

const char* CellStateName(CellState s) {
  switch (s) {
    case CellState::kContained:
      return "contained";
    case CellState::kNotContained:
      return "NOT CONTAINED";
    case CellState::kRefusedAtPlan:
      return "refused before anything ran";
    case CellState::kBackendNotAvailable:
      return "backend not available";
    case CellState::kNotYetRunnable:
      return "not yet runnable";
    case CellState::kNotThroughSubmit:
      return "not through submit";
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
  StopServe();
  listeners_.reset();
  world_.reset();
  if (leaked_file_fd_ >= 0) close(leaked_file_fd_);
  if (leaked_dir_fd_ >= 0) close(leaked_dir_fd_);
  signal(SIGUSR1, SIG_DFL);
  std::error_code ec;
  KeepAuditLog();
  if (!work_.empty()) fs::remove_all(work_, ec);
}

// SAFEX_CONTAINMENT_KEEP_AUDIT=DIR: the suite's audit log (every run's record, the service's
// too) is copied into DIR before the work directory goes, so that the reasons of a run that went
// wrong can be read afterwards (`safex audit --audit-db DIR/audit.db show RUN`). Only the suite's
// own files are copied; DIR is the caller's.
void Suite::KeepAuditLog() const {
  const char* keep = getenv("SAFEX_CONTAINMENT_KEEP_AUDIT");
  if (keep == nullptr || *keep == '\0' || audit_db_.empty()) return;
  std::error_code ec;
  fs::create_directories(keep, ec);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = audit_db_ + suffix;
    if (!fs::exists(from, ec)) continue;
    fs::copy_file(from, fs::path(keep) / ("audit.db" + std::string(suffix)),
                  fs::copy_options::overwrite_existing, ec);
    if (ec)
      std::fprintf(stderr, "containment: keeping %s: %s\n", from.c_str(), ec.message().c_str());
  }
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
  state_root_ = work_ + "/state";
  policy_dir_ = work_ + "/policies";
  for (const std::string& d : {state_root_, policy_dir_, work_ + "/audit", work_ + "/cases"}) {
    if (mkdir(d.c_str(), 0700) != 0) {
      error_ = "mkdir " + d + ": " + strerror(errno);
      return false;
    }
  }
  audit_db_ = work_ + "/audit/audit.db";
  audit_key_ = work_ + "/audit/audit.key";

  // The probes are bound from the build tree itself: a stable path keeps backends that image their
  // binds (the microVM's erofs cache) from building a new image for every run of the suite.
  // F11 needs a setuid-root copy of its probe next to it; it is (re)made only when it differs,
  // so the directory stays unchanged from one run to the next.
  probes_ = o_.probes_dir;
  std::string f11 = probes_ + "/f11_setuid", f11_root = probes_ + "/f11_setuid_root";
  if (access(f11.c_str(), X_OK) != 0) {
    error_ = "no probes in " + probes_ + " (build the containment_probes target)";
    return false;
  }
  struct stat st;
  bool setuid_ok = stat(f11_root.c_str(), &st) == 0 && st.st_uid == 0 &&
                   (st.st_mode & 07777) == 04755 &&
                   FileState::Of(f11_root).sha256 == FileState::Of(f11).sha256;
  if (!setuid_ok) {
    std::error_code ec;
    fs::remove(f11_root, ec);
    fs::copy_file(f11, f11_root, ec);
    if (ec || chown(f11_root.c_str(), 0, 0) != 0 || chmod(f11_root.c_str(), 04755) != 0) {
      error_ = "setuid copy for F11 failed: " + ec.message();
      return false;
    }
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

  // Endpoints the network probes try: the host's loopback and unix sockets, and an "outside
  // world" namespace of the suite's own (tests/net/net_world.h: 198.18.1.10, 198.18.1.11 and
  // 169.254.169.254 on its loopback) behind an uplink namespace that runs granted egress use.
  listeners_ = std::make_unique<HostListeners>();
  endpoints_["tcp_lo"] = listeners_->Tcp("127.0.0.1");
  endpoints_["udp_lo"] = listeners_->Udp("127.0.0.1");
  endpoints_["dns_lo"] = listeners_->Udp("127.0.0.1");
  endpoints_["unix"] = listeners_->Unix(work_ + "/host.sock");
  endpoints_["abstract"] = listeners_->Abstract("safex-containment-" + std::to_string(getpid()));
  std::string world_error;
  world_ = testing::net::World::Create(&world_error);
  if (world_ == nullptr) {
    error_ = "test network: " + world_error;
    return false;
  }
  int wfd = world_->world_fd();
  endpoints_["tcp_world"] = listeners_->Tcp("198.18.1.10", 80, wfd);
  endpoints_["udp_world"] = listeners_->Udp("198.18.1.10", 53, wfd);
  endpoints_["tcp_world2"] = listeners_->Tcp("198.18.1.11", 443, wfd);
  endpoints_["granted"] = listeners_->Tcp("198.18.1.10", 8080, wfd);
  endpoints_["other_port"] = listeners_->Tcp("198.18.1.10", 8081, wfd);
  endpoints_["other_host"] = listeners_->Tcp("198.18.1.11", 8080, wfd);
  endpoints_["udp_granted_port"] = listeners_->Udp("198.18.1.10", 8080, wfd);
  endpoints_["metadata"] = listeners_->Tcp("169.254.169.254", 80, wfd);
  for (const auto& [name, spec] : endpoints_) {
    if (spec.empty()) {
      error_ = "listener " + name + ": " + listeners_->error();
      return false;
    }
  }
  listeners_->Start();
  host_config_ = work_ + "/host.policy";
  if (!WriteFile(host_config_,
                 "# Written by the containment suite: default ceilings; egress through "
                 "the suite's test uplink.\nhost {\n" +
                     std::string(testing::kTestBackends) + "  network {\n    pool = \"" +
                     std::string(kPool) + "\"\n    uplink = \"" + world_->uplink_path() +
                     "\"\n  }\n}\n")) {
    error_ = "cannot write " + host_config_;
    return false;
  }

  // The host as it is before any run.
  for (const std::string& f : {std::string("/usr/local/bin/runsc"), o_.safex, secret_file_,
                               std::string("/usr/bin/qemu-system-x86_64")}) {
    host_files_[f] = FileState::Of(f);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(probes_, ec)) {
    host_files_[e.path().string()] = FileState::Of(e.path().string());
  }
  std::vector<std::string> settings = {
      "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname", "/sys/kernel/uevent_helper",
      "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/class/net/lo/mtu"};
  for (const std::string& point : CgroupMountPoints()) settings.push_back(point + "/release_agent");
  for (const std::string& s : settings) {
    if (access(s.c_str(), R_OK) == 0) host_settings_[s] = ReadFile(s, 4096);
  }
  for (const std::string& p :
       {std::string("/tmp"), work_, std::string("/var/lib"), std::string("/run")}) {
    free_bytes_[p] = FreeBytes(p);
    free_inodes_[p] = FreeInodes(p);
  }
  image_cache_bytes_ = DirBytes(kMicrovmImageCache);
  testing::LeakCheckOptions lo;
  lo.state_root = state_root_;
  leak_baseline_ = testing::LeakSnapshot::Take(lo).items;
  serve_error_ = StartServe();
  return true;
}

std::string Suite::StartServe() {
  serve_dir_ = work_ + "/serve";
  serve_policies_ = serve_dir_ + "/policies";
  serve_state_ = serve_dir_ + "/state";
  serve_socket_ = serve_dir_ + "/safex.sock";
  for (const std::string& d : {serve_dir_, serve_policies_}) {
    if (mkdir(d.c_str(), 0700) != 0) return "mkdir " + d + ": " + strerror(errno);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.source_dir + "/policies/examples", ec)) {
    if (e.path().extension() != ".policy") continue;
    fs::copy_file(e.path(), serve_policies_ + "/" + e.path().filename().string(), ec);
    if (ec) return "copy " + e.path().string() + ": " + ec.message();
  }
  // Its own pool and the suite's test uplink (no case grants egress through the service yet;
  // they are there so that its network module has one of the suite's ranges and never the
  // host's namespace).
  std::string config =
      "# Written by the containment suite: the service the submit column uses.\n"
      "host {\n" +
      std::string(testing::kTestBackends) + "  service {\n";
  config += "    policy_dir = \"" + serve_policies_ + "\"\n";
  config += "    socket = \"" + serve_socket_ + "\"\n";
  config += "    socket_mode = \"0600\"\n";
  config += "    state_dir = \"" + serve_state_ + "\"\n";
  config += "    audit_db = \"" + audit_db_ + "\"\n";
  config += "    max_concurrent = " + std::to_string(std::max(1, o_.jobs)) + "\n";
  config += "    max_queue = 64\n";
  config += "    allow \"*\" { users = [0] }\n";
  // The warm pool of the submit column (kColumns): the wrappers most cases run under.
  for (const char* example : {"python-untrusted", "base-untrusted"}) {
    const std::string name = fs::path(WrapperPolicy(example, "gvisor", "")).stem().string();
    pooled_policies_.insert(name);
    config += "    pool \"" + name + "\" { size = 2 }\n";
  }
  config += "    pool_memory = 64GiB\n";
  config += "  }\n  network {\n    pool = \"198.18.131.128/26\"\n    uplink = \"" +
            world_->uplink_path() + "\"\n  }\n}\n";
  std::string config_path = serve_dir_ + "/host.policy";
  if (!WriteFile(config_path, config)) return "cannot write " + config_path;
  int log =
      open((serve_dir_ + "/serve.log").c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  SpawnOptions so;
  so.argv = {o_.safex, "serve", "--config", config_path, "--audit-key", audit_key_};
  // Started like every `safex run` of the suite: the supervisor's secret in its environment and a
  // host file and directory open at their own numbers (F2, S1, C2 look for them).
  for (char** e = environ; *e != nullptr; ++e) so.env.emplace_back(*e);
  so.env.push_back("SAFEX_CONTAINMENT_SECRET=" + marker_);
  so.fds = {{0, devnull},
            {1, log},
            {2, log},
            {leaked_file_fd_, leaked_file_fd_},
            {leaked_dir_fd_, leaked_dir_fd_}};
  so.parent_death_signal = SIGTERM;  // drains: its sandboxes are torn down
  auto p = Subprocess::Spawn(so);
  if (log >= 0) close(log);
  if (devnull >= 0) close(devnull);
  if (!p.ok()) return "safex serve: " + p.status().message();
  serve_ = std::move(p).value();
  // Up when its socket accepts a connection.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    auto ex = serve_->TryWait();
    if (ex.ok() && ex->has_value()) {
      std::string why = "safex serve exited with " + std::to_string((*ex)->ShellCode()) + ": " +
                        Trim(ReadFile(serve_dir_ + "/serve.log", 2000));
      serve_.reset();
      return why;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", serve_socket_.c_str());
    bool up = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (fd >= 0) close(fd);
    if (up) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  StopServe();
  return "safex serve did not open its socket within 60 s";
}

void Suite::StopServe() {
  if (!serve_ || serve_->reaped()) return;
  // Its peak resident memory over the whole suite (gone once it has exited).
  std::ifstream status("/proc/" + std::to_string(serve_->pid()) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0)
      serve_peak_rss_kib_ = std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  serve_->Signal(SIGTERM).ok();
  auto st = serve_->Wait(std::chrono::steady_clock::now() + std::chrono::seconds(60));
  serve_exit_ =
      st.ok() && st->has_value() ? (*st)->ShellCode() : 1000 + serve_->KillAndWait().ShellCode();
}

std::string Suite::GrantEgressStatements() {
  return "  network {\n    default = deny\n"
         "    @override(\"containment suite: one test host in the suite's own namespace\")\n"
         "    egress \"198.18.1.10:8080\"\n  }\n";
}

std::vector<std::string> Suite::PoolSandboxAddresses() const {
  std::vector<std::string> out;
  for (int slot = 0; slot < kPoolSlots; ++slot) {
    out.push_back("198.18.131." + std::to_string(slot * 4 + 2));
  }
  return out;
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
  if (backend == "microvm") text += "  isolation = microvm\n";
  if (backend == "native-untrusted") {
    // The untrusted example as it is, moved to native: refused at plan time by design.
    text += "  @override(\"containment suite: untrusted code on native\")\n  isolation = native\n";
  }
  if (backend == "native") {
    // Native is for trusted code only (an untrusted plan is refused there): the catalogue runs
    // under the same policy marked trusted, with the overrides review tools flag.
    const char* why = "@override(\"containment suite: the catalogue on the native backend\")\n";
    text += std::string("  ") + why + "  trust = trusted\n  " + why + "  isolation = native\n";
  }
  text += "  @override(\"containment suite: the probe programs, read-only\")\n";
  text += "  mount bind \"" + probes_ + "\" at \"/probes\" { mode = ro }\n";
  text += extra;
  text += "}\n";
  std::string path = policy_dir_ + "/" + name + ".policy";
  WriteFile(path, text);
  // The service finds policies by name in its own directory.
  // There it also allows sessions (the session column); nothing else of the plan changes.
  if (!serve_policies_.empty()) {
    text.insert(text.rfind('}'),
                "  @override(\"containment suite: the session column\")\n  session {}\n");
    WriteFile(serve_policies_ + "/" + name + ".policy", text);
  }
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
  ProcessResult r =
      RunWatched({{o_.safex, "compile", "--search-path", o_.source_dir + "/policies/examples",
                   "--host-config", host_config_, policy},
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
  // A run granted one literal destination in the suite's own test world. The probe sends
  // nothing; whether the run starts with a network at all is the question.
  CaseEnv env{this, "gvisor", work_ + "/cases/egress-detect", {}};
  mkdir(env.dir.c_str(), 0700);
  Invocation inv;
  inv.label = "egress detection";
  inv.policy_extra = GrantEgressStatements();
  inv.argv = {"s6_argv_verbatim", "egress"};
  RunRecord r = Execute(inv, env);
  {
    std::lock_guard<std::mutex> l(mu_);
    extra_runs_.push_back(r);
  }
  std::string why;
  std::string mode = r.report.is_object() ? r.report.value("backend_mode", "") : "";
  if (r.verdict() == "ok" && mode.find("netns") != std::string::npos) {
    why = "";
  } else if (r.Reason().find("network provider") != std::string::npos) {
    why = "needs egress in `safex run` (drivers/net is not wired into it yet)";
  } else {
    why = "egress runs fail here: " + r.verdict() + ": " + r.Reason();
  }
  std::lock_guard<std::mutex> l(mu_);
  egress_ = why;
  return why;
}

RunRecord Suite::Execute(const Invocation& inv, CaseEnv& env) {
  RunRecord r;
  r.inv = inv;
  // The session column's wrappers are its own: the submit column's are pooled, and a session of
  // a pooled policy would take the ready sandboxes that column's runs are promised.
  r.policy_path = WrapperPolicy(
      inv.policy, env.backend,
      inv.policy_extra + (env.session ? "  # the session column's own (not pooled)\n" : "") +
          (env.platform.empty() ? "" : "  gvisor { platform = " + env.platform + " }\n"));
  auto has_flag = [&](const std::string& f) {
    return std::find(inv.flags.begin(), inv.flags.end(), f) != inv.flags.end();
  };
  std::vector<std::string> args;
  std::string db = audit_db_;
  if (env.session) {
    // A session's second command, after a first that tried to leave something for it.
    std::string name = fs::path(r.policy_path).stem().string();
    r.sandbox_id = OpenPersistedSession(name, &r);
    if (r.sandbox_id.empty()) return r;
    args = {o_.safex, "submit", "--socket", serve_socket_, "--session", r.sandbox_id, "--json"};
  } else if (env.submit) {
    // Through the service: the wrapper policy by name from its policy directory; the service
    // writes the suite's audit log and keeps its runs' state under its own state directory.
    std::string name = fs::path(r.policy_path).stem().string();
    args = {o_.safex, "submit", "--socket", serve_socket_, "--policy", name, "--json"};
    // A pooled policy's run (with its input files or without) is handed a pooled sandbox: the
    // suite makes sure one is ready for it (AdmitPooled, below), and checks that it was used.
    r.expect_pooled = pooled_policies_.count(name) > 0;
  } else {
    args = {o_.safex,      "run",           "--policy",
            r.policy_path, "--search-path", o_.source_dir + "/policies/examples",
            "--json"};
    if (!has_flag("--audit-db")) {
      args.insert(args.end(), {"--audit-db", audit_db_, "--audit-key", audit_key_});
    } else {
      db.clear();  // the case chose another log (S7): nothing to look up here
    }
    if (!has_flag("--state-root")) args.insert(args.end(), {"--state-root", state_root_});
    if (!has_flag("--host-config")) args.insert(args.end(), {"--host-config", host_config_});
  }
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
    args.push_back(i == 0 && !inv.argv[0].empty() && inv.argv[0][0] != '/'
                       ? "/probes/" + inv.argv[0]
                       : inv.argv[i]);
  }
  ProcessOptions po;
  po.argv = args;
  for (char** e = environ; *e != nullptr; ++e) po.env.emplace_back(*e);
  po.env.push_back("SAFEX_CONTAINMENT_SECRET=" + marker_);
  po.leaked_fds = {leaked_file_fd_, leaked_dir_fd_};
  po.readonly_cgroups = inv.readonly_cgroups;
  po.deadline = std::chrono::seconds(180);
  if (inv.start_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(inv.start_delay_ms));
  std::thread during;
  if (inv.during) {
    const std::string root = env.submit ? serve_state_ : state_root_;
    during = std::thread([&inv, root] {
      std::this_thread::sleep_for(std::chrono::milliseconds(inv.during_delay_ms));
      inv.during(root);
    });
  }
  // One pooled submit at a time between "a sandbox is ready" and the service taking it, so that
  // two cases never race for one ready sandbox (the gate opens as soon as the take shows on the
  // service's counters, or when the submit ends).
  std::atomic<bool> finished{false};
  std::thread admitted;
  if (r.expect_pooled) {
    const int64_t takes = AdmitPooled(fs::path(r.policy_path).stem().string());
    admitted = std::thread([this, takes, &finished] {
      while (!finished.load() && PoolTakes() <= takes) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ReleasePooled();
    });
  }
  r.proc = RunWatched(po);
  // The session ends now, so that what it leaves behind is looked for below.
  if (env.session) {
    RunWatched({{o_.safex, "session", "close", "--socket", serve_socket_, r.sandbox_id}});
  }
  finished.store(true);
  if (admitted.joinable()) admitted.join();
  if (during.joinable()) during.join();
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
  if (!id.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    run_ids_.insert(id);
  }
  if (const nlohmann::json* sb = Member(r.report, "sandbox");
      !env.session && sb != nullptr && sb->is_object()) {
    if (auto it = sb->find("id"); it != sb->end() && it->is_string()) r.sandbox_id = *it;
  }
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
  lo.state_root = env.submit ? serve_state_ : state_root_;
  bool egress = r.report.is_object() && r.report.contains("backend_mode") &&
                r.report["backend_mode"].is_string() &&
                r.report["backend_mode"].get<std::string>().find("netns") != std::string::npos;
  if (!id.empty()) {
    // Teardown is synchronous in `safex run`; a short settle covers the kernel reaping.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    do {
      r.leftovers = testing::ResourcesNamingRun(id, lo, egress);
      // A pooled run's sandbox is named by the sandbox's id, not the run's.
      if (!r.sandbox_id.empty()) {
        for (std::string& left : testing::ResourcesNamingRun(r.sandbox_id, lo, egress)) {
          r.leftovers.push_back(std::move(left));
        }
      }
      if (r.leftovers.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < until);
  }
  return r;
}

// What the session column's first command does: everything a program could try to leave for the
// next command of its session. A background process (killed when the command ends), shell and
// Python start-up files in the writable scratch and cwd, a sitecustomize module, symlinks to
// host files and to the root planted where a later command or the files API could follow them.
const char* const kPersistAttempt =
    "(while true; do echo persisted >> /tmp/.persisted; sleep 0.2; done) & "
    "nohup sleep 1000 >/dev/null 2>&1 & "
    "echo 'echo PERSISTED-RC' > /tmp/.profile; cp /tmp/.profile /tmp/.bashrc; "
    "echo 'print(\"PERSISTED-SITE\")' > /tmp/sitecustomize.py; "
    "mkdir -p /tmp/usercustomize; cp /tmp/sitecustomize.py /tmp/usercustomize/__init__.py; "
    "ln -s /etc/passwd /tmp/passwd; ln -s / /tmp/rootlink; "
    "sleep 0.5; echo planted";

// Opens a session of `policy` on the suite's service and runs kPersistAttempt in it; the
// session's id, or "" with r->proc saying why (then the run is not made).
std::string Suite::OpenPersistedSession(const std::string& policy, RunRecord* r) {
  ProcessResult opened =
      RunWatched({{o_.safex, "session", "open", "--policy", policy, "--socket", serve_socket_}});
  auto j = nlohmann::json::parse(opened.out, nullptr, false);
  if (opened.status != 0 || !j.is_object() || !j.contains("session_id")) {
    r->proc = opened;
    r->proc.err = "safex session open failed: " + opened.err;
    return "";
  }
  const std::string id = j["session_id"].get<std::string>();
  ProcessResult first = RunWatched({{o_.safex, "submit", "--socket", serve_socket_, "--session", id,
                                     "--", "/bin/sh", "-c", kPersistAttempt}});
  if (first.status != 0 || first.out != "planted\n") {
    RunWatched({{o_.safex, "session", "close", "--socket", serve_socket_, id}});
    r->proc = first;
    r->proc.err = "the session's first command failed: " + first.err;
    return "";
  }
  return id;
}

void Suite::DiscoverBackends() {
  for (const std::string& b : kBackends) {
    CaseEnv env{this, b, work_ + "/cases/discover-" + b, {}};
    mkdir(env.dir.c_str(), 0700);
    Invocation inv;
    inv.label = "discovery";
    inv.argv = {"s6_argv_verbatim", "hello"};
    RunRecord r = Execute(inv, env);
    extra_runs_.push_back(r);
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
    if (b == "native") s.untrusted_refusal = UntrustedOnNative();
    backends_[b] = s;
  }
}

std::string Suite::UntrustedOnNative() {
  CaseEnv env{this, "native-untrusted", work_ + "/cases/discover-native-untrusted", {}};
  mkdir(env.dir.c_str(), 0700);
  Invocation inv;
  inv.label = "untrusted on native";
  inv.argv = {"s6_argv_verbatim", "hello"};
  inv.expect_refusal = true;
  RunRecord r = Execute(inv, env);
  extra_runs_.push_back(r);
  const std::string diag = r.report.is_object() ? r.report.value("diagnostics", "") : "";
  if (r.verdict() != "refused" || r.proc.out.find("\"ran\"") != std::string::npos) return "";
  // The first error of the diagnostics (warnings for the overrides come first), without its path.
  const size_t at = diag.find("error[");
  if (at == std::string::npos) return r.Reason();
  std::string first = diag.substr(at, diag.find('\n', at) - at);
  return first.substr(0, first.find("\\n"));  // the text may carry escaped newlines
}

int64_t Suite::ServeMetric(const std::string& name) const {
  auto r = serve::HttpCall(serve_socket_, "GET", "/metrics", "");
  if (!r.ok()) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r->body.c_str() + at + 2 + name.size());
}

int64_t Suite::PoolTakes() const {
  return ServeMetric("safex_pool_hits_total") + ServeMetric("safex_pool_misses_total");
}

int64_t Suite::AdmitPooled(const std::string& policy) {
  {
    std::unique_lock<std::mutex> l(pool_gate_mu_);
    pool_gate_cv_.wait(l, [this] { return !pool_gate_busy_; });
    pool_gate_busy_ = true;
  }
  const std::string ready = "safex_pool_ready{policy=\"" + policy + "\"}";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ServeMetric(ready) < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return PoolTakes();
}

void Suite::ReleasePooled() {
  {
    std::lock_guard<std::mutex> l(pool_gate_mu_);
    pool_gate_busy_ = false;
  }
  pool_gate_cv_.notify_all();
}

void Suite::CommonChecks(const RunRecord& r, const std::string& backend, Check& c) const {
  const std::string what = r.inv.label.empty() ? "" : " [" + r.inv.label + "]";
  if (!c.Expect(!r.proc.spawn_failed, "safex could not be started" + what + ": " + r.proc.err))
    return;
  // The submit column's pooled runs: every one that got as far as a sandbox got a pooled one.
  if (r.expect_pooled && r.report.is_object() && r.verdict() != "refused") {
    c.Expect(!r.sandbox_id.empty(), "not run in a pooled sandbox" + what);
  }
  c.Expect(!r.proc.timed_out, "safex did not finish within its deadline" + what);
  if (!c.Expect(r.report.is_object(), "safex --json printed no report" + what + ": " +
                                          r.proc.out.substr(0, 200) + " " +
                                          r.proc.err.substr(0, 300))) {
    return;
  }
  c.Expect(r.report.contains("exit_status") && r.report["exit_status"] == r.proc.status,
           "exit status " + std::to_string(r.proc.status) + " differs from the report's" + what);
  const std::string v = r.verdict();
  const std::string id = r.run_id();
  // Every run attempt gets a run id, refusals included - except when the audit log itself is
  // what is broken (nothing can be recorded, so nothing is numbered).
  bool own_log =
      std::find(r.inv.flags.begin(), r.inv.flags.end(), "--audit-db") == r.inv.flags.end();
  c.Expect(!id.empty() || !own_log, "the report has no run id" + what);
  if (r.inv.expect_refusal) {
    c.Expect(v == "refused" || v == "setup-error", "expected a refusal, got verdict " + v + what);
    c.Expect(r.proc.status == 125,
             "expected exit 125, got " + std::to_string(r.proc.status) + what);
    c.Expect(r.StdoutText().empty() && !r.probe.is_object(),
             "the program ran although the run should have been refused" + what);
  } else if (v != "refused") {
    const nlohmann::json* ran_on = Member(r.report, "backend");
    c.Expect(ran_on != nullptr && *ran_on == backend,
             "ran on backend " + (ran_on != nullptr ? ran_on->dump() : "(none)") + ", not " +
                 backend + what);
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
  if (!id.empty() && own_log) {
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

void Suite::RunCase(const Case& c, const Column& column) {
  auto start = std::chrono::steady_clock::now();
  const std::string& backend = column.backend;
  CaseEnv env{this,
              backend,
              work_ + "/cases/" + c.id + "-" + backend + (column.submit ? "-submit" : "") +
                  (column.platform.empty() ? "" : "-" + column.platform),
              {}};
  env.submit = column.submit;
  env.session = column.session;
  env.platform = column.platform;
  mkdir(env.dir.c_str(), 0755);
  Cell cell;
  // Nothing a case does may end the process (a worker thread's exception would: std::terminate,
  // with sandboxes still up): a throw is that case's failure.
  std::string not_runnable, plan_error;
  std::vector<Invocation> invs;
  try {
    not_runnable = c.not_runnable ? c.not_runnable(env) : "";
    // A case that cannot run yet may still have a part that runs now (N3: the plan-time
    // refusal); the cell then stays "not yet runnable" unless that part fails.
    if (c.plan) invs = c.plan(env);
  } catch (const std::exception& e) {
    plan_error = e.what();
  }
  if (!plan_error.empty()) {
    cell.state = CellState::kNotContained;
    cell.failures = {"the suite's plan step threw: " + plan_error};
    cell.text = "NOT CONTAINED: " + cell.failures.front();
  } else if (invs.empty()) {
    cell.state = CellState::kNotYetRunnable;
    cell.text = "not yet runnable: " + (not_runnable.empty() ? "no runs" : not_runnable);
  } else if (std::string why = env.submit ? SubmitUnsupportedOf(invs, env.session) : "";
             !why.empty()) {
    cell.state = CellState::kNotThroughSubmit;
    cell.text = (env.session ? "not through a session: " : "not through submit: ") + why;
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
        threads.emplace_back([&, k] {
          try {
            records[k] = Execute(invs[k], env);
          } catch (const std::exception& e) {
            records[k].inv = invs[k];
            records[k].proc.spawn_failed = true;
            records[k].proc.err = std::string("the suite threw while running it: ") + e.what();
          }
        });
      }
      for (auto& t : threads) t.join();
      i = j;
    }
    Check check;
    // A check that throws (a bug in the suite, or a report shaped unlike any expected) fails the
    // case instead of ending the process with sandboxes and namespaces still around.
    try {
      for (const RunRecord& r : records) CommonChecks(r, backend, check);
      c.check(env, records, check);
    } catch (const std::exception& e) {
      check.Expect(false, std::string("the suite's check threw: ") + e.what());
    }
    // A run that was meant to run but was refused ran nothing: the backend would not take it.
    std::string plan_refusal;
    for (const RunRecord& r : records) {
      if (!r.inv.expect_refusal && (r.verdict() == "refused" || r.verdict() == "setup-error")) {
        plan_refusal = (r.verdict() == "refused" ? "" : "setup error: ") + r.Reason();
      }
    }
    cell.failures = check.failures();
    // What each run of a failing cell did, so that a failure seen once (in CI, say) can be
    // understood from its log alone.
    if (!check.ok()) {
      for (const RunRecord& r : records) cell.failures.push_back("evidence: " + r.Evidence());
    }
    cell.notes = check.notes();
    if (!plan_refusal.empty()) {
      // Nothing ran: the backend would not take the policy. Listed as such, never as a pass (the
      // checks that failed because nothing ran are kept in the details).
      cell.state = CellState::kRefusedAtPlan;
      cell.text = plan_refusal.rfind("setup error: ", 0) == 0
                      ? "refused at setup, nothing ran: " + plan_refusal.substr(13)
                      : "refused at plan time: " + plan_refusal;
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
  cells_[c.id][column.name] = std::move(cell);
}

void Suite::RunAll() {
  auto start = std::chrono::steady_clock::now();
  struct Job {
    const Case* c;
    const Column* column;
  };
  std::vector<Job> jobs;
  for (const Case& c : cases_) {
    if (!o_.only_cases.empty() &&
        std::find(o_.only_cases.begin(), o_.only_cases.end(), c.id) == o_.only_cases.end()) {
      continue;
    }
    for (const Column& col : kColumns) {
      // By name, or `submit` for the column through the service (its name holds a comma).
      auto chosen = [&col](const std::string& c) {
        return c == col.name || (col.submit && !col.session && c == "submit") ||
               (col.session && c == "session");
      };
      if (!o_.only_columns.empty() &&
          std::none_of(o_.only_columns.begin(), o_.only_columns.end(), chosen)) {
        continue;
      }
      const BackendStatus& s = backends_[col.backend];
      std::string why = !s.available ? s.reason
                        : col.submit && !serve_error_.empty()
                            ? "safex serve not available: " + serve_error_
                            : "";
      if (!why.empty()) {
        Cell cell;
        cell.state = CellState::kBackendNotAvailable;
        cell.text = why;
        cells_[c.id][col.name] = cell;
        continue;
      }
      jobs.push_back({&c, &col});
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return a.c->weight > b.c->weight; });
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, o_.jobs); ++w) {
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < jobs.size();) RunCase(*jobs[i].c, *jobs[i].column);
    });
  }
  for (auto& t : workers) t.join();
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool Suite::OthersOnly(const std::string& line) const {
  static const std::regex kRunId("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  static const std::regex kShort("(?:sx|safex_)([0-9a-f]{12})");
  std::string text = line;
  // A process: its whole command line and cgroup membership say whose run it belongs to.
  std::smatch m;
  static const std::regex kPid("^process: ([0-9]+) ");
  if (std::regex_search(line, m, kPid)) {
    std::string cmd = ReadFile("/proc/" + m[1].str() + "/cmdline", 65536);
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    text += " " + cmd + " " + ReadFile("/proc/" + m[1].str() + "/cgroup", 65536);
  }
  std::lock_guard<std::mutex> l(mu_);
  std::set<std::string> shorts;
  for (const std::string& id : run_ids_) shorts.insert(Sha256Hex(id).substr(0, 12));
  bool named = false;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kRunId);
       it != std::sregex_iterator(); ++it) {
    named = true;
    if (run_ids_.count(it->str())) return false;
  }
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kShort);
       it != std::sregex_iterator(); ++it) {
    named = true;
    if (shorts.count((*it)[1].str())) return false;
  }
  return named;
}

void Suite::CheckHost() {
  // The service first: drained and stopped (SIGTERM), it must exit cleanly, and leave nothing of
  // its runs in its state directory but the network address pool (persistent by design).
  if (serve_) {
    StopServe();
    // The service ran up to `jobs` runs at once, every kind of hostile output among them; each
    // of its runs may take what one `safex run` may (160 MiB, cases.cc), no more.
    const uint64_t kServeRssKib = static_cast<uint64_t>(std::max(1, o_.jobs)) * 160 * 1024;
    host_notes_.push_back("safex serve: peak resident memory " +
                          std::to_string(serve_peak_rss_kib_ >> 10) + " MiB over the suite");
    if (serve_peak_rss_kib_ == 0 || serve_peak_rss_kib_ > kServeRssKib) {
      host_failures_.push_back("safex serve peak resident memory " +
                               std::to_string(serve_peak_rss_kib_ >> 10) + " MiB (bound " +
                               std::to_string(kServeRssKib >> 10) + " MiB)");
    }
    if (serve_exit_ != 0) {
      host_failures_.push_back("safex serve exited with " + std::to_string(serve_exit_) +
                               " after SIGTERM: " + Trim(ReadFile(serve_dir_ + "/serve.log", 600)));
    }
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(serve_state_, ec)) {
      std::error_code fec;
      std::string rel = e.path().string().substr(serve_state_.size());
      if (rel.rfind("/net", 0) == 0) {
        std::string text = e.is_regular_file(fec) ? ReadFile(e.path().string(), 4096) : "";
        if (text.find_first_not_of(" \n\t") != std::string::npos) {
          host_failures_.push_back("safex serve: network slot record still in use: " + rel);
        }
        continue;
      }
      if (e.is_directory(fec)) continue;      // its own directories (inputs, run records) may stay
      if (rel == "/serve.lock") continue;     // its single-instance lock file
      if (rel == "/runsc-version") continue;  // the gVisor driver's version cache (see below)
      host_failures_.push_back("left in the state directory of safex serve: " + e.path().string());
    }
  }
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
  // Other work on this machine moves free space too (builds and test runs of other engineers on
  // a shared machine took up to 470 MiB during one run of the suite); a sandbox that wrote to the
  // host's disk would have written 1 GiB per directory it fills (the fill probes' cap; R2 and R3
  // fill two each, on every column), so 1 GiB is the tolerance. The microVM
  // driver's image cache is the backend's own (persistent, shared by runs with the same binds):
  // its growth is reported on its own and not counted as a sandbox's writes.
  constexpr uint64_t kTolerance = 1ull << 30;
  uint64_t cache_after = DirBytes(kMicrovmImageCache);
  int64_t cache_growth =
      static_cast<int64_t>(cache_after) - static_cast<int64_t>(image_cache_bytes_);
  if (cache_growth != 0) {
    host_notes_.push_back("the microVM image cache (" + std::string(kMicrovmImageCache) + ") " +
                          (cache_growth > 0 ? "grew" : "shrank") + " by " +
                          std::to_string(std::llabs(cache_growth) >> 20) +
                          " MiB during the suite (images of the runs' bind sources)");
  }
  for (const auto& [path, before] : free_bytes_) {
    uint64_t after = FreeBytes(path);
    bool same_fs = false;
    struct stat a, b;
    same_fs =
        stat(path.c_str(), &a) == 0 && stat(kMicrovmImageCache, &b) == 0 && a.st_dev == b.st_dev;
    uint64_t adjusted =
        after + (same_fs && cache_growth > 0 ? static_cast<uint64_t>(cache_growth) : 0);
    if (adjusted + kTolerance < before) {
      host_failures_.push_back("free space of " + path + " dropped from " +
                               std::to_string(before >> 20) + " MiB to " +
                               std::to_string(after >> 20) + " MiB");
    }
    host_notes_.push_back("free space of " + path + ": " + std::to_string(before >> 20) +
                          " MiB before, " + std::to_string(after >> 20) + " MiB after" +
                          (same_fs && cache_growth > 0 ? " (image cache growth discounted)" : ""));
  }
  // Inodes likewise: R4 makes tens of thousands of files; had any landed on a host filesystem,
  // its free inodes would have dropped by about that many.
  constexpr uint64_t kInodeTolerance = 20000;
  for (const auto& [path, before] : free_inodes_) {
    uint64_t after = FreeInodes(path);
    if (after + kInodeTolerance < before) {
      host_failures_.push_back("free inodes of " + path + " dropped from " +
                               std::to_string(before) + " to " + std::to_string(after));
    }
  }
  if (g_sigusr1.load() != 0) {
    host_failures_.push_back("the runner received " + std::to_string(g_sigusr1.load()) +
                             " SIGUSR1 from a sandbox");
  }
  if (listeners_->TotalHits() != 0) {
    for (const auto& [name, spec] : endpoints_) {
      if (name == "granted") continue;  // the one destination runs are granted (N3, N5, N7)
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
  // Nothing left behind by the runs outside the cells either.
  for (const RunRecord& r : extra_runs_) {
    for (const std::string& l : r.leftovers) {
      host_failures_.push_back("left behind by " + r.inv.label + " run " + r.run_id() + ": " + l);
    }
  }
  // Nothing left behind, machine-wide. Other tests share the machine: what names only their runs
  // is set aside (counted), everything else is the suite's to answer for.
  testing::LeakCheckOptions lo;
  lo.state_root = state_root_;
  testing::LeakSnapshot before;
  before.items = leak_baseline_;
  int others = 0;
  // <state root>/net is the network module's address pool (drivers/net/address_pool.h): one slot
  // file per /30, locked by the run holding it and by design never unlinked (unlink + flock would
  // hand one slot to two runs). It persists across runs like the pool itself; that none of its
  // records still names a run is checked below.
  // Likewise <state root>/runsc-version, the gVisor driver's cache of `runsc --version`, kept
  // by design (drivers/gvisor/runsc_version_cache.h).
  const std::string pool_dir = "state: " + state_root_ + "/net";
  const std::string version_cache = "state: " + state_root_ + "/runsc-version";
  for (const std::string& l : testing::WaitForNoLeaks(before, std::chrono::seconds(5), lo)) {
    if (l == pool_dir || l == version_cache) continue;
    if (OthersOnly(l)) {
      ++others;
      continue;
    }
    host_failures_.push_back("left behind: " + l);
  }
  if (others > 0) {
    host_notes_.push_back(
        std::to_string(others) +
        " new items of the machine-wide leak snapshot "
        "named other processes' runs (tests running alongside) and were set aside");
  }
  // The state root holds nothing of any run: only what the product keeps on purpose
  // (common/persistent_state.h) stays, with nothing of a run inside; and no address lease of the
  // host (drivers/net/address_pool.h) may still hold a run.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_root_, ec)) {
    const std::string name = e.path().filename().string();
    const safex::PersistentEntry* kept = nullptr;
    for (const auto& p : safex::kStateRootPersistent) {
      if (p.name == name) kept = &p;
    }
    if (kept == nullptr) {
      host_failures_.push_back("left in the state root: " + e.path().string());
    } else if (kept->children_are_per_run) {
      for (const auto& c : fs::directory_iterator(e.path(), ec)) {
        if (name == "private" && c.path().filename() == "requests" && fs::is_empty(c.path(), ec)) {
          continue;
        }
        host_failures_.push_back("left in the state root: " + c.path().string());
      }
    }
  }
  const std::string leases = compiler::NetworkSettings{}.lease_dir + "/leases";
  for (const auto& f : fs::directory_iterator(leases, ec)) {
    std::error_code fec;
    std::string text = f.is_regular_file(fec) ? ReadFile(f.path().string(), 4096) : "";
    if (text.find_first_not_of(" \n\t") != std::string::npos) {
      host_failures_.push_back("address lease still in use: " + f.path().string() + ": " +
                               Trim(text).substr(0, 120));
    }
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
        "probes at `/probes`; a few resource cases tighten a limit, said in their rows below). "
        "The column `gvisor, submit (pooled)` makes the same runs through `safex submit` to a "
        "`safex serve` the suite starts (same audit log, policies by name from the service's "
        "policy directory), for every case whose runs the service can take; the service keeps a "
        "warm pool for the wrappers of python-untrusted and base-untrusted, and each of their "
        "runs (input files included) is run in a pooled sandbox (checked: a cell fails otherwise). "
        "The column `gvisor, session (2nd command)` makes each run the second command of an "
        "agent session on the same service (`safex session open`, `safex submit --session`), "
        "after a first command that tried to leave something behind for it (a background "
        "process, shell and Python start-up files, a `sitecustomize` module, symlinks to a host "
        "file and to the root in the scratch space); the session is closed after the run and "
        "nothing of it may be left (a case that gives input files is not run there: a session's "
        "command takes none). "
        "The column `gvisor (ptrace)` makes the runs of the `gvisor` column with gVisor's other "
        "platform, ptrace, set in each run's policy (`gvisor { platform = ptrace }`); the "
        "`gvisor` column runs on the examples' own, systrap. "
        "A cell says what was observed:\n\n";
  md << "- **contained**: the expected outcome, the right verdict and exit status, the run in the "
        "audit log with that verdict, nothing left behind that names the run, and the probe itself "
        "saw no escape. The text is the probe's own observation.\n"
        "- **NOT CONTAINED**: an expectation failed (the first failure is shown; all are listed "
        "below, with what each of the case's runs did). Never counted as a pass.\n"
        "- **refused**: the backend refused the run before anything ran - at plan time (the "
        "policy does not compile for it) or at sandbox setup (the driver refuses what it cannot "
        "do, before creating anything); the cell says which. Never counted as a pass.\n"
        "- **not through submit** / **not through a session**: the submit and session columns "
        "only; the case's runs need something `safex submit` does not offer (an output "
        "directory, `safex run` flags); said which.\n"
        "- **backend not available**: this build or host cannot run the backend at all.\n"
        "- **not yet runnable**: the case needs something `safex` does not do yet (said "
        "which).\n\n";
  md << "Backends:";
  for (const std::string& b : kBackends) {
    auto it = backends_.find(b);
    md << " `" << b << "` ("
       << (it != backends_.end() && it->second.available ? "available"
           : it == backends_.end()                       ? "not probed"
                                                         : it->second.reason);
    if (b == "native" && it != backends_.end()) {
      md << "; the untrusted example policy on it: "
         << (it->second.untrusted_refusal.empty()
                 ? std::string("**not refused**")
                 : "refused at plan time (" + CellText(it->second.untrusted_refusal) + ")");
    }
    md << ");";
  }
  md << " `safex serve` for the submit column ("
     << (serve_error_.empty() ? "started; drained and stopped at the end with exit status " +
                                    std::to_string(serve_exit_)
                              : serve_error_)
     << ").";
  md << "\n\n| id | attack | expected |";
  for (const Column& col : kColumns) md << " " << col.name << " |";
  md << "\n|---|---|---|";
  for (size_t i = 0; i < kColumns.size(); ++i) md << "---|";
  md << "\n";
  std::map<std::string, std::map<CellState, int>> counts;
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    md << "| " << c.id << " | " << CellText(c.attack) << " | " << CellText(c.expected) << " |";
    for (const Column& col : kColumns) {
      const std::string& b = col.name;
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
  for (const Column& col : kColumns) {
    const std::string& b = col.name;
    md << "- `" << b << "`:";
    for (CellState s : {CellState::kContained, CellState::kNotContained, CellState::kRefusedAtPlan,
                        CellState::kNotYetRunnable, CellState::kNotThroughSubmit,
                        CellState::kBackendNotAvailable}) {
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
      for (const std::string& f : cell.failures) md << "  - " << CellText(f, 1000) << "\n";
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
        md << "- " << c.id << " on " << b << ": " << CellText(n, 1000) << "\n";
      }
    }
  }
  if (!any) md << "None.\n";

  md << "\n## The host, before and after\n\n";
  md << "Checked after every run of the suite: SHA-256 of `runsc`, `qemu-system-x86_64`, the "
        "`safex` binary and every probe; the suite's secret file; the host's hostname, "
        "domainname, `uevent_helper`, transparent hugepage setting, `lo` MTU and every cgroup "
        "`release_agent`; free space and free inodes of `/tmp`, `/var/lib`, `/run` and the "
        "suite's directory; the files the probes try to create on the host; SIGUSR1s received by "
        "the runner; connections to the host endpoints the network probes aim at; the shared leak "
        "checker (`tests/support/leak_check.h`) machine-wide; `safex serve` drained and stopped "
        "with exit status 0, its peak memory bounded, nothing of its runs left in its state "
        "directory; no network slot record still naming a run; the audit log's hash "
        "chain.\n\n";
  if (host_failures_.empty()) {
    md << "- **unchanged**: every check above held.\n";
  } else {
    for (const std::string& f : host_failures_) md << "- **FAILED**: " << CellText(f, 1000) << "\n";
  }
  for (const std::string& n : host_notes_) md << "- " << CellText(n, 1000) << "\n";

  md << "\n## Every run\n\n";
  md << "One line per `safex run` (or `safex submit`): case, column, label, the policy (the "
        "example the run's wrapper extends, and what the case added to it), verdict, exit "
        "status, the run's own wall and CPU seconds (from the report), wall seconds of the whole "
        "`safex run` or `safex submit` (with sandbox setup and teardown), peak resident memory "
        "of that `safex` process itself, and the probe's result line.\n\n";
  md << "| case | column | run | policy | verdict | exit | run wall s | run CPU s | safex wall s "
        "| safex RSS MiB | probe result |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Case& c : cases_) {
    auto row = cells_.find(c.id);
    if (row == cells_.end()) continue;
    for (const auto& [b, cell] : row->second) {
      for (const RunRecord& r : cell.runs) {
        char wall[96];
        auto secs = [&](const char* key) {
          return r.report.is_object() && r.report.contains(key) && r.report[key].is_number()
                     ? r.report[key].get<double>() / 1e9
                     : 0.0;
        };
        snprintf(wall, sizeof wall, "%.1f | %.1f | %.1f", secs("wall_ns"), secs("cpu_ns"),
                 r.proc.wall_seconds);
        std::string probe = r.ProbeResult();
        if (probe.empty() && r.verdict() == "refused") probe = "(refused: " + r.Reason() + ")";
        md << "| " << c.id << " | " << b << " | "
           << CellText(r.inv.label.empty() ? "-" : r.inv.label) << " | "
           << CellText(PolicyText(r.inv), 400) << " | " << r.verdict() << " | " << r.proc.status
           << " | " << wall << " | " << (r.proc.peak_rss_kib >> 10) << " | " << CellText(probe)
           << " |\n";
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
        "# a few cases, fewer runs at once:\n"
        "SAFEX_CONTAINMENT_CASES=R4,N5 SAFEX_CONTAINMENT_JOBS=2 "
        "build/tests/containment/containment_test --gtest_filter='Containment.*'\n"
        "```\n\n"
        "The microVM column needs the guest installed (`scripts/build-guest.sh`); without it the "
        "column says why it is not available. Runs go 4 at a time by default, the longest cases "
        "first.\n\n";
  md << "The suite also has a self-test (`ContainmentSelfTest`): it runs a few probes with no "
        "sandbox at all (plain fork/exec in a throwaway directory) and checks that they detect "
        "their own success there and that the suite's checks call it an escape, so a broken "
        "probe cannot pass as a contained case.\n";
  return md.str();
}

}  // namespace safex::containment
