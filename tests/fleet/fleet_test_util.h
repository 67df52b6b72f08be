// Shared by the fleet tests: a private cluster per test binary, node logs with runs, and SQL as
// the database owner with the append-only triggers off (the tamperer's rights).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"
#include "tests/fleet/pg_cluster.h"

namespace safex::fleet::testing {

// The cluster every test of the binary uses (started once; stopped at exit). nullptr when
// PostgreSQL is missing: *why says so.
safex::testing::PrivateCluster* SharedCluster(std::string* why);

// A node: its own log and key in `dir`, under `name`.
struct Node {
  std::string db;
  std::string key;
  std::unique_ptr<audit::AuditLog> log;
};
Node MakeNode(const audit::testing::TempDir& dir, const std::string& name);
// Appends `runs` finished runs (start + end), ids PREFIX-0.., through the real writer.
void AddRuns(Node* node, int runs, const std::string& prefix);

// `sql` on `url`'s database as its owner, with every user trigger of safex.events and
// safex.checkpoints disabled for it (and enabled again after). "" on success.
std::string AsOwnerBypassingTriggers(const std::string& url, const std::string& sql);
// Bytes from lowercase hex.
std::string HexDecode(const std::string& hex);
// One value a query returns, as text ("" on error or no row).
std::string Query(const std::string& url, const std::string& sql);

// A test with its own database (named after the test) in the shared cluster, with the central
// schema made.
class CentralTest : public ::testing::Test {
 protected:
  void SetUp() override;
  safex::testing::PrivateCluster* cluster_ = nullptr;
  std::string db_;   // the test's database
  std::string url_;  // ... as the superuser
  audit::testing::TempDir dir_;
};

}  // namespace safex::fleet::testing
