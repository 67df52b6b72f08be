#include "tests/fleet/fleet_test_util.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>

#include "fleet/central.h"
#include "fleet/pg.h"
#include "tests/support/test_support.h"

namespace safex::fleet::testing {

safex::testing::PrivateCluster* SharedCluster(std::string* why) {
  static std::string failure;
  static std::unique_ptr<safex::testing::PrivateCluster> cluster = [] {
    auto c = safex::testing::PrivateCluster::Start(&failure);
    // Stopped at exit even when a test fails: no server outlives the test binary.
    std::atexit([] { cluster.reset(); });
    return c;
  }();
  *why = failure;
  return cluster.get();
}

Node MakeNode(const audit::testing::TempDir& dir, const std::string& name) {
  Node n;
  n.db = dir.File(name + ".db");
  n.key = dir.File(name + ".key");
  audit::AuditOptions o;
  o.key_path = n.key;
  o.min_free_bytes = 0;
  auto log = audit::AuditLog::Open(n.db, o);
  EXPECT_TRUE(log.ok()) << log.status().message();
  if (log.ok()) n.log = std::move(log).value();
  return n;
}

void AddRuns(Node* node, int runs, const std::string& prefix) {
  for (int i = 0; i < runs; ++i) {
    const std::string id = prefix + "-" + std::to_string(i);
    ASSERT_TRUE(node->log->RecordStart(audit::testing::SampleStart(id)).ok());
    ASSERT_TRUE(node->log->RecordEnd(audit::testing::SampleEnd(id)).ok());
  }
}

std::string AsOwnerBypassingTriggers(const std::string& url, const std::string& sql) {
  auto db = internal::PgConn::Connect(url);
  if (!db.ok()) return db.status().message();
  Status st = (*db)->Run(
      "BEGIN; ALTER TABLE safex.events DISABLE TRIGGER USER; "
      "ALTER TABLE safex.checkpoints DISABLE TRIGGER USER; " +
      sql +
      "; ALTER TABLE safex.events ENABLE TRIGGER USER; "
      "ALTER TABLE safex.checkpoints ENABLE TRIGGER USER; COMMIT");
  return st.ok() ? "" : st.message();
}

std::string HexDecode(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string Query(const std::string& url, const std::string& sql) {
  auto db = internal::PgConn::Connect(url);
  if (!db.ok()) return "";
  auto r = (*db)->Exec(sql);
  if (!r.ok() || r->rows() == 0 || r->IsNull(0, 0)) return "";
  return r->Text(0, 0);
}

void CentralTest::SetUp() {
  std::string why;
  cluster_ = SharedCluster(&why);
  SAFEX_REQUIRE(cluster_ != nullptr, why);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
  name = name.substr(0, 60);  // PostgreSQL's identifiers: at most 63 bytes
  db_ = name;
  url_ = cluster_->NewDatabase(name);
  ASSERT_FALSE(url_.empty()) << "cannot make database " << name;
  auto init = InitCentral(url_);
  ASSERT_TRUE(init.ok()) << init.status().message();
}

}  // namespace safex::fleet::testing
