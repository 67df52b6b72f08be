// The containment suite as tests (label `containment`):
//   Containment.EveryCaseOnEveryBackend    the whole catalogue on every backend through `safex
//                                          run`, and on gVisor through `safex submit` to a
//                                          `safex serve` the suite starts, in parallel; writes
//                                          containment.md (and docs/ with
//                                          SAFEX_UPDATE_CONTAINMENT_DOC=1)
//   ContainmentSelfTest.*                   probes run with no sandbox at all must see their own
//                                          success, so the suite can fail
// Environment: SAFEX_CONTAINMENT_JOBS (runs at once, default 4), SAFEX_CONTAINMENT_CASES
// (comma-separated ids to run, default all), SAFEX_CONTAINMENT_COLUMNS (comma-separated column
// names to run, default all; `submit` for the column through the service).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/containment/host_listeners.h"
#include "tests/containment/process_runner.h"
#include "tests/containment/suite.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex::containment {
namespace {

std::string ProbesDir() { return SAFEX_CONTAINMENT_PROBES_DIR; }

std::vector<std::string> SplitComma(const char* s) {
  std::vector<std::string> out;
  if (s == nullptr) return out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

TEST(Containment, EveryCaseOnEveryBackend) {
  SAFEX_REQUIRE_ROOT();
  SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
  SuiteOptions o;
  o.safex = testing::SafexBinary();
  o.source_dir = testing::SourceDir();
  o.probes_dir = ProbesDir();
  if (const char* j = getenv("SAFEX_CONTAINMENT_JOBS")) o.jobs = std::max(1, atoi(j));
  o.only_cases = SplitComma(getenv("SAFEX_CONTAINMENT_CASES"));
  o.only_columns = SplitComma(getenv("SAFEX_CONTAINMENT_COLUMNS"));
  Suite suite(o);
  ASSERT_TRUE(suite.SetUp()) << suite.error();
  suite.DiscoverBackends();
  // The bar: gVisor must run here. Other backends may be absent (their column says so).
  ASSERT_TRUE(suite.backends().at("gvisor").available) << suite.backends().at("gvisor").reason;
  // Native is for trusted code: the untrusted example on it is refused before anything runs.
  if (suite.backends().at("native").available) {
    EXPECT_NE(suite.backends().at("native").untrusted_refusal, "")
        << "an untrusted policy was not refused on native";
  }
  suite.RunAll();
  suite.CheckHost();

  std::string report = suite.Report();
  std::ofstream(SAFEX_CONTAINMENT_REPORT) << report;
  std::cout << "[ report ] " << SAFEX_CONTAINMENT_REPORT << "\n";
  const char* update = getenv("SAFEX_UPDATE_CONTAINMENT_DOC");
  if (update != nullptr && std::string(update) == "1") {
    std::string doc = testing::SourceDir() + "/docs/containment.md";
    std::ofstream(doc) << report;
    std::cout << "[ report ] written to " << doc << "\n";
  }

  for (const auto& [id, row] : suite.cells()) {
    for (const auto& [backend, cell] : row) {
      std::cout << "[ " << id << " / " << backend << " ] " << cell.text << "\n";
      if (cell.state != CellState::kNotContained) continue;
      std::string all;
      for (const std::string& f : cell.failures) all += "\n    " + f;
      ADD_FAILURE() << id << " on " << backend << " is not contained:" << all;
    }
  }
  // The bar on gVisor, on both its platforms: every case contained (or honestly not runnable
  // yet), none refused.
  for (const auto& [id, row] : suite.cells()) {
    for (const char* column : {"gvisor", "gvisor (ptrace)"}) {
      auto it = row.find(column);
      if (it == row.end()) continue;
      EXPECT_TRUE(it->second.state == CellState::kContained ||
                  it->second.state == CellState::kNotYetRunnable ||
                  it->second.state == CellState::kNotContained)  // reported above
          << id << " on " << column << ": " << it->second.text;
    }
  }
  for (const std::string& f : suite.host_failures()) ADD_FAILURE() << "host: " << f;
  std::cout << "[ timing ] " << suite.seconds() << " s for the runs\n";
}

// ---- The suite must be able to fail: without a sandbox, probes see their own success.

class ContainmentSelfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    secret_ = dir_.Write("secret.txt", "throwaway secret\n");
    target_ = dir_.Write("target.txt", "throwaway target\n");
    file_fd_ = open(secret_.c_str(), O_RDONLY | O_CLOEXEC);
    dir_fd_ = open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(file_fd_, 0);
    ASSERT_GE(dir_fd_, 0);
  }
  void TearDown() override {
    close(file_fd_);
    close(dir_fd_);
  }

  // Runs a probe with plain fork/exec: no sandbox, the throwaway directory as cwd, two leaked
  // descriptors and a marker in the environment.
  nlohmann::json Direct(std::vector<std::string> argv, int* status) {
    ProcessOptions po;
    argv[0] = ProbesDir() + "/" + argv[0];
    po.argv = argv;
    po.env = {"PATH=/usr/bin:/bin", "SELFTEST_MARKER=" + marker_};
    po.leaked_fds = {file_fd_, dir_fd_};
    po.cwd = dir_.path();
    po.deadline = std::chrono::seconds(60);
    ProcessResult r = RunWatched(po);
    *status = r.status;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << argv[0] << ": " << r.out << r.err;
    return j.is_object() ? j : nlohmann::json::object();
  }

  void ExpectEscaped(const nlohmann::json& j, int status) {
    EXPECT_EQ(j.value("escaped", false), true) << j.dump();
    EXPECT_EQ(status, 1) << j.dump();
  }

  testing::TempDir dir_{"/tmp/sxtest-selftest-"};
  std::string secret_, target_;
  std::string marker_ = "selftest-marker-5afe";
  int file_fd_ = -1, dir_fd_ = -1;
};

TEST_F(ContainmentSelfTest, FileProbesReachTheHost) {
  int st;
  nlohmann::json f1 = Direct({"f1_host_secrets", secret_}, &st);
  ExpectEscaped(f1, st);
  EXPECT_EQ(f1["obs"].value(secret_, ""), "OK");

  nlohmann::json f2 = Direct({"f2_environ", marker_}, &st);
  ExpectEscaped(f2, st);

  nlohmann::json f3 = Direct({"f3_proc_root", secret_}, &st);
  ExpectEscaped(f3, st);
  EXPECT_NE(f3["obs"].value("reached", ""), "");

  FileState before = FileState::Of(target_);
  std::string created = dir_.Join("created.txt");
  nlohmann::json f4 = Direct({"f4_write_outside", created, "=" + target_}, &st);
  ExpectEscaped(f4, st);
  // The suite's host check sees the change (what Check "host file changed" relies on).
  EXPECT_FALSE(FileState::Of(target_) == before);
  EXPECT_TRUE(FileState::Of(created).exists);
}

TEST_F(ContainmentSelfTest, DescriptorProbesFindTheLeakedOnes) {
  int st;
  nlohmann::json s1 = Direct({"s1_inherited_fds"}, &st);
  ExpectEscaped(s1, st);
  EXPECT_GE(s1["obs"].value("extra", 0), 2);

  nlohmann::json c2 = Direct({"c2_leaked_fd_cwd", secret_}, &st);
  ExpectEscaped(c2, st);
  EXPECT_GE(c2["obs"].value("dir_fds", 0), 1);
}

TEST_F(ContainmentSelfTest, NetworkProbesReachHostListeners) {
  HostListeners l;
  std::string tcp = l.Tcp("127.0.0.1");
  std::string unix_sock = l.Unix(dir_.Join("s.sock"));
  std::string abstract = l.Abstract("safex-selftest-" + std::to_string(getpid()));
  ASSERT_FALSE(tcp.empty() || unix_sock.empty() || abstract.empty()) << l.error();
  l.Start();
  int st;
  nlohmann::json n4 = Direct({"n4_host_loopback", "--no-defaults", tcp, unix_sock, abstract}, &st);
  ExpectEscaped(n4, st);
  nlohmann::json n1 = Direct({"n1_egress_denied", tcp}, &st);
  ExpectEscaped(n1, st);
  // The listeners counted every connection: the suite's "host endpoint reached" check can fail.
  for (int i = 0; i < 50 && l.TotalHits() < 4; ++i) usleep(20000);
  EXPECT_EQ(l.Hits(tcp), 2);
  EXPECT_EQ(l.Hits(unix_sock), 1);
  EXPECT_EQ(l.Hits(abstract), 1);
}

TEST_F(ContainmentSelfTest, CompatSyscallProbeWorksOnTheHostKernel) {
  int st;
  nlohmann::json p8 = Direct({"p8_compat_abi", dir_.path()}, &st);
  // The host kernel implements int 0x80 (IA-32 emulation): the directory appears.
  ExpectEscaped(p8, st);
  struct stat s;
  EXPECT_EQ(stat(dir_.Join("safex-p8-i386").c_str(), &s), 0);
}

// The suite reads reports and probe lines that hostile programs and unfinished runs shape: odd
// shapes are empty answers, never a crash (a missing key under the const operator[] of
// nlohmann::json is undefined behaviour - it once ended the suite in a SEGFAULT).
TEST(ContainmentRecordTest, OddReportsAndProbeLinesAreEmptyAnswers) {
  for (const char* report :
       {"null", "[]", "\"x\"", "{}", "{\"stdout\":{}}", "{\"stdout\":[1]}",
        "{\"stdout\":{\"text\":7}}", "{\"verdict\":1,\"run_id\":[],\"reason\":{}}"}) {
    RunRecord r;
    r.report = nlohmann::json::parse(report);
    EXPECT_EQ(r.StdoutText(), "") << report;
    EXPECT_EQ(r.verdict(), "") << report;
    EXPECT_EQ(r.run_id(), "") << report;
    EXPECT_EQ(r.Reason(), "") << report;
  }
  for (const char* probe : {"null", "{}", "{\"obs\":[]}", "{\"obs\":\"x\"}",
                            "{\"obs\":{\"k\":[1]}}", "{\"result\":3}"}) {
    RunRecord r;
    r.probe = nlohmann::json::parse(probe);
    EXPECT_EQ(r.Obs("k").empty() || r.Obs("k") == "[1]", true) << probe;
    EXPECT_EQ(r.ObsInt("k"), -1) << probe;
    EXPECT_EQ(r.ProbeResult(), "") << probe;
  }
  RunRecord r;
  r.report = nlohmann::json::parse(R"({"stdout":{"text":"hi"},"verdict":"ok"})");
  EXPECT_EQ(r.StdoutText(), "hi");
  EXPECT_EQ(r.verdict(), "ok");
}

}  // namespace
}  // namespace safex::containment
