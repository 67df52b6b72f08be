// Fail closed: a host that cannot make namespaces refuses every native run, with the reason, and
// never runs the program with less (through the built `safex run`, a fresh process, as an operator
// would meet it). The host is simulated: `without_namespaces` runs safex under a seccomp filter
// that refuses namespace creation (this machine's own sysctls cannot be changed from here).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/leak_check.h"
#include "tests/support/run_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_host_config.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using ::testing::HasSubstr;

class NativeFailClosedTest : public testing::LeakCheckedTest {};

TEST_F(NativeFailClosedTest, NoNamespacesMeansEveryNativeRunIsRefused) {
  SAFEX_REQUIRE_ROOT();
  testing::TempDir dir;
  const std::string policy = dir.Write("tool.policy", R"(policy "tool" {
  trust = trusted
  isolation = native
  limits {
    wall_time = 10s
    cpu_time = 5s
    memory = 128MiB
    pids = 16
    open_files = 64
    output = 64KiB
    disk = 16MiB
    cpus = 1
  }
  rootfs host_readonly ["/usr", "/lib", "/lib64", "/bin"]
  env { set PATH = "/usr/bin:/bin" }
}
)");
  const std::string host =
      dir.Write("host.policy", std::string("host {\n") + testing::kTestBackends + "}\n");
  const std::vector<std::string> args = {"run",
                                         "--json",
                                         "--policy",
                                         policy,
                                         "--host-config",
                                         host,
                                         "--audit-db",
                                         dir.Join("audit.db"),
                                         "--audit-key",
                                         dir.Join("audit.key"),
                                         "--",
                                         "/bin/sh",
                                         "-c",
                                         "echo ran"};
  std::vector<std::string> without = {SAFEX_WITHOUT_NAMESPACES, testing::SafexBinary()};
  without.insert(without.end(), args.begin(), args.end());
  const testing::ProcessOutput refused = testing::RunProcess(without);
  EXPECT_EQ(refused.status, 125) << refused.out << refused.err;
  const nlohmann::json j = nlohmann::json::parse(refused.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << refused.out;
  EXPECT_EQ(j["verdict"], "refused") << refused.out;
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("namespaces")) << refused.out;
  EXPECT_EQ(refused.out.find("ran\\n"), std::string::npos);
  // The same run once the host can make them again: the setting was all that was missing.
  testing::ProcessOutput ok = testing::RunSafex(args);
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace safex
