#include "compiler/host_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/compiler/compiler_test_util.h"

namespace safex::compiler {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::vector<std::string> Parse(const std::string& text, HostConfig* h) {
  std::vector<dsl::Diagnostic> diags;
  ParseHostConfig("host.policy", text, h, &diags);
  std::vector<std::string> out;
  for (const auto& d : diags) {
    out.push_back(d.code + " " + std::to_string(d.span.begin.line) + ":" +
                  std::to_string(d.span.begin.column));
  }
  return out;
}

TEST(HostConfigTest, FullConfig) {
  HostConfig h;
  auto d = Parse(R"(host {
  ceilings {
    wall_time = 1h
    cpu_time = 30m
    memory = 4GiB
    pids = 512
    open_files = 4096
    output = 64MiB
    disk = 2GiB
    cpus = 4
  }
  backends = [gvisor, native]
  allow_egress_ranges = ["10.20.0.0/16", "fd12::/16"]
  forbid_mounts = ["/srv/secrets"]
}
)",
                 &h);
  ASSERT_TRUE(d.empty()) << d[0];
  const auto& c = h.ceilings;
  EXPECT_EQ(c.max.wall_time_ns, 3600'000'000'000ULL);
  EXPECT_EQ(c.max.cpu_time_ns, 1800'000'000'000ULL);
  EXPECT_EQ(c.max.memory_bytes, 4ULL << 30);
  EXPECT_EQ(c.max.pids, 512u);
  EXPECT_EQ(c.max.cpus, 4u);
  EXPECT_EQ(c.allowed_backends,
            (std::set<plan::Backend>{plan::Backend::kGvisor, plan::Backend::kNative}));
  EXPECT_EQ(c.allowed_egress_ranges, (std::vector<std::string>{"10.20.0.0/16", "fd12::/16"}));
  EXPECT_EQ(c.forbidden_mount_sources, (std::vector<std::string>{"/srv/secrets"}));
}

TEST(HostConfigTest, AbsentCeilingsKeepTheirDefaults) {
  HostConfig h;
  ASSERT_TRUE(Parse("host {\n  ceilings {\n    memory = 1GiB\n  }\n}\n", &h).empty());
  EXPECT_EQ(h.ceilings.max.memory_bytes, 1ULL << 30);
  EXPECT_EQ(h.ceilings.max.pids, plan::DefaultCeilings().max.pids);
  EXPECT_EQ(h.ceilings.allowed_backends, plan::DefaultCeilings().allowed_backends);
}

TEST(HostConfigTest, ErrorsAreAllReported) {
  HostConfig h;
  auto d = Parse(R"(host {
  ceilings {
    memroy = 1GiB
    wall_time = 1GiB
  }
  backends = [gvisor, docker]
  allow_egress_ranges = ["10.0.0.1/8", "127.0.0.0/8"]
  forbid_mounts = ["srv"]
  servise {
    max_runs = 4
  }
}
)",
                 &h);
  EXPECT_EQ(d, (std::vector<std::string>{"E020 3:5", "E022 4:17", "E026 6:23", "E091 7:26",
                                         "E091 7:40", "E092 8:20", "E020 9:3"}));
}

TEST(HostConfigTest, BackendBlocksCarryEachBackendsSettings) {
  HostConfig h;
  auto d = Parse(R"(host {
  backends {
    gvisor { runsc = "/opt/gvisor/runsc"  platforms = [ptrace] }
    microvm {
      qemu = "/opt/qemu/bin/qemu-system-x86_64"
      kernel = "/opt/guest/vmlinuz"
      initramfs = "/opt/guest/initramfs.cpio"
      state_root = "/srv/safex/microvm"
      kvm = require
      tcg_for_untrusted = true
    }
  }
  cgroups { parent = "system/safex"  memory = 16GiB  pids = 8192  cpus = 2 }
}
)",
                 &h);
  ASSERT_TRUE(d.empty()) << d[0];
  EXPECT_EQ(h.ceilings.allowed_backends,
            (std::set<plan::Backend>{plan::Backend::kGvisor, plan::Backend::kMicrovm}));
  EXPECT_EQ(h.backends.gvisor.runsc, "/opt/gvisor/runsc");
  EXPECT_EQ(h.backends.gvisor.platforms, std::set<std::string>{"ptrace"});
  const plan::MicrovmBackendSettings& m = h.backends.microvm;
  EXPECT_EQ(m.qemu, "/opt/qemu/bin/qemu-system-x86_64");
  EXPECT_EQ(m.kernel, "/opt/guest/vmlinuz");
  EXPECT_EQ(m.initramfs, "/opt/guest/initramfs.cpio");
  EXPECT_EQ(m.state_root, "/srv/safex/microvm");
  EXPECT_EQ(m.kvm, plan::KvmMode::kRequire);
  EXPECT_TRUE(m.tcg_for_untrusted);
  EXPECT_EQ(h.cgroups.parent, "system/safex");
  EXPECT_EQ(h.cgroups.memory_bytes, 16ULL << 30);
  EXPECT_EQ(h.cgroups.pids, 8192u);
  EXPECT_EQ(h.cgroups.cpus, 2u);
}

TEST(HostConfigTest, TheDefaultsOfferBothGvisorPlatformsAndNoTcgForUntrustedCode) {
  HostConfig h;
  ASSERT_TRUE(Parse("host {\n  backends {\n    gvisor { }\n    microvm { }\n  }\n}\n", &h).empty());
  EXPECT_EQ(h.backends.gvisor.platforms, (std::set<std::string>{"systrap", "ptrace"}));
  EXPECT_EQ(h.backends.microvm.kvm, plan::KvmMode::kAuto);
  EXPECT_FALSE(h.backends.microvm.tcg_for_untrusted);
  EXPECT_EQ(h.cgroups.parent, "safex");
  EXPECT_EQ(h.cgroups.memory_bytes, 0u);
}

TEST(HostConfigTest, TheNativeBlockNamesItsIdRangeAndLandlock) {
  HostConfig h;
  ASSERT_TRUE(Parse("host {\n  backends {\n    native { }\n  }\n}\n", &h).empty());
  EXPECT_EQ(h.ceilings.allowed_backends, std::set<plan::Backend>{plan::Backend::kNative});
  EXPECT_EQ(h.backends.native.first_id, 0x70000000u);
  EXPECT_EQ(h.backends.native.ids, 65536u);
  EXPECT_FALSE(h.backends.native.require_landlock);
  HostConfig set;
  auto d = Parse(R"(host {
  backends {
    native { first_id = 3000000000  ids = 0  landlock = always }
    gvisor { }
  }
}
)",
                 &set);
  EXPECT_EQ(d.size(), 3u);  // first_id above 2^31, ids 0, an unknown landlock mode
  HostConfig ok;
  ASSERT_TRUE(Parse("host {\n  backends {\n    native { first_id = 2000000  ids = 1024  "
                    "landlock = require }\n  }\n}\n",
                    &ok)
                  .empty());
  EXPECT_EQ(ok.backends.native.first_id, 2000000u);
  EXPECT_EQ(ok.backends.native.ids, 1024u);
  EXPECT_TRUE(ok.backends.native.require_landlock);
  // The range may not reach past 2^31 - 1.
  HostConfig over;
  auto o = Parse(
      "host {\n  backends {\n    native { first_id = 2147418112  ids = 131072 }\n  "
      "}\n}\n",
      &over);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_THAT(o[0], ::testing::StartsWith("E094"));
}

TEST(HostConfigTest, BadBackendAndCgroupSettingsAreErrors) {
  HostConfig h;
  auto d = Parse(R"(host {
  backends {
    gvisor { runsc = "runsc"  platforms = [kvm] }
    microvm { kvm = sometimes  qemu_path = "/usr/bin/qemu" }
    docker { }
    gvisor { }
  }
  cgroups { parent = "/safex"  pids = 0 }
}
)",
                 &h);
  EXPECT_EQ(d, (std::vector<std::string>{"E092 3:22", "E026 3:44", "E026 4:21", "E020 4:32",
                                         "E020 5:5", "E025 6:5", "E092 8:22", "E023 8:39"}));
  std::vector<dsl::Diagnostic> diags;
  HostConfig empty;
  ParseHostConfig("host.policy", "host {\n  backends { }\n}\n", &empty, &diags);
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].code, "E023");
}

TEST(HostConfigTest, LoadHostConfig) {
  auto absent = LoadHostConfig("/nonexistent/host.policy");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->max.memory_bytes, plan::DefaultCeilings().max.memory_bytes);
  TempDir dir;
  auto ok = LoadHostConfig(dir.Write("host.policy", "host {\n  backends = [microvm]\n}\n"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->allowed_backends, std::set<plan::Backend>{plan::Backend::kMicrovm});
  auto bad = LoadHostConfig(dir.Write("bad.policy", "host {\n  backend = [microvm]\n}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("did you mean `backends`?"));
  auto policy = LoadHostConfig(dir.Write("p.policy", "policy \"p\" {\n}\n"));
  EXPECT_FALSE(policy.ok());
}

}  // namespace
}  // namespace safex::compiler
