#include "compiler/compiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/sha256.h"
#include "compiler/explain.h"
#include "plan/plan_json.h"
#include "plan/verify.h"
#include "tests/compiler/compiler_test_util.h"

namespace safex::compiler {
namespace {

using testing::Body;
using testing::Codes;
using testing::CodesOnly;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Policy;
using testing::TempDir;

CompileResult Compile(const std::string& path, CompileOptions opt = {}) {
  return CompileFile(path, opt);
}

TEST(CompilerTest, ValidPolicyLowersToThePlan) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p", R"(  syscalls {
    kill [ptrace]
    errno ENOSYS [io_uring_setup]
  }
  network {
    egress "PyPI.org:443"
    egress "udp://198.18.0.1:53"
    egress "[2001:DB8::1]:8443"
  }
  validate file "/out/r.json" {
    max = 1MiB
    json = true
    json_max_depth = 8
    require {
      answer = integer
    }
  }
)")));
  // The body's own network and syscalls blocks appear twice: the second of each is an error.
  EXPECT_THAT(CodesOnly(r), ElementsAre("E025", "E025"));
  EXPECT_FALSE(r.ok());

  r = Compile(dir.Write("q.policy", "policy \"q\" {\n" + Body() + "}\n"));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  const plan::Plan& p = *r.plan;
  EXPECT_EQ(p.policy_name, "q");
  EXPECT_EQ(p.limits.wall_time_ns, 30'000'000'000ULL);
  EXPECT_EQ(p.limits.memory_bytes, 512ULL << 20);
  EXPECT_EQ(p.limits.cpus, 1u);
  ASSERT_EQ(p.mounts.size(), 5u);
  EXPECT_EQ(p.mounts[0].target, "/usr");
  EXPECT_EQ(p.mounts[0].source, "/usr");
  EXPECT_TRUE(p.mounts[0].read_only);
  EXPECT_FALSE(p.mounts[0].noexec);
  EXPECT_EQ(p.mounts[2].kind, plan::MountKind::kTmpfs);
  EXPECT_FALSE(p.mounts[2].read_only);
  EXPECT_TRUE(p.mounts[2].noexec);
  EXPECT_EQ(p.mounts[2].size_bytes, 64ULL << 20);
  EXPECT_EQ(p.mounts[3].kind, plan::MountKind::kInput);
  EXPECT_TRUE(p.mounts[3].read_only);
  ASSERT_EQ(p.network.egress.size(), 1u);
  EXPECT_EQ(p.network.egress[0].host, "pypi.org");
  EXPECT_EQ(p.seccomp.rules.size(), 2u);
  EXPECT_EQ(p.seccomp.rules[0].name, "bpf");
  EXPECT_EQ(p.process.uid, 65534u);
  EXPECT_EQ(p.sources.size(), 1u);
  EXPECT_EQ(p.sources[0].sha256, Sha256Hex(r.sources.begin()->second));
  EXPECT_EQ(p.source_digest, Sha256Hex(p.sources[0].sha256));
  EXPECT_TRUE(plan::Verify(p, plan::DefaultCeilings()).empty());
}

TEST(CompilerTest, EgressSyscallAndValidatorForms) {
  TempDir dir;
  std::string body = Body();
  body = body.substr(0, body.find("  network {"));
  auto r = Compile(dir.Write("p.policy", "policy \"p\" {\n" + body + R"(  network {
    default = deny
    egress "PyPI.org:443"
    egress "udp://198.18.0.1:53"
    egress "[2001:DB8::1]:8443"
  }
  syscalls {
    default = allow
    kill [ptrace]
    errno ENOSYS [io_uring_setup]
    log [personality]
  }
  validate file "/out/r.json" {
    max = 1MiB
    json = true
    json_max_depth = 8
    require {
      answer = integer
    }
    require "long-key" = string
  }
  validate stderr {
    max = 4KiB
    overflow = truncate
    redact /secret=\S+/ with "secret=***"
    max_lines = 10
  }
}
)"));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  const plan::Plan& p = *r.plan;
  ASSERT_EQ(p.network.egress.size(), 3u);
  EXPECT_EQ(p.network.egress[0].host, "pypi.org");
  EXPECT_EQ(p.network.egress[0].protocol, plan::Protocol::kTcp);
  EXPECT_EQ(p.network.egress[1].host, "198.18.0.1");
  EXPECT_EQ(p.network.egress[1].port, 53);
  EXPECT_EQ(p.network.egress[1].protocol, plan::Protocol::kUdp);
  EXPECT_EQ(p.network.egress[2].host, "2001:db8::1");
  ASSERT_EQ(p.seccomp.rules.size(), 3u);
  EXPECT_EQ(p.seccomp.rules[0].name, "io_uring_setup");
  EXPECT_EQ(p.seccomp.rules[0].action, plan::SyscallAction::kErrno);
  EXPECT_EQ(p.seccomp.rules[0].errno_value, 38);
  EXPECT_EQ(p.seccomp.rules[1].action, plan::SyscallAction::kLog);
  EXPECT_EQ(p.seccomp.rules[2].action, plan::SyscallAction::kKill);
  ASSERT_EQ(p.validators.size(), 2u);
  ASSERT_TRUE(p.validators[0].json);
  EXPECT_EQ(p.validators[0].json->max_depth, 8u);
  EXPECT_EQ(p.validators[0].json->required.at("long-key"), "string");
  EXPECT_EQ(p.validators[0].json->required.at("answer"), "integer");
  EXPECT_EQ(p.validators[1].regex[0].pattern, "secret=\\S+");
  EXPECT_EQ(p.validators[1].regex[0].action, plan::RegexAction::kRedact);
  EXPECT_EQ(p.validators[1].regex[0].replacement, "secret=***");
  EXPECT_EQ(p.validators[1].on_overflow, plan::OverflowAction::kTruncate);
  EXPECT_EQ(p.validators[1].max_lines, 10u);
}

TEST(CompilerTest, ProvenanceNamesTheStatementAndTheAncestor) {
  TempDir dir;
  std::string base = dir.Write("base.policy", Policy("base"));
  std::string child =
      dir.Write("child.policy", Policy("child", "  limits {\n    memory = 256MiB\n  }\n", "base"));
  auto r = Compile(child);
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  const auto& prov = r.plan->provenance;
  EXPECT_EQ(prov.at("limits.memory_bytes"), child + ":3:5");
  EXPECT_EQ(prov.at("limits.pids"), base + ":8:5");
  EXPECT_EQ(prov.at("trust"), base + ":2:3");
  EXPECT_EQ(prov.at("mounts[2]"), base + ":15:3");
  ASSERT_EQ(r.plan->sources.size(), 2u);
  EXPECT_EQ(r.plan->sources[0].path, child);
  EXPECT_EQ(r.plan->sources[1].path, base);
  EXPECT_EQ(r.plan->source_digest,
            Sha256Hex(r.plan->sources[0].sha256 + r.plan->sources[1].sha256));
  EXPECT_EQ(r.plan->policy_name, "child");
}

TEST(CompilerTest, ANarrowerRootfsTightens) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  auto r = Compile(
      dir.Write("child.policy",
                Policy("child", "  rootfs host_readonly [\"/usr/lib\", \"/lib\"]\n", "base")));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_EQ(r.plan->mounts[0].target, "/usr/lib");
  r = Compile(dir.Write("child2.policy",
                        Policy("child2", "  rootfs host_readonly [\"/usr\", \"/opt\"]\n", "base")));
  EXPECT_THAT(CodesOnly(r), ElementsAre("E048"));
}

TEST(CompilerTest, AChildMayTighten) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  auto r = Compile(dir.Write("child.policy", Policy("child", R"(  isolation = microvm
  limits {
    memory = 128MiB
    wall_time = 5s
  }
  unmount "/tmp"
  mount output at "/out" { size = 1MiB }
  network {
  }
  syscalls {
    default = deny
    kill [ptrace]
  }
  validate stderr { max = 1KiB }
  env {
    set EXTRA = "x"
    unset LANG
  }
)",
                                                    "base")));
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_TRUE(r.diagnostics.empty()) << RenderAll(r);
  const plan::Plan& p = *r.plan;
  EXPECT_EQ(p.backend, plan::Backend::kMicrovm);
  EXPECT_EQ(p.limits.memory_bytes, 128ULL << 20);
  EXPECT_EQ(p.mounts.size(), 4u);
  EXPECT_EQ(p.mounts.back().size_bytes, 1ULL << 20);
  EXPECT_TRUE(p.network.egress.empty());
  EXPECT_EQ(p.seccomp.default_action, plan::SyscallAction::kErrno);
  EXPECT_EQ(p.validators.size(), 2u);
  EXPECT_EQ(p.env.count("LANG"), 0u);
  EXPECT_TRUE(p.overrides.empty());
}

struct Loosening {
  const char* extra;
  const char* code;
};

TEST(CompilerTest, EachLooseningIsAnError) {
  const Loosening cases[] = {
      {"  limits {\n    memory = 1GiB\n  }\n", "E045"},
      {"  outputs {\n    max_files = 17\n    max_total = 16MiB\n  }\n", "E045"},
      {"  mount output at \"/out\" { size = 32MiB }\n", "E045"},
      {"  trust = trusted\n", "E046"},
      {"  mount tmpfs at \"/x\" { size = 1MiB }\n", "E048"},
      {"  mount tmpfs at \"/out\" { size = 1MiB }\n", "E048"},
      {"  rootfs host_readonly [\"/usr\", \"/lib\", \"/opt\"]\n", "E048"},
      {"  network {\n    egress \"example.com:443\"\n  }\n", "E049"},
      {"  syscalls {\n    allow [bpf]\n  }\n", "E050"},
      {"  syscalls {\n    log [ptrace]\n  }\n", "E050"},
      {"  process {\n    group = 0\n  }\n", "E051"},
      {"  session {}\n", "E096"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    dir.Write("base.policy", Policy("base"));
    auto r = Compile(dir.Write("child.policy", Policy("child", c.extra, "base")));
    EXPECT_FALSE(r.ok()) << c.extra;
    EXPECT_THAT(CodesOnly(r), ElementsAre(c.code)) << c.extra << RenderAll(r);
  }
  // A weaker backend: microvm parent, gvisor child.
  TempDir dir;
  std::string base = Policy("base");
  base.replace(base.find("isolation = gvisor"), 18, "isolation = microvm");
  dir.Write("base.policy", base);
  auto r = Compile(dir.Write("child.policy", Policy("child", "  isolation = gvisor\n", "base")));
  EXPECT_THAT(CodesOnly(r), ElementsAre("E047")) << RenderAll(r);
}

// `session { ... }`: allowed with its bounds (defaults for what is not written), inherited key by
// key, explained; bad bounds are errors with their place; a longer session than the extended
// policy's loosens (E096), a shorter one tightens.
TEST(CompilerTest, SessionsAreAllowedOnlyByASessionBlock) {
  TempDir dir;
  auto none = Compile(dir.Write("none.policy", Policy("none")));
  ASSERT_TRUE(none.ok()) << RenderAll(none);
  EXPECT_FALSE(none.plan->session.allowed);
  EXPECT_EQ(plan::ToCanonicalJson(*none.plan).find("\"session\""), std::string::npos)
      << "plans without sessions keep their digests";
  EXPECT_THAT(Explain(*none.plan), HasSubstr("not allowed: every request starts from a fresh"));

  auto defaults = Compile(dir.Write("d.policy", Policy("d", "  session {}\n")));
  ASSERT_TRUE(defaults.ok()) << RenderAll(defaults);
  EXPECT_TRUE(defaults.plan->session.allowed);
  EXPECT_EQ(defaults.plan->session.max_execs, 100u);
  EXPECT_EQ(defaults.plan->session.idle_timeout_ns, 300'000'000'000ull);
  EXPECT_EQ(defaults.plan->session.max_lifetime_ns, 3600'000'000'000ull);

  dir.Write("base.policy",
            Policy("base", "  session {\n    max_execs = 20\n    idle_timeout = 2m\n  }\n"));
  auto child = Compile(
      dir.Write("child.policy", Policy("child", "  session {\n    max_execs = 10\n  }\n", "base")));
  ASSERT_TRUE(child.ok()) << RenderAll(child);
  EXPECT_EQ(child.plan->session.max_execs, 10u);
  EXPECT_EQ(child.plan->session.idle_timeout_ns, 120'000'000'000ull) << "inherited";
  EXPECT_THAT(Explain(*child.plan), HasSubstr("allowed: at most 10 commands"));
  auto longer = Compile(dir.Write(
      "longer.policy", Policy("longer", "  session {\n    idle_timeout = 10m\n  }\n", "base")));
  EXPECT_THAT(CodesOnly(longer), ElementsAre("E096")) << RenderAll(longer);

  auto bad = Compile(dir.Write(
      "bad.policy", Policy("bad", "  session {\n    max_execs = 0\n    execs = 3\n  }\n")));
  EXPECT_THAT(CodesOnly(bad), ElementsAre("E023", "E020")) << RenderAll(bad);
  EXPECT_THAT(RenderAll(bad), HasSubstr("expected one of: max_execs, idle_timeout, max_lifetime"));
  auto inverted = Compile(dir.Write(
      "inverted.policy",
      Policy("inverted", "  session {\n    idle_timeout = 2h\n    max_lifetime = 1h\n  }\n")));
  EXPECT_THAT(CodesOnly(inverted), ElementsAre("E095")) << RenderAll(inverted);
}

// `container { images = [...] }`: sorted into the plan, absent from plans without it, explained;
// an extending policy may narrow the list but not add an image its base did not allow (E098);
// a malformed name is E097, an empty list E023.
TEST(CompilerTest, ContainerImagesAreAnAllowlistThatOnlyNarrows) {
  TempDir dir;
  auto none = Compile(dir.Write("none.policy", Policy("none")));
  ASSERT_TRUE(none.ok()) << RenderAll(none);
  EXPECT_EQ(plan::ToCanonicalJson(*none.plan).find("\"container\""), std::string::npos);
  EXPECT_THAT(Explain(*none.plan), HasSubstr("Container images (safex-oci"));

  auto base = Compile(dir.Write("base.policy", Policy("base", R"(  container {
    images = ["registry.example.com/agents/*", "docker.io/library/python:3.12"]
  }
)")));
  ASSERT_TRUE(base.ok()) << RenderAll(base);
  EXPECT_EQ(
      base.plan->container.images,
      (std::vector<std::string>{"docker.io/library/python:3.12", "registry.example.com/agents/*"}));
  EXPECT_THAT(Explain(*base.plan), HasSubstr("any image named registry.example.com/agents/*"));
  auto narrower = Compile(
      dir.Write("narrow.policy",
                Policy("narrow", "  container { images = [\"registry.example.com/agents/a:1\"] }\n",
                       "base")));
  EXPECT_TRUE(narrower.ok()) << RenderAll(narrower);
  auto wider = Compile(
      dir.Write("wide.policy",
                Policy("wide", "  container { images = [\"docker.io/library/*\"] }\n", "base")));
  EXPECT_THAT(CodesOnly(wider), ElementsAre("E098")) << RenderAll(wider);
  auto bad =
      Compile(dir.Write("bad.policy", Policy("bad", "  container { images = [\"a*b\"] }\n")));
  EXPECT_THAT(CodesOnly(bad), ElementsAre("E097")) << RenderAll(bad);
  auto empty = Compile(dir.Write("empty.policy", Policy("empty", "  container { images = [] }\n")));
  EXPECT_THAT(CodesOnly(empty), ElementsAre("E023")) << RenderAll(empty);
}

TEST(CompilerTest, OverridesAreRecordedAndWarned) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  std::string child = dir.Write("child.policy", Policy("child", R"(  limits {
    @override("SEC-123: pandas needs it") memory = 1GiB
  }
  @override("SEC-124: mirror") network {
    egress "pypi.org:443"
    egress "files.pythonhosted.org:443"
  }
  @override("SEC-125: not needed") process { cwd = "/tmp" }
)",
                                                       "base"));
  auto r = Compile(child);
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_THAT(Codes(r), ElementsAre("E053 3:43", "E053 7:5", "E054 9:36"));
  ASSERT_EQ(r.plan->overrides.size(), 2u);
  EXPECT_EQ(r.plan->overrides[0].field, "limits.memory_bytes");
  EXPECT_EQ(r.plan->overrides[0].reason, "SEC-123: pandas needs it");
  EXPECT_EQ(r.plan->overrides[0].location, child + ":3:43");
  EXPECT_EQ(r.plan->overrides[1].field, "network.egress[1]");
  EXPECT_TRUE(plan::Verify(*r.plan, plan::DefaultCeilings()).empty());
  EXPECT_THAT(Explain(*r.plan), HasSubstr("SEC-123: pandas needs it"));
}

TEST(CompilerTest, AnOverrideCannotBypassThePlanInvariants) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  auto r = Compile(dir.Write("child.policy", Policy("child", R"(  @override("SEC-9") network {
    egress "169.254.169.254:80"
  }
)",
                                                    "base")));
  EXPECT_THAT(CodesOnly(r), ElementsAre("E053", "E073"));
  EXPECT_FALSE(r.ok());
}

TEST(CompilerTest, ExtendsCycleNamesTheWholeChain) {
  TempDir dir;
  dir.Write("a.policy", Policy("a", "", "b"));
  dir.Write("b.policy", Policy("b", "", "c"));
  std::string c = dir.Write("c.policy", Policy("c", "", "a"));
  auto r = Compile(dir.path() + "/a.policy");
  ASSERT_THAT(CodesOnly(r), ElementsAre("E042"));
  EXPECT_EQ(r.diagnostics[0].message, "`extends` cycle: a -> b -> c -> a");
  EXPECT_EQ(r.diagnostics[0].path, c);
}

TEST(CompilerTest, ExtendsDepthIsBounded) {
  TempDir dir;
  dir.Write("p0.policy", Policy("p0"));
  for (int i = 1; i <= 4; ++i) {
    dir.Write("p" + std::to_string(i) + ".policy",
              Policy("p" + std::to_string(i), "", "p" + std::to_string(i - 1)));
  }
  CompileOptions opt;
  opt.max_extends_depth = 3;
  EXPECT_THAT(CodesOnly(Compile(dir.path() + "/p4.policy", opt)), ElementsAre("E043"));
  opt.max_extends_depth = 4;
  EXPECT_TRUE(Compile(dir.path() + "/p4.policy", opt).ok());
}

TEST(CompilerTest, ExtendsUsesTheSearchPath) {
  TempDir dir;
  TempDir lib;
  lib.Write("base.policy", Policy("base"));
  std::string child = dir.Write("child.policy", Policy("child", "", "base"));
  auto r = Compile(child);
  ASSERT_THAT(CodesOnly(r), ElementsAre("E040"));
  EXPECT_THAT(r.diagnostics[0].help, HasSubstr(dir.path()));
  CompileOptions opt;
  opt.search_path = {dir.path() + "/nothing-here", lib.path()};
  r = Compile(child, opt);
  ASSERT_TRUE(r.ok()) << RenderAll(r);
  EXPECT_EQ(r.plan->sources[1].path, lib.path() + "/base.policy");
}

TEST(CompilerTest, ErrorsInAnAncestorAreReportedThere) {
  TempDir dir;
  std::string base = dir.Write("base.policy", "policy \"base\" {\n  trust = maybe\n}\n");
  std::string child = dir.Write("child.policy", Policy("child", "", "base"));
  auto r = Compile(child);
  ASSERT_FALSE(r.ok());
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_EQ(r.diagnostics[0].path, base);
  EXPECT_EQ(r.diagnostics[0].code, "E026");
  EXPECT_EQ(r.sources.count(base), 1u);
  // A parse error in an ancestor also points at the `extends` that brought it in.
  dir.Write("base.policy", "policy \"base\" {\n  memory = 5MB\n}\n");
  r = Compile(child);
  ASSERT_GE(r.diagnostics.size(), 2u);
  EXPECT_EQ(r.diagnostics.back().code, "E044");
  EXPECT_EQ(r.diagnostics.back().path, child);
}

TEST(CompilerTest, AllErrorsOfAPhaseAreReportedAndLaterPhasesWait) {
  TempDir dir;
  std::string text = Policy("p", R"(  microvm {
    vcpu = 2
  }
  gvisor {
    platform = kvm
  }
  process {
    user = 64MiB
  }
  mount bind "/etc" at "/etc"
)");
  // The bind of /etc (E067) would be a plan error: it is not reported while type errors exist.
  auto r = Compile(dir.Write("p.policy", text));
  std::vector<std::string> codes = CodesOnly(r);
  EXPECT_GE(codes.size(), 3u) << RenderAll(r);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), "E067"), 0);
  EXPECT_THAT(RenderAll(r), HasSubstr("did you mean `vcpus`?"));
}

TEST(CompilerTest, PlanInvariantsPointAtTheSource) {
  TempDir dir;
  std::string text = Policy("p", R"(  mount bind "/etc" at "/host-etc"
  validate file "/tmp/x" { max = 1KiB }
)");
  auto line_of = [&](const std::string& needle) {
    auto pos = text.find(needle);
    return std::to_string(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n') +
                          1);
  };
  auto r = Compile(dir.Write("p.policy", text));
  EXPECT_THAT(Codes(r), ElementsAre("E067 " + line_of("mount bind") + ":3",
                                    "E071 " + line_of("validate file") + ":3"));
}

TEST(CompilerTest, CompilationIsDeterministicAndRoundTrips) {
  TempDir dir;
  dir.Write("base.policy", Policy("base"));
  std::string child =
      dir.Write("child.policy", Policy("child", "  limits {\n    pids = 8\n  }\n", "base"));
  auto a = Compile(child);
  auto b = Compile(child);
  ASSERT_TRUE(a.ok() && b.ok());
  std::string ja = plan::ToCanonicalJsonWithDigest(*a.plan);
  EXPECT_EQ(ja, plan::ToCanonicalJsonWithDigest(*b.plan));
  auto back = plan::PlanFromJson(ja);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(plan::Verify(*back, plan::DefaultCeilings()).empty());
  EXPECT_EQ(plan::ToCanonicalJsonWithDigest(*back), ja);
}

TEST(CompilerTest, CeilingsAreEnforced) {
  TempDir dir;
  std::string path = dir.Write("p.policy", Policy("p"));
  CompileOptions opt;
  opt.ceilings.max.memory_bytes = 256ULL << 20;
  opt.ceilings.allowed_backends = {plan::Backend::kMicrovm};
  auto r = Compile(path, opt);
  EXPECT_THAT(Codes(r), ElementsAre("E062 3:3", "E064 7:5"));
  EXPECT_THAT(RenderAll(r), HasSubstr("512MiB exceeds this host's ceiling of 256MiB"));
}

TEST(CompilerTest, HostileInputIsBounded) {
  TempDir dir;
  std::string text = "policy \"p\" {\n  syscalls {\n";
  for (int i = 0; i < 3000; ++i) text += "    deny [nosuchcall" + std::to_string(i) + "]\n";
  text += "  }\n}\n";
  auto r = Compile(dir.Write("p.policy", text));
  EXPECT_FALSE(r.ok());
  EXPECT_LE(r.diagnostics.size(), 110u);
  EXPECT_THAT(RenderAll(r), HasSubstr("too many errors"));
}

TEST(CompilerTest, UnreadableFileIsADiagnostic) {
  auto r = Compile("/nonexistent/p.policy");
  EXPECT_THAT(CodesOnly(r), ElementsAre("E090"));
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(RenderAll(r), HasSubstr("/nonexistent/p.policy"));
}

TEST(CompilerTest, ExplainSpeaksPlainly) {
  TempDir dir;
  auto r = Compile(dir.Write("p.policy", Policy("p")));
  ASSERT_TRUE(r.ok());
  std::string e = Explain(*r.plan);
  EXPECT_THAT(e, HasSubstr("untrusted"));
  EXPECT_THAT(e, HasSubstr("gVisor"));
  EXPECT_THAT(e, HasSubstr("memory 512MiB"));
  EXPECT_THAT(e, HasSubstr("wall clock 30s"));
  EXPECT_THAT(e, HasSubstr("pypi.org:443 (tcp)"));
  EXPECT_THAT(e, HasSubstr("bpf, ptrace"));
  EXPECT_THAT(e, HasSubstr("/tmp: empty scratch space (tmpfs), writable, 64MiB max"));
}

}  // namespace
}  // namespace safex::compiler
