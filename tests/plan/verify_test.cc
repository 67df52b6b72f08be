#include "plan/verify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <functional>

#include "plan/plan_json.h"
#include "tests/plan/valid_plan.h"

namespace safex::plan {
namespace {

using testing::ValidPlan;

std::string Codes(const std::vector<Violation>& v) {
  std::string s;
  for (const auto& x : v) s += x.code + " " + x.field + ": " + x.message + "\n";
  return s;
}

TEST(VerifyTest, ValidPlanPasses) {
  auto v = Verify(ValidPlan(), DefaultCeilings());
  EXPECT_TRUE(v.empty()) << Codes(v);
}

struct Case {
  const char* name;
  const char* code;
  const char* field;  // expected field (prefix match)
  std::function<void(Plan&, Ceilings&)> mutate;
};

// One failing plan per invariant: each mutation must produce its code, on its field.
const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      {"format version", "E060", "format_version", [](Plan& p, Ceilings&) { p.format_version = 2; }},
      {"untrusted native", "E061", "backend",
       [](Plan& p, Ceilings& c) {
         p.backend = Backend::kNative;
         c.allowed_backends.insert(Backend::kNative);
       }},
      {"trusted native not allowed", "E062", "backend",
       [](Plan& p, Ceilings&) {
         p.trust = Trust::kTrusted;
         p.backend = Backend::kNative;
       }},
      {"microvm not allowed", "E062", "backend",
       [](Plan& p, Ceilings& c) {
         p.backend = Backend::kMicrovm;
         c.allowed_backends = {Backend::kGvisor};
       }},
      {"limit zero", "E063", "limits.memory_bytes", [](Plan& p, Ceilings&) { p.limits.memory_bytes = 0; }},
      {"cpus zero", "E063", "limits.cpus", [](Plan& p, Ceilings&) { p.limits.cpus = 0; }},
      {"limit above ceiling", "E064", "limits.wall_time_ns",
       [](Plan& p, Ceilings& c) { p.limits.wall_time_ns = c.max.wall_time_ns + 1; }},
      {"pids above ceiling", "E064", "limits.pids", [](Plan&, Ceilings& c) { c.max.pids = 10; }},
      {"relative target", "E065", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "tmp"; }},
      {"dotdot target", "E065", "mounts[1].target",
       [](Plan& p, Ceilings&) { p.mounts[1].target = "/tmp/../etc"; }},
      {"double slash", "E065", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "/a//b"; }},
      {"trailing slash", "E065", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "/tmp/"; }},
      {"root target", "E065", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "/"; }},
      {"proc target", "E065", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "/proc/x"; }},
      {"same target", "E066", "mounts[1].target", [](Plan& p, Ceilings&) { p.mounts[1].target = "/usr"; }},
      {"nested target", "E066", "mounts[3].target",
       [](Plan& p, Ceilings&) { p.mounts[3].target = "/data/in/out"; }},
      {"bind root", "E067", "mounts[0].source", [](Plan& p, Ceilings&) { p.mounts[0].source = "/"; }},
      {"bind etc", "E067", "mounts[0].source", [](Plan& p, Ceilings&) { p.mounts[0].source = "/etc"; }},
      {"bind under proc", "E067", "mounts[0].source",
       [](Plan& p, Ceilings&) { p.mounts[0].source = "/proc/self"; }},
      {"bind safex state", "E067", "mounts[0].source",
       [](Plan& p, Ceilings&) { p.mounts[0].source = "/var/lib/safex/runs"; }},
      {"bind parent of state", "E067", "mounts[0].source",
       [](Plan& p, Ceilings&) { p.mounts[0].source = "/var/lib"; }},
      {"bind var/run symlink", "E067", "mounts[0].source",
       [](Plan& p, Ceilings&) { p.mounts[0].source = "/var/run"; }},
      {"bind relative", "E067", "mounts[0].source", [](Plan& p, Ceilings&) { p.mounts[0].source = "usr"; }},
      {"bind operator forbidden", "E067", "mounts[0].source",
       [](Plan&, Ceilings& c) { c.forbidden_mount_sources = {"/usr/share"}; }},
      {"writable bind untrusted", "E068", "mounts[0]",
       [](Plan& p, Ceilings&) { p.mounts[0].read_only = false; p.mounts[0].noexec = true; }},
      {"writable without nosuid", "E068", "mounts[1]", [](Plan& p, Ceilings&) { p.mounts[1].nosuid = false; }},
      {"writable without nodev", "E068", "mounts[1]", [](Plan& p, Ceilings&) { p.mounts[1].nodev = false; }},
      {"untrusted writable exec", "E068", "mounts[3].noexec",
       [](Plan& p, Ceilings&) { p.mounts[3].noexec = false; }},
      {"tmpfs with source", "E068", "mounts[1].source",
       [](Plan& p, Ceilings&) { p.mounts[1].source = "/srv"; }},
      {"tmpfs uncapped", "E069", "mounts[1].size_bytes", [](Plan& p, Ceilings&) { p.mounts[1].size_bytes = 0; }},
      {"output above disk ceiling", "E069", "mounts[3].size_bytes",
       [](Plan& p, Ceilings& c) { p.mounts[3].size_bytes = c.max.disk_bytes + 1; }},
      {"two inputs", "E070", "mounts[4]",
       [](Plan& p, Ceilings&) {
         p.mounts.push_back({MountKind::kInput, "/in2", "", true, 0, true, true, true});
       }},
      {"writable input", "E070", "mounts[2].read_only", [](Plan& p, Ceilings&) { p.mounts[2].read_only = false; }},
      {"validator outside output", "E071", "validators[1].path",
       [](Plan& p, Ceilings&) { p.validators[1].path = "/tmp/result.json"; }},
      {"validator path dotdot", "E071", "validators[1].path",
       [](Plan& p, Ceilings&) { p.validators[1].path = "/data/out/../in/x"; }},
      {"validator path is the mount", "E071", "validators[1].path",
       [](Plan& p, Ceilings&) { p.validators[1].path = "/data/out"; }},
      {"stream validator with path", "E071", "validators[0].path",
       [](Plan& p, Ceilings&) { p.validators[0].path = "/data/out/x"; }},
      {"egress bad host", "E072", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "pypi.org:443"; }},
      {"egress wildcard", "E072", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "*.pypi.org"; }},
      {"egress localhost", "E072", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "localhost"; }},
      {"egress metadata name", "E072", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "metadata.google.internal"; }},
      {"egress port 0", "E072", "network.egress[0].port", [](Plan& p, Ceilings&) { p.network.egress[0].port = 0; }},
      {"egress duplicate", "E072", "network.egress[1]",
       [](Plan& p, Ceilings&) { p.network.egress.push_back(p.network.egress[0]); }},
      {"egress loopback", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "127.0.0.1"; }},
      {"egress metadata", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "169.254.169.254"; }},
      {"egress metadata v6", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "fd00:ec2::254"; }},
      {"egress mapped loopback", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "::ffff:127.0.0.1"; }},
      {"egress private", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "10.0.0.5"; }},
      {"egress cgnat", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "100.64.1.1"; }},
      {"egress multicast", "E073", "network.egress[0].host",
       [](Plan& p, Ceilings&) { p.network.egress[0].host = "224.0.0.251"; }},
      {"ld_preload", "E074", "env.LD_PRELOAD", [](Plan& p, Ceilings&) { p.env["LD_PRELOAD"] = "/x.so"; }},
      {"ld_library_path", "E074", "env.LD_LIBRARY_PATH",
       [](Plan& p, Ceilings&) { p.env["LD_LIBRARY_PATH"] = "/x"; }},
      {"ld_audit", "E074", "env.LD_AUDIT", [](Plan& p, Ceilings&) { p.env["LD_AUDIT"] = "/x"; }},
      {"glibc tunables", "E074", "env.GLIBC_TUNABLES", [](Plan& p, Ceilings&) { p.env["GLIBC_TUNABLES"] = "x"; }},
      {"env bad name", "E075", "env.A=B", [](Plan& p, Ceilings&) { p.env["A=B"] = "x"; }},
      {"env digit name", "E075", "env.1A", [](Plan& p, Ceilings&) { p.env["1A"] = "x"; }},
      {"env NUL", "E087", "env.A", [](Plan& p, Ceilings&) { p.env["A"] = std::string("x\0y", 3); }},
      {"caller env loader", "E074", "caller.env.LD_PRELOAD",
       [](Plan& p, Ceilings&) { p.caller.env = {"LD_PRELOAD"}; }},
      {"caller env bad name", "E075", "caller.env.A=B",
       [](Plan& p, Ceilings&) { p.caller.env = {"A=B"}; }},
      {"caller env unsorted", "E075", "caller.env",
       [](Plan& p, Ceilings&) { p.caller.env = {"B", "A"}; }},
      {"caller cwd relative", "E083", "caller.cwd",
       [](Plan& p, Ceilings&) { p.caller.cwd = {"tmp"}; }},
      {"caller cwd dotdot", "E083", "caller.cwd",
       [](Plan& p, Ceilings&) { p.caller.cwd = {"/tmp/../etc"}; }},
      {"session bounds without sessions", "E095", "session",
       [](Plan& p, Ceilings&) { p.session.max_execs = 5; }},
      {"session without commands", "E095", "session.max_execs",
       [](Plan& p, Ceilings&) { p.session = {true, 0, 60'000'000'000ull, 60'000'000'000ull}; }},
      {"session too many commands", "E095", "session.max_execs",
       [](Plan& p, Ceilings&) { p.session = {true, 10001, 60'000'000'000ull, 60'000'000'000ull}; }},
      {"session idle under a second", "E095", "session.idle_timeout_ns",
       [](Plan& p, Ceilings&) { p.session = {true, 5, 999'999'999ull, 60'000'000'000ull}; }},
      {"session lifetime under its idle timeout", "E095", "session.max_lifetime_ns",
       [](Plan& p, Ceilings&) { p.session = {true, 5, 60'000'000'000ull, 59'000'000'000ull}; }},
      {"session lifetime over a day", "E095", "session.max_lifetime_ns",
       [](Plan& p, Ceilings&) { p.session = {true, 5, 60'000'000'000ull, 86401'000'000'000ull}; }},
      {"unknown syscall", "E076", "seccomp.rules[1].name",
       [](Plan& p, Ceilings&) { p.seccomp.rules[1].name = "ptracee"; }},
      {"duplicate syscall", "E077", "seccomp.rules[1].name",
       [](Plan& p, Ceilings&) { p.seccomp.rules[1].name = "bpf"; }},
      {"unsorted syscall", "E077", "seccomp.rules[1].name",
       [](Plan& p, Ceilings&) { std::swap(p.seccomp.rules[0], p.seccomp.rules[1]); }},
      {"errno range", "E078", "seccomp.rules[0].errno_value",
       [](Plan& p, Ceilings&) { p.seccomp.rules[0].errno_value = 0; }},
      {"default errno range", "E078", "seccomp.default_errno",
       [](Plan& p, Ceilings&) {
         p.seccomp.default_action = SyscallAction::kErrno;
         p.seccomp.default_errno = 5000;
       }},
      {"validator uncapped", "E079", "validators[0].max_bytes",
       [](Plan& p, Ceilings&) { p.validators[0].max_bytes = 0; }},
      {"validator above output limit", "E079", "validators[0].max_bytes",
       [](Plan& p, Ceilings&) { p.validators[0].max_bytes = p.limits.output_bytes + 1; }},
      {"regex too long", "E080", "validators[0].regex[0].pattern",
       [](Plan& p, Ceilings&) { p.validators[0].regex[0].pattern = std::string(2000, 'a'); }},
      {"too many regex", "E080", "validators[0].regex",
       [](Plan& p, Ceilings&) { p.validators[0].regex.resize(40, p.validators[0].regex[0]); }},
      {"json depth", "E080", "validators[1].json.max_depth",
       [](Plan& p, Ceilings&) { p.validators[1].json->max_depth = 100000; }},
      {"regex does not compile", "E081", "validators[0].regex[0].pattern",
       [](Plan& p, Ceilings&) { p.validators[0].regex[0].pattern = "(unclosed"; }},
      {"backreference", "E081", "validators[0].regex[0].pattern",
       [](Plan& p, Ceilings&) { p.validators[0].regex[0].pattern = "(a)\\1"; }},
      {"json type", "E082", "validators[1].json.required.answer",
       [](Plan& p, Ceilings&) { p.validators[1].json->required["answer"] = "int"; }},
      {"root untrusted", "E083", "process.uid", [](Plan& p, Ceilings&) { p.process.uid = 0; }},
      {"root group untrusted", "E083", "process.gid", [](Plan& p, Ceilings&) { p.process.gid = 0; }},
      {"cwd relative", "E083", "process.cwd", [](Plan& p, Ceilings&) { p.process.cwd = "work"; }},
      {"gvisor platform", "E084", "gvisor.platform", [](Plan& p, Ceilings&) { p.gvisor.platform = "kvm"; }},
      {"vcpus zero", "E084", "microvm.vcpus", [](Plan& p, Ceilings&) { p.microvm.vcpus = 0; }},
      {"outputs uncapped", "E085", "outputs.max_files", [](Plan& p, Ceilings&) { p.outputs.max_files = 0; }},
      {"outputs above disk", "E085", "outputs.max_total_bytes",
       [](Plan& p, Ceilings& c) { p.outputs.max_total_bytes = c.max.disk_bytes + 1; }},
      {"no name", "E086", "policy_name", [](Plan& p, Ceilings&) { p.policy_name = ""; }},
      {"source digest", "E086", "source_digest", [](Plan& p, Ceilings&) { p.source_digest[0] ^= 1; }},
      {"no sources", "E086", "sources", [](Plan& p, Ceilings&) { p.sources.clear(); }},
      {"bad utf8", "E087", "policy_name", [](Plan& p, Ceilings&) { p.policy_name = "a\xc0\x80"; }},
      {"override no reason", "E088", "overrides[0]",
       [](Plan& p, Ceilings&) { p.overrides.push_back({"limits.pids", "", "x:1:1"}); }},
      {"too many mounts", "E089", "mounts",
       [](Plan& p, Ceilings&) {
         for (int i = 0; i < 70; ++i) {
           p.mounts.push_back({MountKind::kTmpfs, "/m" + std::to_string(i), "", false, 1, true, true, true});
         }
       }},
  };
  return kCases;
}

TEST(VerifyTest, EachInvariantHasAFailingPlan) {
  for (const auto& c : Cases()) {
    Plan p = ValidPlan();
    Ceilings ceil = DefaultCeilings();
    c.mutate(p, ceil);
    auto v = Verify(p, ceil);
    bool found = false;
    for (const auto& x : v) {
      if (x.code == c.code && x.field.rfind(c.field, 0) == 0) found = true;
    }
    EXPECT_TRUE(found) << c.name << ": expected " << c.code << " on " << c.field << ", got\n"
                       << Codes(v);
  }
}

TEST(VerifyTest, EveryCodeIsCovered) {
  std::set<std::string> codes;
  for (const auto& c : Cases()) codes.insert(c.code);
  for (int i = 60; i <= 89; ++i) EXPECT_TRUE(codes.count("E0" + std::to_string(i))) << i;
}

TEST(VerifyTest, TrustedCodeMayDoWhatUntrustedMayNot) {
  Plan p = ValidPlan();
  p.trust = Trust::kTrusted;
  p.backend = Backend::kNative;
  p.process.uid = 0;
  p.mounts[3].noexec = false;
  Ceilings c = DefaultCeilings();
  c.allowed_backends.insert(Backend::kNative);
  auto v = Verify(p, c);
  EXPECT_TRUE(v.empty()) << Codes(v);
}

TEST(VerifyTest, OperatorRangesAdmitPrivateEgressOnly) {
  Plan p = ValidPlan();
  p.network.egress[0].host = "10.20.1.2";
  Ceilings c = DefaultCeilings();
  c.allowed_egress_ranges = {"10.20.0.0/16"};
  EXPECT_TRUE(Verify(p, c).empty());
  p.network.egress[0].host = "10.21.1.2";
  EXPECT_FALSE(Verify(p, c).empty());
  p.network.egress[0].host = "198.18.0.1";  // benchmarking: the tests' own namespaces
  EXPECT_TRUE(Verify(p, DefaultCeilings()).empty());
}

TEST(VerifyTest, BindSourceThatIsASocketIsRefused) {
  char dir[] = "/tmp/safex-verify.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string sock = std::string(dir) + "/s";
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string link = std::string(dir) + "/l";
  ASSERT_EQ(symlink("/etc", link.c_str()), 0);
  Plan p = ValidPlan();
  p.mounts[0].source = sock;
  auto v = Verify(p, DefaultCeilings());
  p.mounts[0].source = link;
  auto v2 = Verify(p, DefaultCeilings());
  close(fd);
  unlink(sock.c_str());
  unlink(link.c_str());
  rmdir(dir);
  ASSERT_EQ(v.size(), 1u) << Codes(v);
  EXPECT_EQ(v[0].code, "E067");
  EXPECT_NE(v[0].message.find("socket"), std::string::npos);
  ASSERT_EQ(v2.size(), 1u) << Codes(v2);
  EXPECT_EQ(v2[0].code, "E067");
  EXPECT_NE(v2[0].message.find("/etc"), std::string::npos);
}

TEST(VerifyTest, HandEditedJsonBreakingAnInvariantIsRefused) {
  // The supervisor's path: JSON in, PlanFromJson, Verify. A digest-consistent but hostile edit.
  Plan p = ValidPlan();
  p.mounts[0].source = "/etc";
  p.env["LD_PRELOAD"] = "/tmp/x.so";
  auto back = PlanFromJson(ToCanonicalJsonWithDigest(p));
  ASSERT_TRUE(back.ok());
  auto v = Verify(*back, DefaultCeilings());
  std::set<std::string> codes;
  for (const auto& x : v) codes.insert(x.code);
  EXPECT_TRUE(codes.count("E067"));
  EXPECT_TRUE(codes.count("E074"));
}

TEST(PathHelpersTest, NormalisedPaths) {
  EXPECT_TRUE(IsNormalAbsolutePath("/"));
  EXPECT_TRUE(IsNormalAbsolutePath("/a/b.c/..d"));
  for (const char* bad :
       {"", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/..", "/.", "/a\nb"}) {
    EXPECT_FALSE(IsNormalAbsolutePath(bad)) << bad;
  }
  EXPECT_TRUE(PathWithin("/data/out", "/data"));
  EXPECT_TRUE(PathWithin("/data", "/data"));
  EXPECT_FALSE(PathWithin("/database", "/data"));
  EXPECT_TRUE(PathWithin("/x", "/"));
}

TEST(PathHelpersTest, DnsNamesAndSyscalls) {
  EXPECT_TRUE(IsValidDnsName("pypi.org"));
  EXPECT_TRUE(IsValidDnsName("files.pythonhosted.org."));
  EXPECT_TRUE(IsValidDnsName("a-b.example"));
  for (const char* bad :
       {"", ".", "a..b", "-a.com", "a-.com", "a_b.com", "1.2.3.4", "*.a.com", "a.com:443"}) {
    EXPECT_FALSE(IsValidDnsName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidDnsName(std::string(64, 'a') + ".com"));
  EXPECT_TRUE(IsKnownSyscall("ptrace"));
  EXPECT_TRUE(IsKnownSyscall("io_uring_setup"));
  EXPECT_FALSE(IsKnownSyscall("ptracee"));
  EXPECT_FALSE(IsKnownSyscall("PTRACE"));
  EXPECT_FALSE(IsKnownSyscall(""));
}

}  // namespace
}  // namespace safex::plan
