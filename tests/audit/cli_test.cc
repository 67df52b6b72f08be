// `safex audit ...` end to end: the real binary on a real log. Exit statuses: 0 ok, 1 verify
// failure / not found, 2 usage, 3 unreadable log.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "tests/audit/audit_test_util.h"
#include "tests/support/test_support.h"

namespace safex::audit {
namespace {

using testing::ProcResult;
using testing::SampleEnd;
using testing::SampleStart;
using testing::TempDir;

class AuditCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("audit.db");
    key_ = dir_.File("audit.key");
    auto log = AuditLog::Open(db_, testing::TestOptions(dir_));
    ASSERT_TRUE(log.ok()) << log.status().message();
    RunStart s = SampleStart("aaaa-1111", "python-untrusted");
    ASSERT_TRUE((*log)->RecordStart(s).ok());
    ASSERT_TRUE((*log)->RecordEnd(SampleEnd("aaaa-1111", Verdict::kMemoryLimit)).ok());
    RunStart hostile = SampleStart("bbbb-2222", "node-untrusted");
    hostile.argv = {"sh", "-c", "\x1b[2J\x1b[31mgotcha", "a,b \"q\""};
    ASSERT_TRUE((*log)->RecordStart(hostile).ok());
    ASSERT_TRUE((*log)->RecordEnd(SampleEnd("bbbb-2222")).ok());
    Refusal r;
    r.run_id = "cccc-3333";
    r.reason = "policy \x1b[1mnot found";
    ASSERT_TRUE((*log)->RecordRefusal(r).ok());
  }

  ProcResult Safex(std::vector<std::string> args, bool with_db = true) {
    std::vector<std::string> argv = {safex::testing::SafexBinary(), "audit"};
    argv.insert(argv.end(), args.begin(), args.end());
    if (with_db) {
      argv.push_back("--audit-db");
      argv.push_back(db_);
      argv.push_back("--key");
      argv.push_back(key_);
    }
    return testing::RunProcess(argv);
  }

  TempDir dir_;
  std::string db_;
  std::string key_;
};

TEST_F(AuditCliTest, ListTableEscapesHostileStrings) {
  ProcResult r = Safex({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("RUN_ID"), std::string::npos);
  EXPECT_NE(r.out.find("aaaa-1111"), std::string::npos);
  EXPECT_NE(r.out.find("memory-limit"), std::string::npos);
  EXPECT_NE(r.out.find("refused"), std::string::npos);
  EXPECT_NE(r.out.find("\\x1b[31mgotcha"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "raw escape reached the terminal";
  // Newest first: the refusal, then bbbb, then aaaa.
  EXPECT_LT(r.out.find("cccc-3333"), r.out.find("bbbb-2222"));
  EXPECT_LT(r.out.find("bbbb-2222"), r.out.find("aaaa-1111"));
}

TEST_F(AuditCliTest, ListFiltersAndFormats) {
  ProcResult r = Safex({"list", "--verdict", "memory-limit", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["run_id"], "aaaa-1111");
  EXPECT_EQ(j[0]["verdict"], "memory-limit");
  EXPECT_EQ(j[0]["limits_fired"][0], "memory");
  EXPECT_EQ(j[0]["signal"], 9);

  r = Safex({"list", "--policy", "node-untrusted", "--json"});
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["argv"][2], "\x1b[2J\x1b[31mgotcha");  // JSON keeps the bytes, escaped

  r = Safex({"list", "--since", "1h", "--until", "now", "--uid", "1000", "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("run_id,state,verdict,", 0), 0u);
  EXPECT_NE(r.out.find("\r\n"), std::string::npos);
  // The argv field holds a comma and quotes: quoted, inner quotes doubled.
  EXPECT_NE(r.out.find("\"[\"\"sh\"\",\"\"-c\"\""), std::string::npos) << r.out;

  r = Safex({"list", "--since", "2099-01-01", "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 0u);
  r = Safex({"list", "--limit", "1", "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
}

TEST_F(AuditCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Safex({"list", "--verdict", "bogus"}).exit_code, 2);
  EXPECT_EQ(Safex({"list", "--since", "last tuesday"}).exit_code, 2);
  EXPECT_EQ(Safex({"list", "--json", "--csv"}).exit_code, 2);
  EXPECT_EQ(Safex({"export"}).exit_code, 2);
  EXPECT_EQ(Safex({"export", "--format", "xml"}).exit_code, 2);
  EXPECT_EQ(Safex({"export", "--json", "--csv"}).exit_code, 2);
  EXPECT_EQ(Safex({"show"}).exit_code, 2);
  EXPECT_EQ(Safex({"show", "bad id!"}).exit_code, 2);
}

TEST_F(AuditCliTest, ShowFindsByPrefixAndEscapes) {
  ProcResult r = Safex({"show", "bbbb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bbbb-2222"), std::string::npos);
  EXPECT_NE(r.out.find("event 3:"), std::string::npos);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  r = Safex({"show", "cccc-3333"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("policy \\x1b[1mnot found"), std::string::npos) << r.out;
  r = Safex({"show", "aaaa-1111", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["events"].size(), 2u);
  EXPECT_EQ(Safex({"show", "zzzz"}).exit_code, 1);
}

TEST_F(AuditCliTest, UnreadableLogExitsThree) {
  ProcResult r = testing::RunProcess(
      {safex::testing::SafexBinary(), "audit", "list", "--audit-db", dir_.File("missing.db")});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("missing.db"), std::string::npos);
  std::ofstream(dir_.File("garbage.db")) << std::string(5000, 'x');
  r = testing::RunProcess(
      {safex::testing::SafexBinary(), "audit", "verify", "--audit-db", dir_.File("garbage.db")});
  EXPECT_EQ(r.exit_code, 3);
  // The auditors' verbs never create a log.
  EXPECT_NE(access(dir_.File("missing.db").c_str(), F_OK), 0);
}

TEST_F(AuditCliTest, CheckpointVerifyAndTamper) {
  const std::string cp = dir_.File("cp.json");
  ProcResult r = Safex({"checkpoint", "--out", cp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("5 events"), std::string::npos) << r.out;
  r = Safex({"verify", "--checkpoint", cp});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK: 5 events"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoints verified: 2"), std::string::npos) << r.out;

  // Edit event 2 in a copy: verify names it.
  const std::string copy = dir_.File("copy.db");
  testing::CopyDb(db_, copy);
  ASSERT_EQ(testing::RawSql(copy,
                            "DROP TRIGGER events_no_update; "
                            "UPDATE events SET verdict = 'ok' WHERE seq = 2"),
            "");
  r = testing::RunProcess(
      {safex::testing::SafexBinary(), "audit", "verify", "--audit-db", copy, "--key", key_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("FAILED: event 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first bad event: 2"), std::string::npos) << r.out;

  // Truncate a copy and remove its checkpoints: the integrity marker the checkpoint left
  // still tells...
  const std::string cut = dir_.File("cut.db");
  testing::CopyDb(db_, cut);
  ASSERT_EQ(testing::RawSql(cut,
                            "DROP TRIGGER events_no_delete; DROP TRIGGER "
                            "checkpoints_no_delete; DELETE FROM events WHERE seq > 3; "
                            "DELETE FROM checkpoints"),
            "");
  r = testing::RunProcess(
      {safex::testing::SafexBinary(), "audit", "verify", "--audit-db", cut, "--key", key_});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("integrity marker"), std::string::npos) << r.out;
  // ...until it is removed too: then only the kept file can tell.
  ASSERT_EQ(testing::RawSql(cut, "DELETE FROM integrity_marker"), "");
  r = testing::RunProcess(
      {safex::testing::SafexBinary(), "audit", "verify", "--audit-db", cut, "--key", key_});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("note: no checkpoint"), std::string::npos) << r.out;
  r = testing::RunProcess({safex::testing::SafexBinary(), "audit", "verify", "--audit-db", cut,
                           "--key", key_, "--checkpoint", cp});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;

  std::ofstream(dir_.File("bad.json")) << "{ not a checkpoint";
  EXPECT_EQ(Safex({"verify", "--checkpoint", dir_.File("bad.json")}).exit_code, 2);
}

// Issue 12: with --key naming a key that no checkpoint has made yet, verify exited 3 without
// checking anything.
TEST_F(AuditCliTest, VerifyChecksTheChainOfALogNeverCheckpointed) {
  ASSERT_NE(access((key_ + ".pub").c_str(), F_OK), 0);
  ProcResult r = Safex({"verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK: 5 events"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoints verified: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: no checkpoint"), std::string::npos) << r.out;
  // It is a real check: an edited event still fails it.
  ASSERT_EQ(testing::RawSql(db_,
                            "DROP TRIGGER events_no_update; "
                            "UPDATE events SET verdict = 'ok' WHERE seq = 2"),
            "");
  r = Safex({"verify"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED: event 2"), std::string::npos) << r.out;
}

TEST_F(AuditCliTest, VerifyOfSignedCheckpointsNeedsTheNamedPublicKey) {
  ASSERT_EQ(Safex({"checkpoint"}).exit_code, 0);
  ASSERT_EQ(unlink((key_ + ".pub").c_str()), 0);
  // Signatures exist but the key the auditor named cannot be read: that is not a pass.
  ProcResult r = Safex({"verify"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("audit.key.pub"), std::string::npos) << r.err;
}

TEST_F(AuditCliTest, CheckpointRefusesALogThatDoesNotVerify) {
  ASSERT_EQ(testing::RawSql(db_,
                            "DROP TRIGGER events_no_update; "
                            "UPDATE events SET verdict = 'ok' WHERE seq = 2"),
            "");
  ProcResult r = Safex({"checkpoint", "--out", dir_.File("cp.json")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("refusing to sign"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("first bad event: 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("checkpoint:"), std::string::npos) << r.out;
  EXPECT_EQ(testing::RawQuery(db_, "SELECT count(*) FROM checkpoints"), "0");
  EXPECT_NE(access(dir_.File("cp.json").c_str(), F_OK), 0);
}

TEST_F(AuditCliTest, ExportEveryEvent) {
  ProcResult r = Safex({"export", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["seq"], n + 1);
    EXPECT_EQ(j["hash"].get<std::string>().size(), 64u);
    ++n;
  }
  EXPECT_EQ(n, 5);
  r = Safex({"export", "--csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("seq,kind,run_id,time_ns,", 0), 0u);
  // Header + 5 events, CRLF-terminated (embedded newlines would be inside quotes).
  size_t crlf = 0;
  for (size_t p = r.out.find("\r\n"); p != std::string::npos; p = r.out.find("\r\n", p + 2)) {
    ++crlf;
  }
  EXPECT_EQ(crlf, 6u);
}

TEST_F(AuditCliTest, ExportFormatFlagAndItsAliases) {
  ProcResult alias = Safex({"export", "--json"});
  ProcResult format = Safex({"export", "--format", "json"});
  ProcResult both = Safex({"export", "--format", "json", "--json"});  // agree: fine
  ASSERT_EQ(format.exit_code, 0) << format.err;
  EXPECT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(alias.out, format.out);
  EXPECT_EQ(both.out, format.out);
  EXPECT_EQ(Safex({"export", "--format", "csv"}).out, Safex({"export", "--csv"}).out);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"export", "--json", "--format", "csv"},
                                             {"export", "--csv", "--format", "ocsf"},
                                             {"export", "--format", "ocsf", "--json"}}) {
    ProcResult r = Safex(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_NE(r.err.find("different formats"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(AuditCliTest, ExportOcsfIsOneEventPerRunOldestFirst) {
  ProcResult r = Safex({"export", "--format", "ocsf"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> ids;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["class_uid"], 1007);
    EXPECT_EQ(j["type_uid"], 100701);
    EXPECT_EQ(j["metadata"]["product"]["version"], "0.1.0");
    EXPECT_TRUE(j["device"].contains("hostname"));
    ids.push_back(j["metadata"]["uid"]);
    if (ids.back() == "bbbb-2222") {
      // The hostile argv: escaped for people, exact in unmapped.
      EXPECT_EQ(j["process"]["cmd_line"].get<std::string>().find('\x1b'), std::string::npos);
      EXPECT_EQ(j["unmapped"]["argv"][2], "\x1b[2J\x1b[31mgotcha");
    }
    if (ids.back() == "cccc-3333") {
      EXPECT_EQ(j["status_code"], "refused");
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"aaaa-1111", "bbbb-2222", "cccc-3333"}));
}

}  // namespace
}  // namespace safex::audit
