// The central schema: made once, enrolments pinned and never changed, roles that can do only
// their part, append-only for everyone, the auditor views across hosts, and clear errors for a
// wrong or unreachable database.
#include "fleet/central.h"

#include <gtest/gtest.h>

#include "audit/canonical.h"
#include "fleet/pg.h"
#include "tests/fleet/fleet_test_util.h"

namespace safex::fleet::testing {
namespace {

using Code = Status::Code;

TEST_F(CentralTest, InitIsOnceAndThenLeavesTheSchemaAlone) {
  auto again = InitCentral(url_);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->schema_version, 1);
  EXPECT_EQ(Query(url_, "SELECT value FROM safex.meta WHERE key = 'schema_version'"), "1");
}

TEST_F(CentralTest, BadAddressesAreClearErrors) {
  auto unparsable = InitCentral("host=/tmp port");
  EXPECT_EQ(unparsable.status().code(), Code::kInvalidArgument) << unparsable.status().message();
  auto nobody_there = InitCentral("host=/nonexistent-dir port=1 dbname=x connect_timeout=2");
  EXPECT_EQ(nobody_there.status().code(), Code::kUnavailable) << nobody_there.status().message();
  EXPECT_NE(nobody_there.status().message().find("cannot connect"), std::string::npos);
  auto no_db = InitCentral(cluster_->Url("no_such_database"));
  EXPECT_FALSE(no_db.ok());
  EXPECT_NE(no_db.status().message().find("no_such_database"), std::string::npos);
  // Never the address itself: it may hold a password.
  auto with_password = InitCentral("postgresql://u:s3cr3t@/db?host=/nonexistent-dir&port=1");
  EXPECT_EQ(with_password.status().message().find("s3cr3t"), std::string::npos);
}

TEST_F(CentralTest, ALogIsEnrolledOnceAndAHostNameOnce) {
  Node a = MakeNode(dir_, "a");
  auto e = EnrolmentOf(*a.log, a.key, "host-a");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->log_id, a.log->log_id());
  EXPECT_EQ(e->public_key.size(), 64u);
  ASSERT_TRUE(Enrol(url_, *e).ok());

  Status twice = Enrol(url_, *e);
  EXPECT_EQ(twice.code(), Code::kFailedPrecondition);
  EXPECT_NE(twice.message().find("already enrolled, as host host-a"), std::string::npos);

  Node b = MakeNode(dir_, "b");
  auto taken = EnrolmentOf(*b.log, b.key, "host-a");
  ASSERT_TRUE(taken.ok());
  Status name_taken = Enrol(url_, *taken);
  EXPECT_EQ(name_taken.code(), Code::kFailedPrecondition);
  EXPECT_NE(name_taken.message().find("host host-a is already enrolled"), std::string::npos);

  Enrolment bad = *taken;
  bad.host = "-x; DROP TABLE";
  EXPECT_EQ(Enrol(url_, bad).code(), Code::kInvalidArgument);
  bad = *taken;
  bad.host = "host-b";
  bad.shipper = "no_such_role";
  EXPECT_EQ(Enrol(url_, bad).code(), Code::kNotFound);
  EXPECT_EQ(Query(url_, "SELECT count(*) FROM safex.logs"), "1");
}

TEST_F(CentralTest, EachRoleCanDoItsPartOnly) {
  ASSERT_EQ(cluster_->Sql("CREATE ROLE rights_ship LOGIN IN ROLE safex_shipper; "
                          "CREATE ROLE rights_audit LOGIN IN ROLE safex_auditor; "
                          "CREATE ROLE rights_none LOGIN"),
            "");
  Node a = MakeNode(dir_, "a");
  AddRuns(&a, 5, "r");
  ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*a.log, a.key, "a")).ok());
  const std::string& db = db_;

  // Without the shipper's rights: refused before anything is written.
  auto none = Ship(cluster_->Url(db, "rights_none"), *a.log, {});
  EXPECT_EQ(none.status().code(), Code::kPermissionDenied) << none.status().message();
  EXPECT_NE(none.status().message().find("safex_shipper"), std::string::npos);
  EXPECT_EQ(Query(url_, "SELECT count(*) FROM safex.events"), "0");

  auto shipped = Ship(cluster_->Url(db, "rights_ship"), *a.log, {});
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  EXPECT_EQ(shipped->events_shipped, 10u);

  // A shipper cannot read other hosts' events, nor change what it sent, nor say when it arrived,
  // nor send anything but the next events, one by one or in a batch with a hole.
  const std::string ship_url = cluster_->Url(db, "rights_ship");
  auto as_shipper = [&](const std::string& sql) {
    auto c = internal::PgConn::Connect(ship_url);
    return c.ok() ? (*c)->Run(sql) : c.status();
  };
  const std::string row = "('" + a.log->log_id() + "', %SEQ%, '\\x00', 'h')";
  auto rows = [&](std::initializer_list<int> seqs) {
    std::string out;
    for (int q : seqs) {
      std::string r = row;
      r.replace(r.find("%SEQ%"), 5, std::to_string(q));
      out += (out.empty() ? "" : ", ") + r;
    }
    return "INSERT INTO safex.events (log_id, seq, canonical, hash) VALUES " + out;
  };
  EXPECT_EQ(as_shipper(rows({12})).code(), Code::kFailedPrecondition);
  const Status holed = as_shipper(rows({11, 13}));
  EXPECT_NE(holed.message().find("are not the next ones"), std::string::npos) << holed.message();
  EXPECT_EQ(as_shipper("INSERT INTO safex.events (log_id, seq, canonical, hash, shipped_at) "
                       "VALUES ('" +
                       a.log->log_id() + "', 11, '\\x00', 'h', now())")
                .code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Query(ship_url, "SELECT count(*) FROM safex.events"), "");
  EXPECT_NE(cluster_->Sql("UPDATE safex.events SET verdict = 'ok'", db), "");
  // The auditor reads the views and changes nothing; the owner's UPDATE is refused too.
  EXPECT_EQ(Query(cluster_->Url(db, "rights_audit"), "SELECT count(*) FROM safex.runs"), "5");
  auto audit_conn = cluster_->Url(db, "rights_audit");
  EXPECT_TRUE(VerifyCentral(audit_conn, std::nullopt).ok());
  const std::string refused = cluster_->Sql("DELETE FROM safex.events WHERE seq = 1", db);
  EXPECT_NE(refused.find("append-only"), std::string::npos) << refused;
  for (const char* table : {"events", "checkpoints", "logs", "meta"}) {
    EXPECT_NE(
        cluster_->Sql(std::string("TRUNCATE safex.") + table + " CASCADE", db).find("append-only"),
        std::string::npos)
        << table;
  }
  EXPECT_NE(
      cluster_->Sql("UPDATE safex.logs SET public_key = repeat('0', 64)", db).find("append-only"),
      std::string::npos);
  EXPECT_EQ(Query(url_, "SELECT count(*) FROM safex.events"), "10");
}

TEST_F(CentralTest, ALogEnrolledForOneShipperRefusesAnother) {
  ASSERT_EQ(cluster_->Sql("CREATE ROLE pin_ship_a LOGIN IN ROLE safex_shipper; "
                          "CREATE ROLE pin_ship_b LOGIN IN ROLE safex_shipper"),
            "");
  Node a = MakeNode(dir_, "a");
  AddRuns(&a, 2, "r");
  auto e = EnrolmentOf(*a.log, a.key, "a");
  e->shipper = "pin_ship_a";
  ASSERT_TRUE(Enrol(url_, *e).ok());
  const std::string& db = db_;
  auto other = Ship(cluster_->Url(db, "pin_ship_b"), *a.log, {});
  EXPECT_EQ(other.status().code(), Code::kPermissionDenied) << other.status().message();
  EXPECT_NE(other.status().message().find("may not ship"), std::string::npos);
  auto own = Ship(cluster_->Url(db, "pin_ship_a"), *a.log, {});
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(own->events_shipped, 4u);
}

TEST_F(CentralTest, TheViewsShowEveryHostAndExactBytesStayInTheCanonicalEncoding) {
  Node a = MakeNode(dir_, "a");
  Node b = MakeNode(dir_, "b");
  AddRuns(&a, 3, "a");
  AddRuns(&b, 2, "b");
  audit::RunStart odd = audit::testing::SampleStart("odd");
  odd.argv = {"/bin/echo", std::string("caf\xc3\xa9 \xff\xfe", 8)};
  ASSERT_TRUE(b.log->RecordStart(odd).ok());
  audit::Refusal refusal;
  refusal.run_id = "refused-1";
  refusal.reason = "policy refused: bad byte \xff here";
  ASSERT_TRUE(b.log->RecordRefusal(refusal).ok());
  for (Node* n : {&a, &b}) {
    ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*n->log, n->key, n == &a ? "a" : "b")).ok());
    auto r = Ship(url_, *n->log, {});
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  EXPECT_EQ(Query(url_,
                  "SELECT string_agg(host || ':' || n, ',' ORDER BY host) FROM "
                  "(SELECT host, count(*) AS n FROM safex.runs GROUP BY host) AS x"),
            "a:3,b:4");
  EXPECT_EQ(Query(url_, "SELECT state FROM safex.runs WHERE run_id = 'odd'"), "running");
  // The view's text has U+FFFD where PostgreSQL's text cannot hold the byte; the canonical
  // bytes keep every byte the node hashed.
  EXPECT_EQ(Query(url_, "SELECT reason FROM safex.refusals WHERE host = 'b'"),
            "policy refused: bad byte \xef\xbf\xbd here");
  std::vector<audit::EventRow> node_rows;
  ASSERT_TRUE(b.log
                  ->ForEachEvent([&](const audit::EventRow& r) {
                    node_rows.push_back(r);
                    return Status::Ok();
                  })
                  .ok());
  for (const audit::EventRow& node_row : node_rows) {
    const std::string hex =
        Query(url_, "SELECT encode(canonical, 'hex') FROM safex.events WHERE seq = " +
                        std::to_string(node_row.seq()) + " AND log_id = '" + b.log->log_id() + "'");
    auto row = audit::DecodeEvent(HexDecode(hex));
    ASSERT_TRUE(row.ok()) << row.status().message();
    EXPECT_EQ(row->values, node_row.values) << "event " << node_row.seq();
  }
  auto rep = VerifyCentral(url_, std::nullopt);
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->size(), 2u);
  EXPECT_TRUE((*rep)[0].ok && (*rep)[1].ok) << (*rep)[1].problem;
}

}  // namespace
}  // namespace safex::fleet::testing
