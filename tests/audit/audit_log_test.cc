// AuditLog on :memory: and on files: recording, the write-order rules, queries, views, triggers,
// durability settings, checkpoints and the RunAudited order.
#include "audit/audit_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "audit/audited_run.h"
#include "audit/canonical.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using testing::RawQuery;
using testing::RawSql;
using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

std::unique_ptr<AuditLog> OpenOrDie(const std::string& path, const AuditOptions& o = {}) {
  auto log = AuditLog::Open(path, o);
  EXPECT_TRUE(log.ok()) << log.status().message();
  return log.ok() ? std::move(log).value() : nullptr;
}

TEST(AuditLogTest, MemoryLogRecordsAndLists) {
  auto log = OpenOrDie(":memory:");
  ASSERT_TRUE(log);
  EventRef ref;
  ASSERT_TRUE(log->RecordStart(SampleStart("run-1"), &ref).ok());
  EXPECT_EQ(ref.seq, 1);
  EXPECT_EQ(ref.hash.size(), 64u);
  ASSERT_TRUE(log->RecordEnd(SampleEnd("run-1"), &ref).ok());
  EXPECT_EQ(ref.seq, 2);
  Refusal r;
  r.requester = {1001, 1001, std::nullopt};
  r.policy_name = "python-untrusted";
  r.argv = {"rm", "-rf", "/"};
  r.reason = "policy not found";
  ASSERT_TRUE(log->RecordRefusal(r).ok());  // run id made up
  ASSERT_TRUE(log->RecordStart(SampleStart("run-2")).ok());

  auto runs = log->ListRuns({});
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 3u);
  // Newest first.
  EXPECT_EQ((*runs)[0].run_id, "run-2");
  EXPECT_EQ((*runs)[0].state, "running");
  EXPECT_EQ((*runs)[0].verdict, "");
  EXPECT_EQ((*runs)[1].state, "refused");
  EXPECT_EQ((*runs)[1].verdict, "refused");
  EXPECT_EQ((*runs)[1].reason, "policy not found");
  EXPECT_EQ((*runs)[1].requester.uid, 1001u);
  EXPECT_FALSE((*runs)[1].requester.pid.has_value());
  EXPECT_EQ((*runs)[1].argv, (std::vector<std::string>{"rm", "-rf", "/"}));
  const RunSummary& done = (*runs)[2];
  EXPECT_EQ(done.run_id, "run-1");
  EXPECT_EQ(done.state, "finished");
  EXPECT_EQ(done.verdict, "ok");
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.policy_name, "python-untrusted");
  EXPECT_EQ(done.backend, "gvisor");
  EXPECT_EQ(done.argv, SampleStart("x").argv);
  EXPECT_EQ(done.requester, SampleStart("x").requester);
  EXPECT_EQ(done.wall_ns, 150'000'000);
  ASSERT_TRUE(done.stdout_summary.has_value());
  EXPECT_EQ(*done.stdout_summary, SampleEnd("x").stdout_summary);
  EXPECT_EQ(done.validator_results, SampleEnd("x").validator_results);
  EXPECT_EQ(done.start_seq, 1);
  EXPECT_EQ(done.end_seq, 2);

  auto unfinished = log->UnfinishedRuns();
  ASSERT_TRUE(unfinished.ok());
  EXPECT_EQ(*unfinished, std::vector<std::string>{"run-2"});
  ASSERT_TRUE(log->RecordInterrupted({"run-2", "supervisor restarted", 0}).ok());
  unfinished = log->UnfinishedRuns();
  EXPECT_TRUE(unfinished->empty());
  auto detail = log->GetRun("run-2");
  ASSERT_TRUE(detail.ok());
  EXPECT_EQ(detail->run.state, "interrupted");
  EXPECT_EQ(detail->run.verdict, "interrupted");
  EXPECT_EQ(detail->run.reason, "supervisor restarted");
  EXPECT_EQ(detail->events.size(), 2u);

  auto rep = log->Verify();
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->ok) << rep->problem;
  EXPECT_EQ(rep->events, 5u);
  EXPECT_EQ(*log->EventCount(), 5u);
}

TEST(AuditLogTest, WriteOrderRulesAreEnforced) {
  auto log = OpenOrDie(":memory:");
  ASSERT_TRUE(log);
  EXPECT_EQ(log->RecordEnd(SampleEnd("never-started")).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(log->RecordInterrupted({"never-started", "x", 0}).code(),
            Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log->RecordStart(SampleStart("r")).ok());
  EXPECT_EQ(log->RecordStart(SampleStart("r")).code(), Status::Code::kFailedPrecondition);
  Refusal refusal;
  refusal.run_id = "r";
  refusal.reason = "dup";
  EXPECT_EQ(log->RecordRefusal(refusal).code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log->RecordEnd(SampleEnd("r")).ok());
  EXPECT_EQ(log->RecordEnd(SampleEnd("r")).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(log->RecordInterrupted({"r", "x", 0}).code(), Status::Code::kFailedPrecondition);
  // Rejected appends left nothing behind and the chain is intact.
  EXPECT_EQ(*log->EventCount(), 2u);
  EXPECT_TRUE(log->Verify()->ok);
}

TEST(AuditLogTest, AccessesAreRecordedForRunsInTheLogOnly) {
  auto log = OpenOrDie(":memory:");
  ASSERT_TRUE(log);
  Access a;
  a.run_id = "r";
  a.requester = {1000, 1000, 42};
  a.what = "fetched file result.json: 2 bytes, SHA-256 44136fa3";
  EXPECT_EQ(log->RecordAccess(a).code(), Status::Code::kFailedPrecondition);  // no such run
  ASSERT_TRUE(log->RecordStart(SampleStart("r")).ok());
  ASSERT_TRUE(log->RecordEnd(SampleEnd("r")).ok());
  ASSERT_TRUE(log->RecordAccess(a).ok());
  ASSERT_TRUE(log->RecordAccess(a).ok());  // every fetch is its own event
  a.what = "";
  EXPECT_EQ(log->RecordAccess(a).code(), Status::Code::kInvalidArgument);
  auto detail = log->GetRun("r");
  ASSERT_TRUE(detail.ok());
  ASSERT_EQ(detail->events.size(), 4u);
  EXPECT_EQ(detail->events[2].text(kColKind), "access");
  EXPECT_EQ(detail->events[2].integer(kColUid), 1000);
  EXPECT_EQ(detail->events[2].text(kColReason),
            "fetched file result.json: 2 bytes, SHA-256 44136fa3");
  // The run itself is unchanged: one run, finished.
  auto runs = log->ListRuns({});
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].state, "finished");
  EXPECT_TRUE(log->Verify()->ok);
}

TEST(AuditLogTest, FiltersAndPrefixLookup) {
  auto log = OpenOrDie(":memory:");
  ASSERT_TRUE(log);
  const int64_t day = 86400LL * 1'000'000'000;
  const int64_t t0 = 1'764'455'160LL * 1'000'000'000;
  for (int i = 0; i < 10; ++i) {
    RunStart s = SampleStart("run-" + std::to_string(i), i % 2 ? "odd" : "even");
    s.start_time_ns = t0 + i * day;
    s.requester.uid = 1000 + (i % 3);
    ASSERT_TRUE(log->RecordStart(s).ok());
    RunEnd e = SampleEnd(s.run_id, i % 4 == 0 ? Verdict::kMemoryLimit : Verdict::kOk);
    e.end_time_ns = s.start_time_ns + 1000;
    ASSERT_TRUE(log->RecordEnd(e).ok());
  }
  RunFilter f;
  f.policy = "odd";
  EXPECT_EQ(log->ListRuns(f)->size(), 5u);
  f = {};
  f.verdict = Verdict::kMemoryLimit;
  EXPECT_EQ(log->ListRuns(f)->size(), 3u);  // 0, 4, 8
  f.policy = "even";
  EXPECT_EQ(log->ListRuns(f)->size(), 3u);
  f = {};
  f.since_ns = t0 + 3 * day;
  f.until_ns = t0 + 6 * day;
  auto runs = log->ListRuns(f);
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].run_id, "run-5");
  EXPECT_EQ((*runs)[2].run_id, "run-3");
  f = {};
  f.uid = 1001;
  EXPECT_EQ(log->ListRuns(f)->size(), 3u);  // 1, 4, 7
  f = {};
  f.limit = 4;
  EXPECT_EQ(log->ListRuns(f)->size(), 4u);
  f = {};
  f.state = "running";
  EXPECT_TRUE(log->ListRuns(f)->empty());

  EXPECT_EQ(log->GetRun("run-7")->run.run_id, "run-7");
  EXPECT_EQ(log->GetRun("run-1")->run.run_id, "run-1");  // exact match beats prefix
  EXPECT_EQ(log->GetRun("run-").status().code(), Status::Code::kInvalidArgument);  // ambiguous
  EXPECT_EQ(log->GetRun("nope").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(log->GetRun("run*").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(log->GetRun("'; DROP TABLE events; --").status().code(),
            Status::Code::kInvalidArgument);
}

TEST(AuditLogTest, FileLogIsWalFullSyncAppendOnlyAndPersistent) {
  TempDir dir;
  const std::string db = dir.File("state/audit.db");  // the directory is created too
  {
    auto log = OpenOrDie(db, testing::TestOptions(dir));
    ASSERT_TRUE(log);
    ASSERT_TRUE(log->CheckWritable().ok());
    ASSERT_TRUE(log->RecordStart(SampleStart("a")).ok());
    ASSERT_TRUE(log->RecordEnd(SampleEnd("a", Verdict::kMemoryLimit)).ok());
    ASSERT_TRUE(log->MakeCheckpoint().ok());
  }
  struct stat st {};
  ASSERT_EQ(stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(RawQuery(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery(db, "PRAGMA application_id"), "1397119041");
  // Append-only, even for someone with a plain sqlite3 shell.
  EXPECT_NE(RawSql(db, "UPDATE events SET verdict = 'ok'").find("append-only"), std::string::npos);
  EXPECT_NE(RawSql(db, "DELETE FROM events").find("append-only"), std::string::npos);
  EXPECT_NE(RawSql(db, "UPDATE meta SET value = 'x'").find("append-only"), std::string::npos);
  EXPECT_NE(RawSql(db, "DELETE FROM checkpoints").find("append-only"), std::string::npos);
  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM events"), "2");

  // Reopen: everything is still there, and the chain continues.
  auto log = OpenOrDie(db, testing::TestOptions(dir));
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->RecordStart(SampleStart("b")).ok());
  EXPECT_EQ(*log->EventCount(), 3u);
  EXPECT_TRUE(log->Verify()->ok);
  // synchronous=FULL is per connection: this connection has it.
  auto durability = log->GetDurability();
  ASSERT_TRUE(durability.ok());
  EXPECT_EQ(durability->journal_mode, "wal");
  EXPECT_EQ(durability->synchronous, 2);  // FULL
  EXPECT_EQ(log->ListRuns({})->size(), 2u);
}

TEST(AuditLogTest, ViewsAnswerAuditorQuestionsInPlainSql) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  auto log = OpenOrDie(db, testing::TestOptions(dir));
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->RecordStart(SampleStart("m1", "python-untrusted")).ok());
  ASSERT_TRUE(log->RecordEnd(SampleEnd("m1", Verdict::kMemoryLimit)).ok());
  ASSERT_TRUE(log->RecordStart(SampleStart("m2", "node-untrusted")).ok());
  ASSERT_TRUE(log->RecordEnd(SampleEnd("m2", Verdict::kMemoryLimit)).ok());
  ASSERT_TRUE(log->RecordStart(SampleStart("ok1", "python-untrusted")).ok());
  RunEnd e = SampleEnd("ok1");
  e.denied_egress = {{"198.18.0.9:443/tcp", 3}};
  ASSERT_TRUE(log->RecordEnd(e).ok());
  RunStart old = SampleStart("old", "python-untrusted");
  old.start_time_ns = 1'000'000'000;  // 1970: long before "last week"
  ASSERT_TRUE(log->RecordStart(old).ok());
  ASSERT_TRUE(log->RecordEnd(SampleEnd("old", Verdict::kMemoryLimit)).ok());
  Refusal r;
  r.reason = "over the memory ceiling";
  r.policy_name = "python-untrusted";
  ASSERT_TRUE(log->RecordRefusal(r).ok());

  // The example of docs/audit.md.
  EXPECT_EQ(RawQuery(db,
                     "SELECT group_concat(run_id) FROM limit_hits WHERE policy_name = "
                     "'python-untrusted' AND limit_name = 'memory' AND start_ns >= "
                     "unixepoch('now', '-7 days') * 1000000000"),
            "m1");
  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM runs"), "5");
  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM runs WHERE verdict = 'memory-limit'"), "3");
  EXPECT_EQ(RawQuery(db, "SELECT reason FROM refusals"), "over the memory ceiling");
  EXPECT_EQ(RawQuery(db, "SELECT destination || ' x' || attempts FROM egress_denials"),
            "198.18.0.9:443/tcp x3");
  EXPECT_EQ(RawQuery(db, "SELECT outcome FROM validations WHERE run_id = 'ok1'"), "accepted");
  EXPECT_EQ(RawQuery(db, "SELECT started_at FROM runs WHERE run_id = 'old'"),
            "1970-01-01T00:00:01.000Z");
  EXPECT_EQ(RawQuery(db, "SELECT wall_ms FROM runs WHERE run_id = 'ok1'"), "150.0");
}

TEST(AuditLogTest, EnforcementViewsListEachFieldAndTheGaps) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  auto log = OpenOrDie(db, testing::TestOptions(dir));
  ASSERT_TRUE(log);
  // held: every field read back; refused: one differed; blind: ended without any evidence.
  ASSERT_TRUE(log->RecordStart(SampleStart("held", "python-untrusted")).ok());
  RunEnd held = SampleEnd("held");
  held.enforcement =
      R"({"fields":[{"name":"cgroup.memory_bytes","state":"matches","expected":"1","observed":"1",)"
      R"("source":"host kernel: memory.max"},{"name":"seccomp","state":"not-observed",)"
      R"("source":"inside the Sentry","probe":"the first errno rule"}]})";
  ASSERT_TRUE(log->RecordEnd(held).ok());
  ASSERT_TRUE(log->RecordStart(SampleStart("refused", "python-untrusted")).ok());
  RunEnd refused = SampleEnd("refused", Verdict::kRefused);
  refused.exit_code.reset();
  refused.error = "the host does not enforce the plan";
  refused.enforcement =
      R"({"fields":[{"name":"cgroup.memory_bytes","state":"differs","expected":"2","observed":"1",)"
      R"("source":"host kernel: safex/memory.max"}]})";
  ASSERT_TRUE(log->RecordEnd(refused).ok());
  ASSERT_TRUE(log->RecordStart(SampleStart("blind", "python-untrusted")).ok());
  ASSERT_TRUE(log->RecordEnd(SampleEnd("blind")).ok());
  // An end refused without the evidence that refused it is not an end event.
  ASSERT_TRUE(log->RecordStart(SampleStart("bare", "python-untrusted")).ok());
  EXPECT_EQ(log->RecordEnd(SampleEnd("bare", Verdict::kRefused)).code(),
            Status::Code::kInvalidArgument);

  EXPECT_EQ(RawQuery(db, "SELECT count(*) FROM enforcement"), "3");
  EXPECT_EQ(RawQuery(db, "SELECT probe FROM enforcement WHERE field = 'seccomp'"),
            "the first errno rule");
  EXPECT_EQ(
      RawQuery(db,
               "SELECT group_concat(run_id || ':' || gap || ':' || coalesce(field, '-'), ' ') "
               "FROM (SELECT * FROM enforcement_gaps ORDER BY run_id)"),
      "blind:not recorded:- held:not-observed:seccomp refused:differs:cgroup.memory_bytes");
  EXPECT_EQ(RawQuery(db, "SELECT verdict FROM runs WHERE run_id = 'refused'"), "refused");
}

// A warm pool's sandbox serves one run (supervisor/serve/sandbox_pool.h): the runner records
// which sandbox a run was handed in its evidence, and a second run naming the same one fails
// verification at that run's end.
TEST(AuditLogTest, VerifyFailsWhenOnePooledSandboxServedTwoRuns) {
  TempDir dir;
  auto log = OpenOrDie(dir.File("audit.db"), testing::TestOptions(dir));
  ASSERT_TRUE(log);
  auto pooled = [](const std::string& sandbox) {
    return R"({"fields":[{"name":"sandbox","state":"observed","observed":"pooled )" + sandbox +
           R"( made 1 ns idle 5 ms","source":"safex serve: warm pool"}]})";
  };
  for (const char* run : {"first", "second", "cold"}) {
    ASSERT_TRUE(log->RecordStart(SampleStart(run)).ok());
    RunEnd end = SampleEnd(run);
    if (std::string(run) != "cold") end.enforcement = pooled(std::string("sbx-") + run);
    ASSERT_TRUE(log->RecordEnd(end).ok());
  }
  auto clean = log->Verify();
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->ok) << clean->problem;
  ASSERT_TRUE(log->RecordStart(SampleStart("again")).ok());
  RunEnd again = SampleEnd("again");
  again.enforcement = pooled("sbx-first");
  ASSERT_TRUE(log->RecordEnd(again).ok());
  auto reused = log->Verify();
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  EXPECT_FALSE(reused->ok);
  EXPECT_EQ(reused->first_bad_seq, 8);
  EXPECT_NE(reused->problem.find("pooled sandbox sbx-first served run again but it already "
                                 "served run first"),
            std::string::npos)
      << reused->problem;
}

// The warm pool's own events: a sandbox made (once, on a new id) and evicted (at most once,
// only if made), chained like every event; the sandboxes view joins them with the run a sandbox
// served; a sandbox evicted and then named by a run fails verification.
TEST(AuditLogTest, SandboxEventsAreChainedAndOrderedAndTheViewJoinsThem) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  auto log = OpenOrDie(db, testing::TestOptions(dir));
  ASSERT_TRUE(log);
  const std::string digest(64, 'a');
  auto made = [&](const std::string& id) {
    SandboxEvent e;
    e.sandbox_id = id;
    e.policy_name = "python-untrusted";
    e.plan_digest = digest;
    e.backend = "gvisor";
    e.backend_mode = "systrap";
    e.enforcement = R"({"fields":[]})";
    return e;
  };
  auto evicted = [&](const std::string& id, const std::string& why) {
    SandboxEvent e = made(id);
    e.what = SandboxEvent::What::kEvicted;
    e.enforcement.clear();
    e.reason = why;
    return e;
  };
  ASSERT_TRUE(log->RecordSandbox(made("sbx-a")).ok());
  ASSERT_TRUE(log->RecordSandbox(made("sbx-b")).ok());
  EXPECT_EQ(log->RecordSandbox(made("sbx-a")).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(log->RecordSandbox(evicted("sbx-never", "x")).code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(log->RecordSandbox(evicted("sbx-a", "")).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(log->RecordSandbox(evicted("sbx-a", "idle longer than max_idle (600 s)")).ok());
  EXPECT_EQ(log->RecordSandbox(evicted("sbx-a", "again")).code(),
            Status::Code::kFailedPrecondition);
  // A sandbox's id is not a run's.
  EXPECT_EQ(log->RecordStart(SampleStart("sbx-b")).code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(log->RecordStart(SampleStart("served")).ok());
  RunEnd end = SampleEnd("served");
  end.enforcement =
      R"({"fields":[{"name":"sandbox","state":"observed","observed":"pooled sbx-b made 1 ns )"
      R"(idle 3 ms","source":"safex serve: warm pool"}]})";
  ASSERT_TRUE(log->RecordEnd(end).ok());
  // Made and never ended: neither evicted (sbx-a) nor named by a run's end (sbx-b); with its
  // maker and what it was made from, for crash recovery.
  SandboxEvent open = made("sbx-c");
  open.requester.pid = 4242;
  ASSERT_TRUE(log->RecordSandbox(open).ok());
  auto unended = log->UnendedSandboxes();
  ASSERT_TRUE(unended.ok()) << unended.status().ToString();
  ASSERT_EQ(unended->size(), 1u);
  EXPECT_EQ((*unended)[0].sandbox_id, "sbx-c");
  EXPECT_EQ((*unended)[0].maker_pid, 4242);
  EXPECT_EQ((*unended)[0].policy_name, "python-untrusted");
  EXPECT_EQ((*unended)[0].plan_digest, digest);
  EXPECT_GT((*unended)[0].made_ns, 0);
  ASSERT_TRUE(log->RecordSandbox(evicted("sbx-c", "its service ended without destroying it")).ok());
  EXPECT_TRUE(log->UnendedSandboxes()->empty());
  EXPECT_EQ(RawQuery(db,
                     "SELECT group_concat(row, char(10)) FROM (SELECT sandbox_id || ' ' || "
                     "ifnull(evicted_because, '-') || ' ' || ifnull(served_run, '-') AS row "
                     "FROM sandboxes ORDER BY sandbox_id)"),
            "sbx-a idle longer than max_idle (600 s) -\nsbx-b - served\n"
            "sbx-c its service ended without destroying it -");
  auto ok = log->Verify();
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->ok) << ok->problem;
  // A run handed a sandbox that had been evicted: the log does not verify.
  ASSERT_TRUE(log->RecordStart(SampleStart("late")).ok());
  RunEnd late = SampleEnd("late");
  late.enforcement =
      R"({"fields":[{"name":"sandbox","state":"observed","observed":"pooled sbx-a made 1 ns )"
      R"(idle 3 ms","source":"safex serve: warm pool"}]})";
  ASSERT_TRUE(log->RecordEnd(late).ok());
  auto bad = log->Verify();
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->ok);
  EXPECT_NE(bad->problem.find("pooled sandbox sbx-a served run late but it already was evicted"),
            std::string::npos)
      << bad->problem;
}

TEST(AuditLogTest, ReadOnlyOpenCannotWriteAndMissingFileIsNotFound) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  AuditOptions ro;
  ro.read_only = true;
  EXPECT_EQ(AuditLog::Open(db, ro).status().code(), Status::Code::kNotFound);
  AuditOptions no_create;
  no_create.create = false;
  EXPECT_EQ(AuditLog::Open(db, no_create).status().code(), Status::Code::kNotFound);
  {
    auto w = OpenOrDie(db, testing::TestOptions(dir));
    ASSERT_TRUE(w->RecordStart(SampleStart("a")).ok());
  }
  auto r = OpenOrDie(db, ro);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->RecordStart(SampleStart("b")).code(), Status::Code::kFailedPrecondition);
  EXPECT_FALSE(r->CheckWritable().ok());
  EXPECT_FALSE(r->MakeCheckpoint().ok());
  EXPECT_EQ(r->ListRuns({})->size(), 1u);
  EXPECT_TRUE(r->Verify()->ok);
}

TEST(AuditLogTest, CheckpointsAreSignedAndVerified) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  AuditOptions o = testing::TestOptions(dir);
  auto log = OpenOrDie(db, o);
  ASSERT_TRUE(log);
  auto empty = log->MakeCheckpoint();  // a checkpoint of the empty log is fine
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->event_count, 0u);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(log->RecordStart(SampleStart("r" + std::to_string(i))).ok());
  auto cp = log->MakeCheckpoint();
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->event_count, 3u);
  EXPECT_EQ(cp->log_id, log->log_id());
  EXPECT_TRUE(VerifyCheckpointSignature(*cp).ok());

  struct stat st {};
  ASSERT_EQ(stat(o.key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto pub = LoadPublicKeyHex(o.key_path + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  EXPECT_EQ(*pub, cp->public_key);

  // A second checkpoint reuses the key.
  ASSERT_TRUE(log->RecordStart(SampleStart("r9")).ok());
  auto cp2 = log->MakeCheckpoint();
  ASSERT_TRUE(cp2.ok());
  EXPECT_EQ(cp2->public_key, cp->public_key);
  EXPECT_EQ(log->Checkpoints()->size(), 3u);

  VerifyOptions vo;
  vo.external = *cp;
  vo.trusted_public_key = *pub;
  auto rep = log->Verify(vo);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->ok) << rep->problem;
  EXPECT_EQ(rep->checkpoints, 4u);

  // The file format round-trips; a changed field breaks the signature.
  auto parsed = Checkpoint::FromJson(cp->ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, *cp);
  Checkpoint forged = *cp;
  forged.event_count = 2;
  EXPECT_FALSE(VerifyCheckpointSignature(forged).ok());
  vo.external = forged;
  EXPECT_FALSE(log->Verify(vo)->ok);
  // Signed by another key than the trusted one.
  vo.external.reset();
  vo.trusted_public_key = std::string(64, '0');
  EXPECT_FALSE(log->Verify(vo)->ok);
  EXPECT_FALSE(Checkpoint::FromJson("{}").ok());
  EXPECT_FALSE(Checkpoint::FromJson("not json").ok());
}

// Issue 12: a checkpoint file with two "event_count"s would mean one count here and perhaps
// another to a different reader; a BOM-prefixed one was not written by safex.
TEST(AuditLogTest, CheckpointFileIsReadStrictly) {
  Checkpoint c;
  c.log_id = std::string(32, 'a');
  c.event_count = 3;
  c.head_hash = std::string(64, 'b');
  c.time_ns = 5;
  c.public_key = std::string(64, 'c');
  c.signature = std::string(128, 'd');
  const std::string text = c.ToJson();
  ASSERT_TRUE(Checkpoint::FromJson(text).ok());
  std::string dup = text;
  dup.insert(dup.find('{') + 1, "\"event_count\": 99,");
  auto r = Checkpoint::FromJson(dup);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key"), std::string::npos) << r.status().message();
  r = Checkpoint::FromJson("\xEF\xBB\xBF" + text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte order mark"), std::string::npos)
      << r.status().message();
}

TEST(AuditLogTest, KeyFileWithLoosePermissionsIsRefused) {
  TempDir dir;
  AuditOptions o = testing::TestOptions(dir);
  auto log = OpenOrDie(dir.File("audit.db"), o);
  ASSERT_TRUE(log->MakeCheckpoint().ok());
  ASSERT_EQ(chmod(o.key_path.c_str(), 0644), 0);
  auto cp = log->MakeCheckpoint();
  EXPECT_EQ(cp.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(cp.status().message().find("chmod 600"), std::string::npos);
}

TEST(AuditLogTest, RunAuditedCommitsStartBeforeTheRunAndEndBeforeReporting) {
  TempDir dir;
  const std::string db = dir.File("audit.db");
  auto log = OpenOrDie(db, testing::TestOptions(dir));
  ASSERT_TRUE(log);
  bool ran = false;
  auto end = RunAudited(*log, SampleStart("audited"), [&] {
    ran = true;
    // Another connection sees the committed start while the run is going on.
    EXPECT_EQ(RawQuery(db, "SELECT state FROM runs WHERE run_id = 'audited'"), "running");
    return SampleEnd("ignored-id-is-replaced");
  });
  ASSERT_TRUE(end.ok()) << end.status().message();
  EXPECT_TRUE(ran);
  EXPECT_EQ(end->run_id, "audited");
  EXPECT_EQ(RawQuery(db, "SELECT state FROM runs WHERE run_id = 'audited'"), "finished");

  // A start that cannot be recorded means the run never happens.
  ran = false;
  AuditFailure failure = AuditFailure::kAfterRun;
  auto refused = RunAudited(
      *log, SampleStart("audited"),  // duplicate id: the start is rejected
      [&] {
        ran = true;
        return RunEnd{};
      },
      &failure);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(ran);
  EXPECT_EQ(failure, AuditFailure::kBeforeRun);
}

TEST(AuditLogTest, NewRunIdsAreValidUniqueUuidV7) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = NewRunId();
    ASSERT_TRUE(IsValidRunId(id)) << id;
    ASSERT_EQ(id.size(), 36u);
    EXPECT_EQ(id[14], '7');
    EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
    EXPECT_TRUE(ids.insert(id).second);
  }
}

TEST(AuditLogTest, HostileStringsAreStoredByteForByte) {
  auto log = OpenOrDie(":memory:");
  RunStart s = SampleStart("hostile");
  s.argv = {"\x1b[2J\x1b[31mpwned", "\xff\xfe", "a'b\"c", "", "line\nbreak"};
  s.policy_name = "p\x1b]0;title\x07";
  ASSERT_TRUE(log->RecordStart(s).ok());
  auto d = log->GetRun("hostile");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->run.argv, s.argv);
  EXPECT_EQ(d->run.policy_name, s.policy_name);
  EXPECT_TRUE(log->Verify()->ok);
}

}  // namespace
}  // namespace safex::audit
