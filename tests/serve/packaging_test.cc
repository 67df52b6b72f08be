// packaging/safex.service against the code: the unit must start the installed binary the way the
// daemon expects (Type=notify, SIGTERM drain, a stop timeout above the drain deadline) and the
// directories it creates must be the ones the built-in defaults use (socket, state dir, audit
// log, policy dir, netns pins). When systemd-analyze is present, the unit must also verify.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "compiler/host_config.h"
#include "drivers/net/network_config.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr char kInstalledBinary[] = "/usr/local/bin/safex";

std::string UnitPath() { return testing::SourceDir() + "/packaging/safex.service"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// section -> key -> values (a key may repeat). Comments and blank lines are skipped; no line
// continuations are used in the unit (checked).
using Unit = std::map<std::string, std::map<std::string, std::vector<std::string>>>;

Unit ParseUnit(const std::string& text) {
  Unit u;
  std::string section;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    EXPECT_FALSE(line.ends_with("\\")) << "line continuation: " << line;
    if (line.front() == '[') {
      EXPECT_EQ(line.back(), ']') << line;
      section = line.substr(1, line.size() - 2);
      continue;
    }
    size_t eq = line.find('=');
    EXPECT_NE(eq, std::string::npos) << "not key=value: " << line;
    if (eq == std::string::npos) continue;
    EXPECT_FALSE(section.empty()) << "option outside a section: " << line;
    u[section][line.substr(0, eq)].push_back(line.substr(eq + 1));
  }
  return u;
}

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::string Parent(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

// "45s", "2min", "90" (seconds) -> seconds.
double Seconds(const std::string& v) {
  size_t n = 0;
  double x = std::stod(v, &n);
  std::string unit = v.substr(n);
  if (unit == "min") return x * 60;
  if (unit == "ms") return x / 1000;
  EXPECT_TRUE(unit.empty() || unit == "s") << v;
  return x;
}

class PackagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = ReadAll(UnitPath());
    ASSERT_FALSE(text_.empty()) << UnitPath();
    unit_ = ParseUnit(text_);
  }
  // The single value of [Service] key (empty when absent, a failure when repeated).
  std::string Service(const std::string& key) {
    auto& s = unit_["Service"];
    auto it = s.find(key);
    if (it == s.end()) return "";
    EXPECT_EQ(it->second.size(), 1u) << key << " is set more than once";
    return it->second.back();
  }
  std::string text_;
  Unit unit_;
};

TEST_F(PackagingTest, ExecStartRunsTheInstalledBinaryWithTheDefaultConfig) {
  std::vector<std::string> exec = Words(Service("ExecStart"));
  ASSERT_GE(exec.size(), 2u);
  EXPECT_EQ(exec[0], kInstalledBinary);
  EXPECT_EQ(exec[1], "serve");
  auto config = std::find(exec.begin(), exec.end(), "--config");
  ASSERT_NE(config, exec.end());
  ASSERT_NE(config + 1, exec.end());
  EXPECT_EQ(*(config + 1), compiler::kDefaultHostConfigPath);
  // Nothing on the command line overrides a path: the host config is the one place they are set.
  for (const char* flag : {"--socket", "--state-dir", "--audit-db", "--policy-dir"}) {
    EXPECT_THAT(exec, ::testing::Not(Contains(flag))) << flag;
  }
  // The daemon sends READY=1 itself (cli_serve.cc) after recovery, and drains on SIGTERM.
  EXPECT_EQ(Service("Type"), "notify");
  EXPECT_EQ(Service("NotifyAccess"), "main");
  EXPECT_EQ(Service("KillMode"), "mixed");
  EXPECT_EQ(Service("KillSignal"), "SIGTERM");
  // systemd must not SIGKILL a drain that is within the default deadline, plus time to record.
  compiler::ServiceSettings defaults;
  double drain = static_cast<double>(defaults.drain_timeout_ns) / 1e9;
  EXPECT_GE(Seconds(Service("TimeoutStopSec")), drain + 10) << "TimeoutStopSec vs drain_timeout";
  EXPECT_EQ(unit_["Install"]["WantedBy"], std::vector<std::string>{"multi-user.target"});
}

TEST_F(PackagingTest, DirectoriesAreTheDefaultsOfTheServiceSection) {
  compiler::ServiceSettings d;
  // RuntimeDirectory= is relative to /run, StateDirectory= to /var/lib, ConfigurationDirectory=
  // to /etc.
  const std::string runtime = "/run/" + Service("RuntimeDirectory");
  const std::string state = "/var/lib/" + Service("StateDirectory");
  const std::string config = "/etc/" + Service("ConfigurationDirectory");
  EXPECT_EQ(runtime, d.state_dir);
  EXPECT_EQ(Parent(d.socket), runtime);
  EXPECT_EQ(Parent(d.audit_db), state);
  EXPECT_EQ(Parent(audit::kDefaultKeyPath), state);
  EXPECT_EQ(Parent(d.policy_dir), config);
  EXPECT_EQ(Parent(compiler::kDefaultHostConfigPath), config);
  // Recovery after a crash needs the previous instance's sandbox state: kept across restarts.
  EXPECT_EQ(Service("RuntimeDirectoryPreserve"), "yes");
  // The audit log is not for every local user to read.
  EXPECT_EQ(Service("StateDirectoryMode"), "0700");
  // Run network namespace pins: writable, and made before the sandboxed ExecStart.
  drivers::net::NetworkConfig net;
  EXPECT_THAT(Words(Service("ReadWritePaths")), Contains(net.netns_dir));
  EXPECT_THAT(Service("ExecStartPre"), HasSubstr("mkdir -p " + net.netns_dir));
  EXPECT_TRUE(Service("ExecStartPre").starts_with("+")) << "/run is read-only to ExecStart";
}

TEST_F(PackagingTest, HardeningThatFitsAPrivilegedSupervisor) {
  EXPECT_EQ(Service("ProtectSystem"), "strict");
  EXPECT_EQ(Service("ProtectHome"), "yes");
  EXPECT_EQ(Service("PrivateTmp"), "yes");
  EXPECT_EQ(Service("NoNewPrivileges"), "yes");
  EXPECT_EQ(Service("ProtectKernelModules"), "yes");
  std::vector<std::string> families = Words(Service("RestrictAddressFamilies"));
  std::sort(families.begin(), families.end());
  EXPECT_EQ(families, (std::vector<std::string>{"AF_INET", "AF_INET6", "AF_NETLINK", "AF_UNIX"}));
  EXPECT_GE(std::stoul(Service("LimitNOFILE")), 65536u);
  // What the daemon needs must stay available: cgroups and /proc/sys writable, /dev/net/tun and
  // /dev/kvm visible, every kind of namespace allowed, no user switch.
  for (const char* off : {"ProtectControlGroups", "ProtectKernelTunables", "PrivateDevices",
                          "PrivateNetwork", "RestrictNamespaces", "MemoryDenyWriteExecute", "User",
                          "DynamicUser", "SystemCallFilter"}) {
    EXPECT_EQ(Service(off), "") << off << " is set; the daemon needs what it takes away";
  }
  // The capabilities runsc needs stay in the bounding set (it is a deny list).
  std::string caps = Service("CapabilityBoundingSet");
  ASSERT_TRUE(caps.starts_with("~")) << caps;
  for (const char* needed : {"CAP_SYS_ADMIN", "CAP_SYS_CHROOT", "CAP_SETUID", "CAP_SETGID",
                             "CAP_SYS_PTRACE", "CAP_NET_ADMIN", "CAP_DAC_OVERRIDE", "CAP_KILL"}) {
    EXPECT_THAT(Words(caps.substr(1)), ::testing::Not(Contains(needed))) << needed;
  }
  // Every option is explained: the unit carries more comment lines than option lines.
  int comments = 0, options = 0;
  std::istringstream in(text_);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#"))
      ++comments;
    else if (line.find('=') != std::string::npos)
      ++options;
  }
  EXPECT_GT(comments, options);
}

// The host config packaging/install.sh installs: it loads, keeps the paths the unit makes, and its
// drain deadline fits in the unit's stop timeout.
TEST_F(PackagingTest, ExampleHostConfigAgreesWithTheUnit) {
  auto host = compiler::LoadHostConfigFile(testing::SourceDir() + "/packaging/host.policy");
  ASSERT_TRUE(host.ok()) << host.status().message();
  const compiler::ServiceSettings& svc = host->service;
  compiler::ServiceSettings d;
  EXPECT_EQ(svc.socket, d.socket);
  EXPECT_EQ(svc.state_dir, d.state_dir);
  EXPECT_EQ(svc.audit_db, d.audit_db);
  EXPECT_EQ(svc.policy_dir, d.policy_dir);
  EXPECT_EQ(svc.socket_group, "safex");
  EXPECT_EQ(svc.socket_mode, 0660u);
  EXPECT_LE(static_cast<double>(svc.drain_timeout_ns) / 1e9 + 10,
            Seconds(Service("TimeoutStopSec")));
  EXPECT_FALSE(svc.allow.empty());
  EXPECT_EQ(host->ceilings.allowed_backends.count(plan::Backend::kNative), 0u)
      << "the example must not admit unsandboxed runs";
}

// systemd's own checker, with ExecStart pointed at the built binary (the installed one need not
// exist on the test machine). It needs no root and no running systemd.
TEST_F(PackagingTest, SystemdAnalyzeVerifies) {
  SAFEX_REQUIRE(access("/usr/bin/systemd-analyze", X_OK) == 0,
                "systemd-analyze (package systemd, scripts/install-deps.sh)");
  // The built binary; a build that has none (a sanitizer build of unit tests only) uses
  // /bin/true, which is enough for systemd to check the unit's syntax and settings.
  std::string binary = testing::SafexBinary();
  if (access(binary.c_str(), X_OK) != 0) binary = "/bin/true";
  std::string unit = text_;
  for (size_t at; (at = unit.find(kInstalledBinary)) != std::string::npos;) {
    unit.replace(at, sizeof(kInstalledBinary) - 1, binary);
  }
  testing::TempDir dir;
  std::string path = dir.Write("safex.service", unit);
  testing::ProcessOutput r = testing::RunProcess({"/usr/bin/systemd-analyze", "verify", path});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "") << "systemd-analyze has remarks";
}

}  // namespace
}  // namespace safex
