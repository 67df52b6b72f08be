// The host config's `service { }` section, the allow rules built from it, and the durable run
// records crash recovery relies on.
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "audit/audit_log.h"
#include "compiler/host_config.h"
#include "supervisor/run_record.h"
#include "supervisor/sweep.h"
#include "supervisor/serve/access.h"
#include "tests/support/temp_dir.h"

namespace safex {
namespace {

compiler::HostConfig ParseOk(const std::string& text) {
  compiler::HostConfig h;
  std::vector<dsl::Diagnostic> diags;
  EXPECT_TRUE(compiler::ParseHostConfig("host.policy", text, &h, &diags))
      << (diags.empty() ? "" : diags[0].message);
  return h;
}

std::vector<dsl::Diagnostic> ParseErrors(const std::string& text) {
  compiler::HostConfig h;
  std::vector<dsl::Diagnostic> diags;
  EXPECT_FALSE(compiler::ParseHostConfig("host.policy", text, &h, &diags)) << text;
  return diags;
}

TEST(ServiceConfigTest, Defaults) {
  compiler::HostConfig h = ParseOk("host { }");
  EXPECT_EQ(h.service.socket, "/run/safex/safex.sock");
  EXPECT_EQ(h.service.socket_mode, 0660u);
  EXPECT_EQ(h.service.max_concurrent, 4u);
  EXPECT_TRUE(h.service.allow.empty());
}

TEST(ServiceConfigTest, EverySetting) {
  compiler::HostConfig h = ParseOk(R"(host {
    service {
      policy_dir = "/srv/policies"
      socket = "/run/x/s.sock"
      socket_group = "adm"
      socket_mode = "0600"
      state_dir = "/run/x"
      audit_db = "/var/lib/x/a.db"
      max_concurrent = 2
      max_queue = 0
      max_connections = 10
      max_request = 1MiB
      max_argv = 8
      max_argv_bytes = 4KiB
      max_stdin = 64KiB
      max_input_files = 3
      max_input_bytes = 128KiB
      request_timeout = 2s
      drain_timeout = 500ms
      allow "python-untrusted" { users = ["root", 1001]  groups = ["adm", 4] }
      allow "*" { groups = ["root"] }
    }
  })");
  const auto& s = h.service;
  EXPECT_EQ(s.policy_dir, "/srv/policies");
  EXPECT_EQ(s.socket_group, "adm");
  EXPECT_EQ(s.socket_mode, 0600u);
  EXPECT_EQ(s.max_queue, 0u);
  EXPECT_EQ(s.max_request_bytes, 1u << 20);
  EXPECT_EQ(s.request_timeout_ns, 2'000'000'000u);
  EXPECT_EQ(s.drain_timeout_ns, 500'000'000u);
  ASSERT_EQ(s.allow.size(), 2u);
  EXPECT_EQ(s.allow[0].policy, "python-untrusted");
  ASSERT_EQ(s.allow[0].users.size(), 2u);
  EXPECT_EQ(s.allow[0].users[0].name, "root");
  EXPECT_EQ(*s.allow[0].users[1].id, 1001u);
  EXPECT_EQ(s.allow[1].policy, "*");
}

TEST(ServiceConfigTest, Pools) {
  compiler::HostConfig h = ParseOk(R"(host {
    service {
      pool "python-untrusted" { size = 4  max_idle = 10m }
      pool "base-untrusted" { size = 1 }
      pool_memory = 2GiB
    }
  })");
  const auto& s = h.service;
  ASSERT_EQ(s.pools.size(), 2u);
  EXPECT_EQ(s.pools[0].policy, "python-untrusted");
  EXPECT_EQ(s.pools[0].size, 4u);
  EXPECT_EQ(s.pools[0].max_idle_ns, 600'000'000'000u);
  EXPECT_EQ(s.pools[1].size, 1u);
  EXPECT_EQ(s.pool_memory_bytes, 2ull << 30);
  EXPECT_TRUE(ParseOk("host { }").service.pools.empty());
}

TEST(ServiceConfigTest, Errors) {
  const char* bad[] = {
      R"(host { service { max_concurent = 2 } })",
      R"(host { service { max_concurrent = 0 } })",
      R"(host { service { socket_mode = "0777" } })",
      R"(host { service { socket_mode = "0066" } })",
      R"(host { service { socket = "relative.sock" } })",
      R"(host { service { max_request = 1GiB } })",
      R"(host { service { allow "Bad/Name" { users = ["root"] } } })",
      R"(host { service { allow "p" { } } })",
      R"(host { service { allow "p" { users = ["a:b"] } } })",
      R"(host { service { allow "p" { people = ["a"] } } })",
      R"(host { service { allow { users = ["a"] } } })",
      R"(host { service { drain_timeout = 2h } })",
      R"(host { service { pool "*" { size = 1 } } })",
      R"(host { service { pool "p" { } } })",
      R"(host { service { pool "p" { size = 0 } } })",
      R"(host { service { pool "p" { size = 65 } } })",
      R"(host { service { pool "p" { size = 1  max_idle = 0s } } })",
      R"(host { service { pool "p" { size = 1  sise = 2 } } })",
      R"(host { service { pool "p" { size = 1 } pool "p" { size = 2 } } })",
      R"(host { service { pool_memory = 2TiB } })",
  };
  for (const char* b : bad) EXPECT_FALSE(ParseErrors(b).empty()) << b;
}

TEST(ServiceConfigTest, AuditShipping) {
  compiler::HostConfig off = ParseOk("host { }");
  EXPECT_EQ(off.service.audit_ship_to, "");
  EXPECT_EQ(off.service.audit_ship_interval_ns, 60'000'000'000ull);
  compiler::HostConfig h = ParseOk(R"(host { service {
      audit_ship_to = "host=/run/postgresql dbname=audit user=node1"
      audit_ship_interval = 15s
  } })");
  EXPECT_EQ(h.service.audit_ship_to, "host=/run/postgresql dbname=audit user=node1");
  EXPECT_EQ(h.service.audit_ship_interval_ns, 15'000'000'000ull);
  // A secret in the host config is refused, in either form libpq takes.
  for (const char* bad :
       {"host=db password=s3cret dbname=audit", "postgresql://node1:s3cret@db/audit", ""}) {
    auto errors = ParseErrors(std::string("host { service { audit_ship_to = \"") + bad + "\" } }");
    ASSERT_FALSE(errors.empty()) << bad;
    EXPECT_EQ(errors[0].message.find("s3cret"), std::string::npos);
  }
  ParseOk(R"(host { service { audit_ship_to = "postgresql://node1@db/audit" } })");
  ParseErrors("host { service { audit_ship_interval = 0s } }");
  ParseErrors("host { service { audit_ship_interval = 2d } }");
}

TEST(AccessControlTest, RulesByUidGidAndSupplementaryGroup) {
  std::vector<compiler::AllowRule> rules(2);
  rules[0].policy = "python-untrusted";
  rules[0].users.push_back({"", 1001});
  rules[0].groups.push_back({"", 2000});
  rules[1].policy = "*";
  rules[1].users.push_back({"root", std::nullopt});
  auto ac = serve::AccessControl::Create(rules);
  ASSERT_TRUE(ac.ok()) << ac.status().message();
  serve::Caller alice{1001, 1001, 1, {}};
  serve::Caller bob{1002, 1002, 1, {}};
  serve::Caller carol{1003, 1003, 1, {5, 2000}};
  serve::Caller root{0, 0, 1, {}};
  EXPECT_TRUE(ac->Allowed(alice, "python-untrusted"));
  EXPECT_FALSE(ac->Allowed(alice, "node-untrusted"));
  EXPECT_FALSE(ac->Allowed(bob, "python-untrusted"));
  EXPECT_TRUE(ac->Allowed(carol, "python-untrusted"));
  EXPECT_TRUE(ac->Allowed(root, "anything"));
  EXPECT_FALSE(serve::AccessControl::Create({{"p", {{"no-such-user-xyz", std::nullopt}}, {}}}).ok());
}

TEST(AccessControlTest, NoRulesAllowNobody) {
  auto ac = serve::AccessControl::Create({});
  ASSERT_TRUE(ac.ok());
  EXPECT_FALSE(ac->Allowed({0, 0, 1, {}}, "p"));
}

TEST(RunRecordTest, LiveRecordsAreLockedStaleOnesAreTaken) {
  testing::TempDir dir;
  std::string records = dir.Join("runs");
  supervisor::RunRecordInfo info;
  info.run_id = "0193-live";
  info.pid = getpid();
  info.audit_db = "/x/audit.db";
  info.state_root = "/run/x";
  auto live = supervisor::RunRecord::Create(records, info);
  ASSERT_TRUE(live.ok()) << live.status().message();

  // A record whose owner is gone: the same file, unlocked (Abandon keeps it).
  info.run_id = "0193-dead";
  auto dead = supervisor::RunRecord::Create(records, info);
  ASSERT_TRUE(dead.ok());
  dead->Abandon();

  auto stale = supervisor::TakeStaleRecords(records);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  ASSERT_EQ(stale->size(), 1u);
  EXPECT_EQ((*stale)[0].info.run_id, "0193-dead");
  EXPECT_EQ((*stale)[0].info.audit_db, "/x/audit.db");
  EXPECT_EQ((*stale)[0].info.state_root, "/run/x");
  EXPECT_TRUE(supervisor::RemoveStaleRecord((*stale)[0]).ok());
  EXPECT_NE(access((records + "/0193-dead.run").c_str(), F_OK), 0);

  // The live one goes when its owner is done with it.
  EXPECT_TRUE(live->Remove().ok());
  EXPECT_NE(access((records + "/0193-live.run").c_str(), F_OK), 0);
  stale = supervisor::TakeStaleRecords(records);
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE(stale->empty());
  EXPECT_FALSE(supervisor::RunRecord::Create(records, {"../x"}).ok());
}

// Records are not synced (run_record.h): after a machine crash, a started run may have no
// record. The first sweep of a boot closes every unfinished run that started before the boot and
// has no record; runs of this boot, and runs with a record (the usual path's), are left alone;
// later sweeps of the same boot do not look again.
TEST(SweepTest, RunsOfEarlierBootsWithoutARecordAreClosedOncePerBoot) {
  testing::TempDir dir;
  audit::AuditOptions ao;
  ao.key_path = dir.Join("audit.key");
  auto log = audit::AuditLog::Open(dir.Join("audit.db"), ao);
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto start = [&](const std::string& id, int64_t ns) {
    audit::RunStart st;
    st.run_id = id;
    st.policy_name = "p";
    st.backend = "gvisor";
    st.argv = {"/bin/true"};
    st.start_time_ns = ns;
    ASSERT_TRUE((*log)->RecordStart(st).ok());
  };
  start("before-boot", 1'000'000'000);  // 1970: long before any boot
  start("before-boot-recorded", 2'000'000'000);
  start("this-boot", 0);  // now
  supervisor::SweepOptions so;
  so.records_dir = dir.Join("runs");
  so.audit_db = dir.Join("audit.db");
  std::filesystem::create_directories(so.records_dir);
  std::ofstream(so.records_dir + "/before-boot-recorded.run") << "{}";
  supervisor::SweepReport report;
  ASSERT_TRUE(supervisor::CloseRunsFromEarlierBoots(so, **log, &report).ok());
  EXPECT_EQ(report.interrupted, std::vector<std::string>{"before-boot"});
  auto unfinished = (*log)->UnfinishedRuns();
  ASSERT_TRUE(unfinished.ok());
  EXPECT_EQ(*unfinished, (std::vector<std::string>{"before-boot-recorded", "this-boot"}));
  // Once per boot: the marker holds this boot's id.
  start("before-boot-2", 3'000'000'000);
  supervisor::SweepReport again;
  ASSERT_TRUE(supervisor::CloseRunsFromEarlierBoots(so, **log, &again).ok());
  EXPECT_TRUE(again.interrupted.empty());
  std::ifstream marker(so.records_dir + "/.boot-swept-audit.db");
  std::string id((std::istreambuf_iterator<char>(marker)), std::istreambuf_iterator<char>());
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id((std::istreambuf_iterator<char>(boot)), std::istreambuf_iterator<char>());
  EXPECT_EQ(id, boot_id);
}

// Issue 12: recovery (as root) reads run records back strictly.
TEST(RunRecordTest, ParseIsStrict) {
  const std::string good =
      R"({"run_id":"0193-a","pid":7,"audit_db":"/x/audit.db","state_root":"/run/x",)"
      R"("input_dir":"","start_ns":1})";
  auto r = supervisor::ParseRunRecord(good);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->run_id, "0193-a");
  EXPECT_EQ(r->pid, 7);
  auto dup = supervisor::ParseRunRecord(
      R"({"run_id":"0193-a","pid":7,"audit_db":"/x/audit.db","audit_db":"/y/audit.db"})");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate key"), std::string::npos)
      << dup.status().message();
  auto bom = supervisor::ParseRunRecord("\xEF\xBB\xBF" + good);
  ASSERT_FALSE(bom.ok());
  EXPECT_NE(bom.status().message().find("byte order mark"), std::string::npos)
      << bom.status().message();
}

TEST(RunRecordTest, RecordsDirBesideTheAuditLog) {
  EXPECT_EQ(supervisor::RecordsDirFor("/var/lib/safex/audit.db"), "/var/lib/safex/runs");
  EXPECT_EQ(supervisor::RecordsDirFor(":memory:"), "");
  EXPECT_EQ(supervisor::RecordsDirFor("audit.db"), "./runs");
}

}  // namespace
}  // namespace safex
