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
