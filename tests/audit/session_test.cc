// Agent sessions in the audit log (issue 18): the session events and their append-time rules,
// exec runs linked by their purpose, the sessions / session_files views and runs' session
// columns, OpenSessions for crash recovery, and what `verify` finds in a log forged by its owner
// (a second caller, a sandbox serving a session and a run, execs out of order or after the
// close).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/canonical.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::RawQuery;
using testing::RawSql;
using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

constexpr Requester kCaller{1000, 1000, 4242};
constexpr Requester kOtherCaller{1001, 1001, 4343};
constexpr Requester kService{0, 0, 777};

SessionEvent Opened(const std::string& id, const Requester& who = kCaller) {
  SessionEvent e;
  e.session_id = id;
  e.requester = who;
  e.policy_name = "python-untrusted";
  e.plan_digest = std::string(64, 'b');
  e.backend = "gvisor";
  e.backend_mode = "systrap";
  e.enforcement = R"({"fields":[]})";
  return e;
}

SessionEvent File(const std::string& id, SessionEvent::What what, const std::string& path,
                  uint64_t bytes, const Requester& who = kCaller) {
  SessionEvent e;
  e.session_id = id;
  e.what = what;
  e.requester = who;
  e.reason = path;
  e.file_bytes = bytes;
  e.file_sha256 = std::string(64, 'f');
  return e;
}

SessionEvent Closed(const std::string& id, const std::string& why,
                    const Requester& who = kService) {
  SessionEvent e;
  e.session_id = id;
  e.what = SessionEvent::What::kClosed;
  e.requester = who;
  e.reason = why;
  return e;
}

// Exec N of session `id`, run `run`, by `who`.
RunStart Exec(const std::string& run, const std::string& id, uint64_t n,
              const Requester& who = kCaller) {
  RunStart s = SampleStart(run);
  s.requester = who;
  s.purpose = SessionExecPurpose(id, n);
  return s;
}

Status::Code Code(const Status& s) { return s.code(); }

// SQLite's plan for `sql` on the log at `path`: every step's detail, joined by ';'.
std::string QueryPlan(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string plan;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    const std::string explain = "EXPLAIN QUERY PLAN " + sql;
    if (sqlite3_prepare_v2(db, explain.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        plan += reinterpret_cast<const char*>(sqlite3_column_text(st, 3));
        plan += ";";
      }
    } else {
      plan = std::string("ERROR: ") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close_v2(db);
  return plan;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("audit.db");
    auto log = AuditLog::Open(db_, testing::TestOptions(dir_));
    ASSERT_TRUE(log.ok()) << log.status().message();
    log_ = std::move(log).value();
  }

  VerifyReport Verify() {
    auto rep = log_->Verify();
    EXPECT_TRUE(rep.ok()) << rep.status().message();
    return rep.ok() ? *rep : VerifyReport{};
  }

  // The log's owner edits it: the append-only triggers go, `sql` runs, and every hash is
  // recomputed as an attacker with the code would, so the chain itself holds.
  void Forge(const std::string& sql) {
    log_.reset();
    ASSERT_EQ(RawSql(db_,
                     "DROP TRIGGER IF EXISTS events_no_update; "
                     "DROP TRIGGER IF EXISTS events_no_delete;"),
              "");
    ASSERT_EQ(RawSql(db_, sql), "") << sql;
    AuditOptions ro;
    ro.read_only = true;
    std::string fixes;
    {
      auto log = AuditLog::Open(db_, ro);
      ASSERT_TRUE(log.ok());
      Sha256Digest prev = GenesisHash((*log)->log_id());
      ASSERT_TRUE((*log)
                      ->ForEachEvent([&](const EventRow& row) {
                        prev = ChainHash(prev, EncodeEvent(row));
                        fixes += "UPDATE events SET hash = '" + ToHex(prev) +
                                 "' WHERE seq = " + std::to_string(row.seq()) + ";";
                        return Status::Ok();
                      })
                      .ok());
    }
    ASSERT_EQ(RawSql(db_, fixes), "");
    auto log = AuditLog::Open(db_, ro);
    ASSERT_TRUE(log.ok());
    log_ = std::move(log).value();
  }

  // A session "s" of kCaller with two exec runs ("r1", "r2"), a file in and a file out; open.
  void RecordOpenSession() {
    ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
    ASSERT_TRUE(
        log_->RecordSession(File("s", SessionEvent::What::kFileIn, "data/in.csv", 10)).ok());
    for (uint64_t n : {1, 2}) {
      const std::string run = "r" + std::to_string(n);
      ASSERT_TRUE(log_->RecordStart(Exec(run, "s", n)).ok());
      ASSERT_TRUE(log_->RecordEnd(SampleEnd(run)).ok());
    }
    ASSERT_TRUE(
        log_->RecordSession(File("s", SessionEvent::What::kFileOut, "out/result.json", 2)).ok());
  }

  void ExpectFails(int64_t seq, const std::string& problem) {
    VerifyReport rep = Verify();
    EXPECT_FALSE(rep.ok);
    EXPECT_EQ(rep.first_bad_seq, seq) << rep.problem;
    EXPECT_NE(rep.problem.find(problem), std::string::npos) << rep.problem;
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<AuditLog> log_;
};

TEST(SessionPurposeTest, ExecPurposesHaveOneSpelling) {
  EXPECT_EQ(SessionExecPurpose("019381c2-5b7e", 3), "session 019381c2-5b7e exec 3");
  std::string id;
  uint64_t n = 0;
  ASSERT_TRUE(ParseSessionExecPurpose("session 019381c2-5b7e exec 3", &id, &n));
  EXPECT_EQ(id, "019381c2-5b7e");
  EXPECT_EQ(n, 3u);
  ASSERT_TRUE(ParseSessionExecPurpose("session s exec 18446744073709551615", &id, &n));
  EXPECT_EQ(n, 18446744073709551615u);
  for (const char* bad :
       {"", "session", "session s", "session s exec", "session s exec ", "session s exec 0",
        "session s exec 01", "session s exec +1", "session s exec -1", "session s exec 1 ",
        "session s exec 1x", "session s exec 18446744073709551616", "session  exec 1",
        "session S exec 1", "session s/x exec 1", "session s run 1", "test p/x",
        " session s exec 1"}) {
    id = "unchanged";
    EXPECT_FALSE(ParseSessionExecPurpose(bad, &id, &n)) << bad;
    EXPECT_EQ(id, "unchanged") << bad;
  }
}

TEST(SessionRowTest, EachEventCarriesWhatItMust) {
  EXPECT_TRUE(RowFromSession(Opened("s"), 1).ok());
  SessionEvent e = Opened("s");
  e.plan_digest.clear();
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = Opened("s");
  e.requester.uid.reset();
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = Opened("S!");
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = File("s", SessionEvent::What::kFileIn, "", 1);
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = File("s", SessionEvent::What::kFileOut, "a", 1);
  e.file_sha256 = "abc";
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e.file_sha256 = std::string(64, 'F');
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  e = File("s", SessionEvent::What::kFileOut, "a", uint64_t{1} << 63);
  EXPECT_EQ(RowFromSession(e, 1).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(RowFromSession(Closed("s", ""), 1).status().code(), Status::Code::kInvalidArgument);
  // A start may not name a session in another spelling than SessionExecPurpose's.
  RunStart start = SampleStart("r");
  start.purpose = "session s exec 01";
  EXPECT_EQ(RowFromStart(start, 1).status().code(), Status::Code::kInvalidArgument);

  auto file = RowFromSession(File("s", SessionEvent::What::kFileIn, "data/in.csv", 10), 5);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->text(kColKind), "session");
  EXPECT_EQ(file->text(kColPurpose), "file-in");
  EXPECT_EQ(file->text(kColReason), "data/in.csv");
  EXPECT_EQ(file->text(kColEnforcement),
            R"({"bytes":10,"sha256":")" + std::string(64, 'f') + "\"}");
  EXPECT_EQ(file->integer(kColUid), 1000);
  EXPECT_EQ(file->integer(kColTimeNs), 5);
}

TEST_F(SessionTest, ASessionsLifeIsRecordedAndTheViewsShowIt) {
  RecordOpenSession();
  ASSERT_TRUE(log_->RecordSession(Closed("s", "deleted by the caller", kCaller)).ok());
  ASSERT_TRUE(log_->RecordStart(SampleStart("plain")).ok());
  EXPECT_TRUE(Verify().ok) << Verify().problem;

  EXPECT_EQ(RawQuery(db_,
                     "SELECT session_id || '|' || uid || '|' || policy_name || '|' || backend || "
                     "'|' || closed_because || '|' || closed_uid || '|' || execs || '|' || "
                     "files_in || '|' || files_out || '|' || seq || '|' || "
                     "(closed_ns >= opened_ns) || '|' || (opened_at LIKE '____-__-__T%Z') "
                     "FROM sessions"),
            "s|1000|python-untrusted|gvisor|deleted by the caller|1000|2|1|1|1|1|1");
  EXPECT_EQ(RawQuery(db_, "SELECT enforcement FROM sessions"), R"({"fields":[]})");
  EXPECT_EQ(RawQuery(db_,
                     "SELECT group_concat(row, ';') FROM (SELECT direction || ' ' || path || ' ' "
                     "|| bytes || ' ' || sha256 || ' ' || uid || ' ' || seq AS row FROM "
                     "session_files ORDER BY seq)"),
            "in data/in.csv 10 " + std::string(64, 'f') + " 1000 2;out out/result.json 2 " +
                std::string(64, 'f') + " 1000 7");
  EXPECT_EQ(RawQuery(db_,
                     "SELECT group_concat(row, ';') FROM (SELECT run_id || ' ' || "
                     "ifnull(session_id, '-') || ' ' || ifnull(exec_index, '-') AS row FROM "
                     "runs ORDER BY start_seq)"),
            "r1 s 1;r2 s 2;plain - -");
  // The runs of a session through the library too: the purpose names it.
  auto r2 = log_->GetRun("r2");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->run.purpose, "session s exec 2");
}

TEST_F(SessionTest, SessionEventsKeepTheirOrder) {
  auto file_in = File("s", SessionEvent::What::kFileIn, "in", 1);
  EXPECT_EQ(Code(log_->RecordSession(file_in)), Status::Code::kFailedPrecondition);  // not opened
  EXPECT_EQ(Code(log_->RecordSession(Closed("s", "x"))), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
  EXPECT_EQ(Code(log_->RecordSession(Opened("s"))), Status::Code::kFailedPrecondition);
  // An id is one thing: a session's id is no run's or sandbox's, and the reverse.
  ASSERT_TRUE(log_->RecordStart(SampleStart("run")).ok());
  EXPECT_EQ(Code(log_->RecordSession(Opened("run"))), Status::Code::kFailedPrecondition);
  EXPECT_EQ(Code(log_->RecordStart(SampleStart("s"))), Status::Code::kFailedPrecondition);
  SandboxEvent made;
  made.sandbox_id = "s";
  EXPECT_EQ(Code(log_->RecordSandbox(made)), Status::Code::kFailedPrecondition);
  made.sandbox_id = "sbx";
  ASSERT_TRUE(log_->RecordSandbox(made).ok());
  EXPECT_EQ(Code(log_->RecordSession(Opened("sbx"))), Status::Code::kFailedPrecondition);
  // A session serves one caller: files from another uid are refused; the service may close it.
  auto other_file = File("s", SessionEvent::What::kFileOut, "out", 1, kOtherCaller);
  Status refused = log_->RecordSession(other_file);
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("serves uid 1000 only, not uid 1001"), std::string::npos)
      << refused.message();
  ASSERT_TRUE(log_->RecordSession(file_in).ok());
  ASSERT_TRUE(log_->RecordSession(Closed("s", "idle longer than 5m")).ok());
  // Nothing after the close.
  EXPECT_EQ(Code(log_->RecordSession(file_in)), Status::Code::kFailedPrecondition);
  EXPECT_EQ(Code(log_->RecordSession(Closed("s", "again"))), Status::Code::kFailedPrecondition);
  EXPECT_EQ(Code(log_->RecordStart(Exec("late", "s", 1))), Status::Code::kFailedPrecondition);
  EXPECT_EQ(*log_->EventCount(), 5u);  // refused appends left nothing
  EXPECT_TRUE(Verify().ok);
}

TEST_F(SessionTest, ExecRunsAreTheSessionCallersNumberedOneTwoThree) {
  EXPECT_EQ(Code(log_->RecordStart(Exec("r0", "s", 1))), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
  ASSERT_TRUE(log_->RecordSession(Opened("t")).ok());
  Status gap = log_->RecordStart(Exec("r2", "s", 2));
  EXPECT_EQ(gap.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(gap.message().find("it has 0 exec runs, so the next is exec 1"), std::string::npos)
      << gap.message();
  Status other = log_->RecordStart(Exec("r1", "s", 1, kOtherCaller));
  EXPECT_EQ(other.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(other.message().find("a session serves one caller"), std::string::npos)
      << other.message();
  ASSERT_TRUE(log_->RecordStart(Exec("r1", "s", 1)).ok());
  EXPECT_EQ(Code(log_->RecordStart(Exec("r1-again", "s", 1))), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log_->RecordStart(Exec("t1", "t", 1)).ok());  // each session counts its own
  ASSERT_TRUE(log_->RecordStart(Exec("r2", "s", 2)).ok());
  // An exec's number is taken by its start, whether or not it has ended.
  ASSERT_TRUE(log_->RecordEnd(SampleEnd("r2")).ok());
  ASSERT_TRUE(log_->RecordStart(Exec("r3", "s", 3)).ok());
  // A refused request may name the session: it runs nothing and takes no number.
  Refusal refusal;
  refusal.requester = kOtherCaller;
  refusal.reason = "session s belongs to another caller";
  refusal.purpose = SessionExecPurpose("s", 4);
  ASSERT_TRUE(log_->RecordRefusal(refusal).ok());
  ASSERT_TRUE(log_->RecordStart(Exec("r4", "s", 4)).ok());
  EXPECT_EQ(RawQuery(db_, "SELECT execs FROM sessions WHERE session_id = 's'"), "4");
  EXPECT_EQ(RawQuery(db_, "SELECT execs FROM sessions WHERE session_id = 't'"), "1");
  EXPECT_TRUE(Verify().ok) << Verify().problem;
}

// Append counts a session's execs at every exec start, and the sessions view for every session:
// a range of the events_start_purpose index each time, never a scan of the whole log. That
// index holds starts only, so the per-id lookups of sandbox and session events keep using
// events_run_id.
TEST_F(SessionTest, CountingASessionsExecsReadsARangeOfThePurposeIndex) {
  const std::string range = "USING INDEX events_start_purpose (purpose>? AND purpose<?)";
  const std::string append = QueryPlan(
      db_, "SELECT count(*) FROM events WHERE kind = 'start' AND purpose >= ?1 AND purpose < ?2");
  EXPECT_NE(append.find(range), std::string::npos) << append;
  const std::string view = QueryPlan(db_, "SELECT execs FROM sessions");
  EXPECT_NE(view.find(range), std::string::npos) << view;
  for (const char* by_id :
       {"SELECT closed_ns, files_in, files_out FROM sessions", "SELECT * FROM sandboxes",
        "SELECT 1 FROM events AS m WHERE m.kind = 'sandbox' AND m.purpose = 'made' AND NOT EXISTS "
        "(SELECT 1 FROM events AS e WHERE e.run_id = m.run_id AND e.kind = 'sandbox' AND "
        "e.purpose = 'evicted')"}) {
    const std::string plan = QueryPlan(db_, by_id);
    EXPECT_NE(plan.find("USING INDEX events_run_id (run_id=?)"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("events_start_purpose (purpose=?)"), std::string::npos) << plan;
  }
}

TEST_F(SessionTest, OpenSessionsAreTheOpenedAndNeverClosed) {
  ASSERT_TRUE(log_->RecordSession(Opened("a")).ok());
  SessionEvent b = Opened("b", kOtherCaller);
  b.policy_name = "agent";
  b.time_ns = 123;
  ASSERT_TRUE(log_->RecordSession(b).ok());
  ASSERT_TRUE(log_->RecordSession(Opened("c")).ok());
  ASSERT_TRUE(log_->RecordSession(Closed("a", "deleted by the caller", kCaller)).ok());
  auto open = log_->OpenSessions();
  ASSERT_TRUE(open.ok()) << open.status().message();
  ASSERT_EQ(open->size(), 2u);
  EXPECT_EQ((*open)[0].session_id, "b");
  EXPECT_EQ((*open)[0].opener_uid, 1001u);
  EXPECT_EQ((*open)[0].opener_pid, 4343);
  EXPECT_EQ((*open)[0].opened_ns, 123);
  EXPECT_EQ((*open)[0].policy_name, "agent");
  EXPECT_EQ((*open)[0].plan_digest, std::string(64, 'b'));
  EXPECT_EQ((*open)[1].session_id, "c");
  // Crash recovery closes them.
  for (const auto& s : *open) {
    ASSERT_TRUE(log_->RecordSession(Closed(s.session_id, "interrupted: service restarted")).ok());
  }
  EXPECT_TRUE(log_->OpenSessions()->empty());
  EXPECT_EQ(
      RawQuery(db_, "SELECT count(*) FROM sessions WHERE closed_because LIKE 'interrupted:%'"),
      "2");
}

TEST_F(SessionTest, ListSessionsIsNewestFirstWithItsCounts) {
  RecordOpenSession();  // "s": two execs, one file in, one out
  ASSERT_TRUE(log_->RecordSession(Closed("s", "deleted by uid 1000", kCaller)).ok());
  SessionEvent t = Opened("t", kOtherCaller);
  t.policy_name = "agent";
  ASSERT_TRUE(log_->RecordSession(t).ok());
  auto all = log_->ListSessions(0);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  const AuditLog::SessionSummary& newest = (*all)[0];
  EXPECT_EQ(newest.session_id, "t");
  EXPECT_EQ(newest.uid, 1001u);
  EXPECT_EQ(newest.policy_name, "agent");
  EXPECT_FALSE(newest.closed_ns.has_value());
  const AuditLog::SessionSummary& s = (*all)[1];
  EXPECT_EQ(s.session_id, "s");
  EXPECT_EQ((std::vector<uint64_t>{s.execs, s.files_in, s.files_out}),
            (std::vector<uint64_t>{2, 1, 1}));
  EXPECT_EQ(s.closed_because, "deleted by uid 1000");
  ASSERT_TRUE(s.closed_ns.has_value());
  EXPECT_GE(*s.closed_ns, s.opened_ns);
  EXPECT_EQ(s.plan_digest, std::string(64, 'b'));
  auto one = log_->ListSessions(1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].session_id, "t");
}

// Verify on logs whose owner broke the session rules behind the library's back.

TEST_F(SessionTest, VerifyFindsASecondCallersExec) {
  RecordOpenSession();
  ASSERT_TRUE(Verify().ok);
  Forge("UPDATE events SET uid = 1001 WHERE run_id = 'r2' AND kind = 'start'");
  ExpectFails(5, "session s served two callers: opened by uid 1000, run r2 from uid 1001");
}

TEST_F(SessionTest, VerifyFindsASecondCallersFile) {
  RecordOpenSession();
  Forge("UPDATE events SET uid = 1001 WHERE seq = 7");
  ExpectFails(7, "session s served two callers: opened by uid 1000, file-out from uid 1001");
}

TEST_F(SessionTest, VerifyFindsASessionOpenedTwice) {
  ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
  ASSERT_TRUE(log_->RecordSession(Opened("t", kOtherCaller)).ok());
  Forge("UPDATE events SET run_id = 's' WHERE seq = 2");
  ExpectFails(2, "session s opened twice (first at event 1)");
}

TEST_F(SessionTest, VerifyFindsExecsOutOfOrder) {
  RecordOpenSession();
  Forge("UPDATE events SET purpose = 'session s exec 3' WHERE run_id = 'r2' AND kind = 'start'");
  ExpectFails(5, "run r2 is exec 3 of session s, which had 1 before it");
}

TEST_F(SessionTest, VerifyFindsAnExecOrAFileAfterTheClose) {
  RecordOpenSession();
  ASSERT_TRUE(log_->RecordSession(Closed("s", "idle longer than 5m")).ok());
  ASSERT_TRUE(log_->RecordStart(SampleStart("late")).ok());
  ASSERT_TRUE(log_->RecordSession(Opened("t")).ok());
  ASSERT_TRUE(log_->RecordSession(File("t", SessionEvent::What::kFileOut, "x", 1)).ok());
  ASSERT_TRUE(Verify().ok);
  Forge(
      "UPDATE events SET purpose = 'session s exec 3' WHERE run_id = 'late';"
      "UPDATE events SET run_id = 's' WHERE seq = 11");
  ExpectFails(9, "run late is an exec of session s after its close (event 8)");
  Forge("UPDATE events SET purpose = 'test p/late' WHERE run_id = 'late'");
  ExpectFails(11, "session s has a file-out after its close (event 8)");
}

TEST_F(SessionTest, VerifyFindsAnExecOfASessionNeverOpened) {
  ASSERT_TRUE(log_->RecordStart(SampleStart("r")).ok());
  Forge("UPDATE events SET purpose = 'session nobody exec 1' WHERE seq = 1");
  ExpectFails(1, "run r is an exec of session nobody, which was never opened");
}

TEST_F(SessionTest, VerifyFindsASandboxThatServedASessionAndAnythingElse) {
  // A run handed a pooled sandbox whose id is a session's (the runner writes it in the run's
  // evidence; the log takes it as it comes and verify judges it).
  ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
  ASSERT_TRUE(log_->RecordStart(SampleStart("pooled")).ok());
  RunEnd end = SampleEnd("pooled");
  end.enforcement =
      R"({"fields":[{"name":"sandbox","state":"observed","observed":"pooled s made 1 ns )"
      R"(idle 3 ms","source":"safex serve: warm pool"}]})";
  ASSERT_TRUE(log_->RecordEnd(end).ok());
  ExpectFails(3,
              "pooled sandbox s has the id of a session: a sandbox serves one run or one "
              "session");
}

TEST_F(SessionTest, VerifyFindsASessionOpenedOnAPooledSandbox) {
  SandboxEvent made;
  made.sandbox_id = "sbx";
  ASSERT_TRUE(log_->RecordSandbox(made).ok());
  ASSERT_TRUE(log_->RecordSession(Opened("s")).ok());
  Forge("UPDATE events SET run_id = 'sbx' WHERE seq = 2");
  ExpectFails(2, "session sbx opened on the id of a pooled sandbox");
}

}  // namespace
}  // namespace safex::audit
