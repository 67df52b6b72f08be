// Every tamper shape, applied with the rights of the central database's owner (the append-only
// triggers switched off) or on a node before or after it shipped, is found by VerifyCentral,
// which names the host and the first bad sequence number.
//
// The node: 25 runs (events 1..50), checkpoint 1 (at 50), 10 more runs (51..70), checkpoint 2
// (at 70); all shipped. Odd events are starts, even ones ends.
#include <gtest/gtest.h>

#include <map>

#include "audit/canonical.h"
#include "fleet/central.h"
#include "tests/fleet/fleet_test_util.h"

namespace safex::fleet::testing {
namespace {

class TamperCentralTest : public CentralTest {
 protected:
  void SetUp() override {
    CentralTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    node_ = MakeNode(dir_, "victim");
    AddRuns(&node_, 25, "a");
    ASSERT_TRUE(node_.log->MakeCheckpoint().ok());
    AddRuns(&node_, 10, "b");
    ASSERT_TRUE(node_.log->MakeCheckpoint().ok());
    ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*node_.log, node_.key, "victim")).ok());
    log_id_ = node_.log->log_id();
  }

  void ShipAll() {
    auto r = Ship(url_, *node_.log, {});
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->central_seq_after, r->local_head_seq);
  }

  // The single report, which must be a break at `seq` whose problem mentions `what`.
  void ExpectBreak(int64_t seq, const std::string& what) {
    auto rep = VerifyCentral(url_, std::nullopt);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    ASSERT_EQ(rep->size(), 1u);
    const CentralLogReport& r = (*rep)[0];
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.host, "victim");
    if (seq > 0) {
      EXPECT_EQ(r.first_bad_seq, seq) << r.problem;
    }
    EXPECT_NE(r.problem.find(what), std::string::npos) << r.problem;
  }

  std::string Where(int64_t seq) const {
    return " WHERE log_id = '" + log_id_ + "' AND seq = " + std::to_string(seq);
  }

  // The central's stored events seq..end: canonical bytes and hash.
  std::map<int64_t, std::pair<std::string, std::string>> CentralEvents(int64_t from) {
    std::map<int64_t, std::pair<std::string, std::string>> out;
    const int64_t head = std::stoll(Query(url_, "SELECT max(seq) FROM safex.events"));
    for (int64_t k = from; k <= head; ++k) {
      out[k] = {
          HexDecode(Query(url_, "SELECT encode(canonical, 'hex') FROM safex.events" + Where(k))),
          Query(url_, "SELECT hash FROM safex.events" + Where(k))};
    }
    return out;
  }

  // Replaces event `seq` with a forged one (its reason column says "forged", in the bytes and in
  // the view column alike). With `rechain`, every hash from there on is recomputed, as a forger
  // who knows the scheme would: the chain then holds, and only the signed checkpoints can tell.
  void Forge(int64_t seq, bool rechain) {
    auto events = CentralEvents(seq);
    auto row = audit::DecodeEvent(events[seq].first);
    ASSERT_TRUE(row.ok());
    row->values[audit::kColReason] = std::string("forged");
    events[seq].first = audit::EncodeEvent(*row);
    std::string sql = "UPDATE safex.events SET reason = 'forged', canonical = decode('" +
                      ToHex(reinterpret_cast<const uint8_t*>(events[seq].first.data()),
                            events[seq].first.size()) +
                      "', 'hex')" + Where(seq) + ";";
    if (rechain) {
      auto prev =
          audit::DigestFromHex(Query(url_, "SELECT hash FROM safex.events" + Where(seq - 1)));
      ASSERT_TRUE(prev.has_value());
      for (auto& [k, ev] : events) {
        *prev = audit::ChainHash(*prev, ev.first);
        sql += "UPDATE safex.events SET hash = '" + ToHex(*prev) + "'" + Where(k) + ";";
      }
    }
    ASSERT_EQ(AsOwnerBypassingTriggers(url_, sql), "");
  }

  Node node_;
  std::string log_id_;
};

TEST_F(TamperCentralTest, AnIntactTrailVerifies) {
  ShipAll();
  auto rep = VerifyCentral(url_, "victim");
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE((*rep)[0].ok) << (*rep)[0].problem;
  EXPECT_EQ((*rep)[0].events, 70u);
  EXPECT_EQ((*rep)[0].checkpoints, 2u);
}

TEST_F(TamperCentralTest, AnEditedEventIsFound) {
  ShipAll();
  Forge(20, /*rechain=*/false);
  ExpectBreak(20, "hash mismatch");
}

TEST_F(TamperCentralTest, AnEditedViewColumnIsFound) {
  ShipAll();
  ASSERT_EQ(
      AsOwnerBypassingTriggers(url_, "UPDATE safex.events SET verdict = 'timeout'" + Where(22)),
      "");
  ExpectBreak(22, "column verdict");
}

TEST_F(TamperCentralTest, ADeletedEventIsFound) {
  ShipAll();
  ASSERT_EQ(AsOwnerBypassingTriggers(url_, "DELETE FROM safex.events" + Where(30)), "");
  ExpectBreak(30, "missing (deleted)");
}

TEST_F(TamperCentralTest, AnInsertedEventIsFound) {
  ShipAll();
  // Make room at 40 (two steps: the key is checked row by row) and put a copy of event 10 there.
  const std::string sql =
      "UPDATE safex.events SET seq = -seq WHERE log_id = '" + log_id_ + "' AND seq >= 40;" +
      "UPDATE safex.events SET seq = -seq + 1 WHERE log_id = '" + log_id_ + "' AND seq < 0;" +
      "INSERT INTO safex.events SELECT log_id, 40, canonical, hash, shipped_at, " +
      "kind, run_id, time_ns, uid, gid, pid, policy_name, policy_source_digest, plan_digest, "
      "backend, backend_mode, argv, exit_code, signal, verdict, limits_fired, wall_ns, cpu_ns, "
      "peak_memory_bytes, stdout_bytes, stdout_sha256, stdout_truncated, stderr_bytes, "
      "stderr_sha256, stderr_truncated, validator_results, denied_egress, reason, purpose, "
      "enforcement FROM safex.events" +
      Where(10);
  ASSERT_EQ(AsOwnerBypassingTriggers(url_, sql), "");
  ExpectBreak(40, "event 10's");
}

TEST_F(TamperCentralTest, ReorderedEventsAreFound) {
  ShipAll();
  const std::string sql = "UPDATE safex.events SET seq = -44" + Where(44) +
                          "; UPDATE safex.events SET seq = 44" + Where(45) +
                          "; UPDATE safex.events SET seq = 45" + Where(-44);
  ASSERT_EQ(AsOwnerBypassingTriggers(url_, sql), "");
  ExpectBreak(44, "event 45's");
}

TEST_F(TamperCentralTest, AnEditedCheckpointIsFound) {
  ShipAll();
  ASSERT_EQ(AsOwnerBypassingTriggers(
                url_, "UPDATE safex.checkpoints SET head_hash = (SELECT hash FROM safex.events" +
                          Where(49) + ") WHERE ordinal = 1"),
            "");
  ExpectBreak(50, "signature does not verify");
}

TEST_F(TamperCentralTest, ADeletedCheckpointIsFound) {
  ShipAll();
  ASSERT_EQ(AsOwnerBypassingTriggers(url_, "DELETE FROM safex.checkpoints WHERE ordinal = 1"), "");
  ExpectBreak(0, "checkpoint 1 is missing");
}

TEST_F(TamperCentralTest, DeletedTailEventsAreFoundByTheCheckpointCoveringThem) {
  ShipAll();
  ASSERT_EQ(AsOwnerBypassingTriggers(url_, "DELETE FROM safex.events WHERE seq > 60"), "");
  ExpectBreak(70, "covers 70 events; the central holds 60");
}

TEST_F(TamperCentralTest, ARechainedRewriteIsFoundByTheSignedCheckpoint) {
  ShipAll();
  Forge(20, /*rechain=*/true);
  ExpectBreak(50, "checkpoint 1 does not match the chain at event 50");
}

TEST_F(TamperCentralTest, AnEventEditedOnTheNodeBeforeShippingIsFound) {
  ShipOptions first;
  first.max_events = 30;
  auto part = Ship(url_, *node_.log, first);
  ASSERT_TRUE(part.ok()) << part.status().message();
  node_.log.reset();
  ASSERT_EQ(audit::testing::RawSql(node_.db,
                                   "DROP TRIGGER events_no_update; "
                                   "UPDATE events SET reason = 'edited' WHERE seq = 40"),
            "");
  node_ = MakeNode(dir_, "victim");
  auto rest = Ship(url_, *node_.log, {});
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_NE(rest->warning.find("event 40"), std::string::npos) << rest->warning;
  ExpectBreak(40, "hash mismatch");
}

TEST_F(TamperCentralTest, ANodeRewritingShippedHistoryIsFound) {
  ShipAll();
  // The node edits event 20 and recomputes every hash after it: its own chain holds again.
  std::vector<audit::EventRow> rows;
  ASSERT_TRUE(node_.log
                  ->ForEachEvent([&](const audit::EventRow& r) {
                    rows.push_back(r);
                    return Status::Ok();
                  })
                  .ok());
  std::string sql = "DROP TRIGGER events_no_update;";
  auto prev = audit::DigestFromHex(rows[18].hash);
  for (size_t i = 19; i < rows.size(); ++i) {
    if (i == 19) rows[i].values[audit::kColReason] = std::string("rewritten");
    *prev = audit::ChainHash(*prev, audit::EncodeEvent(rows[i]));
    sql += "UPDATE events SET hash = '" + ToHex(*prev) + "'" +
           (i == 19 ? ", reason = 'rewritten'" : "") + " WHERE seq = " + std::to_string(i + 1) +
           ";";
  }
  node_.log.reset();
  ASSERT_EQ(audit::testing::RawSql(node_.db, sql), "");
  node_ = MakeNode(dir_, "victim");
  AddRuns(&node_, 3, "c");
  auto r = Ship(url_, *node_.log, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->warning.find("rewrote history"), std::string::npos) << r->warning;
  EXPECT_EQ(r->events_shipped, 6u);
  ExpectBreak(71, "hash mismatch");
}

}  // namespace
}  // namespace safex::fleet::testing

namespace safex::fleet::testing {
namespace {

// verify --central reads a log a range of sequence numbers at a time: a deletion across the
// boundary of two ranges, and one of a whole range, are found all the same.
TEST_F(CentralTest, DeletionsAcrossVerifyPagesAreFound) {
  Node n = MakeNode(dir_, "big");
  n.log.reset();
  audit::testing::BulkAppend(n.db, 16000, "bulk");  // 32000 events: four pages
  n = MakeNode(dir_, "big");
  ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*n.log, n.key, "big")).ok());
  ASSERT_TRUE(Ship(url_, *n.log, {}).ok());
  auto first = VerifyCentral(url_, std::nullopt);
  ASSERT_TRUE(first.ok() && (*first)[0].ok) << (*first)[0].problem;
  EXPECT_EQ((*first)[0].events, 32000u);

  ASSERT_EQ(AsOwnerBypassingTriggers(url_,
                                     "DELETE FROM safex.events WHERE seq > 19990"
                                     " AND seq <= 30005"),
            "");
  auto rep = VerifyCentral(url_, std::nullopt);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE((*rep)[0].ok);
  EXPECT_EQ((*rep)[0].first_bad_seq, 19991);
  EXPECT_NE((*rep)[0].problem.find("events 19991..30005 are missing"), std::string::npos)
      << (*rep)[0].problem;
}

}  // namespace
}  // namespace safex::fleet::testing
