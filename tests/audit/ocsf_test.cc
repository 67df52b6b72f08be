// The OCSF export of runs (audit/ocsf.h): runs recorded in a :memory: log, read back with
// ListRuns as the CLI does, and their events checked field by field against the mapping in
// docs/audit.md ("Export as OCSF").
#include "audit/ocsf.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/json_bytes.h"
#include "tests/audit/audit_test_util.h"

namespace safex::audit {
namespace {

using nlohmann::json;
using testing::SampleEnd;
using testing::SampleStart;

constexpr int64_t kStartNs = 1'800'000'000'123'456'789;  // 2027-01-15, not on a millisecond
constexpr int64_t kStartMs = 1'800'000'000'123;
const OcsfSource kSource{"0.1.0", "builder-7"};

class OcsfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = AuditLog::Open(":memory:");
    ASSERT_TRUE(log.ok()) << log.status().message();
    log_ = std::move(log).value();
  }

  void Start(const std::string& id, std::vector<std::string> argv = {}) {
    RunStart s = SampleStart(id);
    s.start_time_ns = kStartNs;
    if (!argv.empty()) s.argv = std::move(argv);
    ASSERT_TRUE(log_->RecordStart(s).ok());
  }

  void End(RunEnd e) {
    e.end_time_ns = kStartNs + 2'500'000'000;
    ASSERT_TRUE(log_->RecordEnd(e).ok());
  }

  // The one run with this id, as the exporter reads it.
  RunSummary Run(const std::string& id) {
    auto runs = log_->ListRuns({});
    EXPECT_TRUE(runs.ok()) << runs.status().message();
    for (const auto& r : *runs) {
      if (r.run_id == id) return r;
    }
    ADD_FAILURE() << "no run " << id;
    return {};
  }

  json Event(const std::string& id) { return OcsfEventFromRun(Run(id), kSource); }

  std::unique_ptr<AuditLog> log_;
};

TEST_F(OcsfTest, FinishedRunIsALaunchOfProcessActivity) {
  Start("run-ok");
  End(SampleEnd("run-ok"));
  json e = Event("run-ok");
  EXPECT_EQ(e["class_uid"], 1007);
  EXPECT_EQ(e["class_name"], "Process Activity");
  EXPECT_EQ(e["category_uid"], 1);
  EXPECT_EQ(e["category_name"], "System Activity");
  EXPECT_EQ(e["activity_id"], 1);
  EXPECT_EQ(e["activity_name"], "Launch");
  EXPECT_EQ(e["type_uid"], 100701);
  EXPECT_EQ(e["type_name"], "Process Activity: Launch");
  EXPECT_EQ(e["time"], kStartMs);
  EXPECT_EQ(e["start_time"], kStartMs);
  EXPECT_EQ(e["end_time"], kStartMs + 2500);
  EXPECT_EQ(e["duration"], 2500);
  EXPECT_EQ(e["status_id"], 1);
  EXPECT_EQ(e["status"], "Success");
  EXPECT_EQ(e["status_code"], "ok");
  EXPECT_EQ(e["severity_id"], 1);
  EXPECT_EQ(e["severity"], "Informational");
  EXPECT_EQ(e["exit_code"], 0);
  EXPECT_EQ(e["message"], "safex run under policy python-untrusted: ok");
}

TEST_F(OcsfTest, MetadataActorDeviceAndProcess) {
  Start("run-ids");
  End(SampleEnd("run-ids"));
  json e = Event("run-ids");
  EXPECT_EQ(e["metadata"]["version"], "1.1.0");
  EXPECT_EQ(e["metadata"]["uid"], "run-ids");
  EXPECT_EQ(e["metadata"]["sequence"], 1);
  EXPECT_EQ(e["metadata"]["log_name"], "safex-audit");
  EXPECT_EQ(e["metadata"]["product"],
            (json{{"name", "safex"}, {"vendor_name", "safex"}, {"version", "0.1.0"}}));
  EXPECT_FALSE(e["metadata"].contains("correlation_uid"));
  EXPECT_EQ(e["actor"]["user"]["uid"], "1000");  // OCSF user.uid is a string
  EXPECT_EQ(e["actor"]["process"]["pid"], 4242);
  EXPECT_EQ(e["device"], (json{{"type_id", 0}, {"type", "Unknown"}, {"hostname", "builder-7"}}));
  const json& p = e["process"];
  EXPECT_EQ(p["uid"], "run-ids");
  EXPECT_EQ(p["name"], "python3");
  EXPECT_EQ(p["cmd_line"], "python3 -c 'print('\\''hi'\\'')'");
  EXPECT_EQ(p["created_time"], kStartMs);
  EXPECT_EQ(p["terminated_time"], kStartMs + 2500);
  EXPECT_EQ(p["sandbox"], "python-untrusted");
  // Not recorded, so not invented.
  EXPECT_FALSE(p.contains("pid"));
  EXPECT_FALSE(p.contains("user"));
}

TEST_F(OcsfTest, SafexFieldsAreUnmappedAndExact) {
  Start("run-u");
  End(SampleEnd("run-u"));
  const json u = Event("run-u")["unmapped"];
  EXPECT_EQ(u["state"], "finished");
  EXPECT_EQ(u["verdict"], "ok");
  EXPECT_EQ(u["policy"]["name"], "python-untrusted");
  EXPECT_EQ(u["policy"]["source_digest"], std::string(64, 'a'));
  EXPECT_EQ(u["plan_digest"], std::string(64, 'b'));
  EXPECT_EQ(u["backend"], "gvisor");
  EXPECT_EQ(u["backend_mode"], "systrap");
  EXPECT_EQ(u["argv"], (json{"python3", "-c", "print('hi')"}));
  EXPECT_EQ(u["start_ns"], kStartNs);
  EXPECT_EQ(u["end_ns"], kStartNs + 2'500'000'000);
  EXPECT_EQ(u["start_seq"], 1);
  EXPECT_EQ(u["end_seq"], 2);
  EXPECT_EQ(u["requester_gid"], 1000);
  EXPECT_EQ(u["wall_ns"], 150'000'000);
  EXPECT_EQ(u["cpu_ns"], 100'000'000);
  EXPECT_EQ(u["peak_memory_bytes"], 30 << 20);
  EXPECT_EQ(u["stdout"],
            (json{{"bytes", 3}, {"sha256", std::string(64, 'c')}, {"truncated", false}}));
  EXPECT_EQ(u["stderr"]["sha256"], std::string(64, 'd'));
  EXPECT_EQ(u["validator_results"][0]["outcome"], "accepted");
  EXPECT_EQ(u["limits_fired"], json::array());
  EXPECT_EQ(u["denied_egress"], json::array());
  EXPECT_FALSE(u.contains("signal"));
}

TEST_F(OcsfTest, LimitVerdictIsAFailureOfMediumSeverity) {
  Start("run-mem");
  End(SampleEnd("run-mem", Verdict::kMemoryLimit));
  json e = Event("run-mem");
  EXPECT_EQ(e["status_id"], 2);
  EXPECT_EQ(e["status"], "Failure");
  EXPECT_EQ(e["status_code"], "memory-limit");
  EXPECT_EQ(e["severity_id"], 3);
  EXPECT_EQ(e["severity"], "Medium");
  EXPECT_FALSE(e.contains("exit_code"));  // killed: no exit status
  EXPECT_EQ(e["unmapped"]["signal"], 9);
  EXPECT_EQ(e["unmapped"]["limits_fired"], json{"memory"});
}

TEST_F(OcsfTest, DeniedEgressIsHighSeverity) {
  Start("run-net");
  RunEnd end = SampleEnd("run-net");
  end.denied_egress = {{"198.18.0.7:443/tcp", 3}};
  End(end);
  json e = Event("run-net");
  EXPECT_EQ(e["status_id"], 1);  // the run itself succeeded
  EXPECT_EQ(e["severity_id"], 4);
  EXPECT_EQ(e["severity"], "High");
  EXPECT_EQ(e["unmapped"]["denied_egress"],
            (json{{{"destination", "198.18.0.7:443/tcp"}, {"count", 3}}}));
}

TEST_F(OcsfTest, RefusalIsAFailedLaunchWithItsReason) {
  Refusal r;
  r.run_id = "run-no";
  r.requester = {1001, 1001, std::nullopt};
  r.policy_name = "python-untrusted";
  r.policy_source_digest = std::string(64, 'e');
  r.argv = {"rm", "-rf", "/"};
  r.reason = "memory 64G above the host ceiling 8G";
  r.time_ns = kStartNs;
  ASSERT_TRUE(log_->RecordRefusal(r).ok());
  json e = Event("run-no");
  EXPECT_EQ(e["activity_id"], 1);
  EXPECT_EQ(e["type_uid"], 100701);
  EXPECT_EQ(e["time"], kStartMs);
  EXPECT_EQ(e["status_id"], 2);
  EXPECT_EQ(e["status_code"], "refused");
  EXPECT_NE(e["status_detail"].get<std::string>().find(r.reason), std::string::npos)
      << e["status_detail"];
  EXPECT_EQ(e["severity_id"], 3);
  EXPECT_EQ(e["actor"]["user"]["uid"], "1001");
  EXPECT_FALSE(e["actor"].contains("process"));  // no pid recorded
  // Nothing ran: no end, no process times, no exit code.
  EXPECT_FALSE(e.contains("end_time"));
  EXPECT_FALSE(e.contains("duration"));
  EXPECT_FALSE(e.contains("exit_code"));
  EXPECT_FALSE(e["process"].contains("created_time"));
  EXPECT_EQ(e["process"]["cmd_line"], "rm -rf /");
  EXPECT_EQ(e["unmapped"]["state"], "refused");
  EXPECT_EQ(e["unmapped"]["reason"], r.reason);
  EXPECT_EQ(e["unmapped"]["policy"]["source_digest"], std::string(64, 'e'));
  EXPECT_FALSE(e["unmapped"].contains("end_seq"));
}

TEST_F(OcsfTest, InterruptedRunIsAFailureClosedByRecovery) {
  Start("run-int");
  Interrupted i;
  i.run_id = "run-int";
  i.reason = "supervisor restarted";
  i.time_ns = kStartNs + 60'000'000'000;
  ASSERT_TRUE(log_->RecordInterrupted(i).ok());
  json e = Event("run-int");
  EXPECT_EQ(e["status_id"], 2);
  EXPECT_EQ(e["status_code"], "interrupted");
  EXPECT_NE(e["status_detail"].get<std::string>().find("supervisor restarted"), std::string::npos);
  EXPECT_EQ(e["severity_id"], 3);
  EXPECT_EQ(e["end_time"], kStartMs + 60'000);
  EXPECT_EQ(e["process"]["created_time"], kStartMs);
  // The recovery's time is not when the program ended.
  EXPECT_FALSE(e["process"].contains("terminated_time"));
  EXPECT_EQ(e["unmapped"]["state"], "interrupted");
}

TEST_F(OcsfTest, RunningRunHasUnknownStatus) {
  Start("run-now");
  json e = Event("run-now");
  EXPECT_EQ(e["status_id"], 0);
  EXPECT_EQ(e["status"], "Unknown");
  EXPECT_EQ(e["status_code"], "running");
  EXPECT_EQ(e["severity_id"], 1);
  EXPECT_FALSE(e.contains("end_time"));
  EXPECT_FALSE(e["unmapped"].contains("verdict"));
}

TEST_F(OcsfTest, NonUtf8ArgvIsEscapedForPeopleAndExactInUnmapped) {
  const std::string bad = "\xff\xfe\x1b[2J";
  Start("run-bytes", {"/usr/bin/sh", "-c", bad, "a b"});
  End(SampleEnd("run-bytes"));
  json e = Event("run-bytes");
  // Serialising must not throw: every string is valid UTF-8.
  std::string line = e.dump(-1, ' ', false, json::error_handler_t::strict);
  EXPECT_EQ(json::parse(line), e);
  const std::string cmd = e["process"]["cmd_line"];
  EXPECT_EQ(cmd.find('\x1b'), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("\\xff\\xfe"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("'a b'"), std::string::npos) << cmd;
  EXPECT_EQ(e["process"]["name"], "sh");
  const json& argv = e["unmapped"]["argv"];
  ASSERT_EQ(argv.size(), 4u);
  EXPECT_TRUE(argv[2].is_object());
  auto back = BytesFromJson(argv[2]);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, bad);
  EXPECT_EQ(argv[3], "a b");
}

TEST_F(OcsfTest, SessionCommandCorrelatesThroughItsSession) {
  RunSummary run;  // hand-made: the mapping is pure, and a session needs no log here
  run.run_id = "run-s";
  run.state = "running";
  run.purpose = SessionExecPurpose("sess-1", 3);
  json e = OcsfEventFromRun(run, kSource);
  EXPECT_EQ(e["metadata"]["correlation_uid"], "sess-1");
  EXPECT_EQ(e["unmapped"]["session_id"], "sess-1");
  EXPECT_EQ(e["unmapped"]["session_exec"], 3);
  EXPECT_EQ(e["unmapped"]["purpose"], "session sess-1 exec 3");
}

TEST(OcsfVerdictTest, EveryVerdictHasAStatusAndAKnownSeverity) {
  for (const auto& info : AllVerdicts()) {
    RunSummary run;
    run.run_id = "run-v";
    run.state = info.verdict == Verdict::kRefused ? "refused" : "finished";
    run.verdict = std::string(info.name);
    json e = OcsfEventFromRun(run, {});
    EXPECT_EQ(e["status_id"], info.verdict == Verdict::kOk ? 1 : 2) << info.name;
    EXPECT_GE(e["severity_id"].get<int>(), 1) << info.name;
    EXPECT_LE(e["severity_id"].get<int>(), 3) << info.name;
    EXPECT_EQ(e["status_code"], info.name);
    EXPECT_FALSE(e["metadata"]["product"].contains("version"));
    EXPECT_FALSE(e["device"].contains("hostname"));
  }
}

TEST(OcsfVerdictTest, UnknownVerdictIsNotGuessed) {
  RunSummary run;
  run.run_id = "run-x";
  run.state = "finished";
  run.verdict = "from-the-future";
  json e = OcsfEventFromRun(run, {});
  EXPECT_EQ(e["status_id"], 0);
  EXPECT_EQ(e["severity_id"], 0);
  EXPECT_EQ(e["status_code"], "from-the-future");
}

// The export's shape: every run, oldest first, one event per line, each line JSON.
TEST_F(OcsfTest, JsonLinesOfEveryRunParse) {
  Start("run-a");
  End(SampleEnd("run-a"));
  Start("run-b", {"sh", "-c", "\xc3\x28"});
  Refusal r;
  r.run_id = "run-c";
  r.reason = "busy";
  r.time_ns = kStartNs + 1;
  ASSERT_TRUE(log_->RecordRefusal(r).ok());
  auto runs = log_->ListRuns({});
  ASSERT_TRUE(runs.ok());
  std::string out;
  for (auto it = runs->rbegin(); it != runs->rend(); ++it) {
    out += OcsfEventFromRun(*it, kSource).dump(-1, ' ', false, json::error_handler_t::strict);
    out += "\n";
  }
  std::istringstream lines(out);
  std::string line;
  std::vector<std::string> ids;
  while (std::getline(lines, line)) {
    json e = json::parse(line);  // throws, failing the test, when a line is not JSON
    EXPECT_EQ(e["class_uid"], 1007);
    ids.push_back(e["metadata"]["uid"]);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"run-a", "run-b", "run-c"}));
}

}  // namespace
}  // namespace safex::audit
