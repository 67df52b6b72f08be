// Shipping: three hosts at once with runs added between ships, a shipper SIGKILLed in the middle
// and retried, a node whose log lost events before they were shipped, a checkpoint signed by a
// key other than the pinned one, and the command line end to end.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fleet/central.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/support/run_process.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace safex::fleet::testing {
namespace {

using Code = Status::Code;

int64_t CentralCount(const std::string& url, const std::string& log_id) {
  const std::string n =
      Query(url, "SELECT count(*) FROM safex.events WHERE log_id = '" + log_id + "'");
  return n.empty() ? -1 : std::stoll(n);
}

// Three hosts, each shipping while it gains runs, all at once: every event arrives once, in
// order, and the central verifies.
TEST_F(CentralTest, ThreeHostsShipConcurrentlyWithRunsBetweenShips) {
  std::vector<Node> nodes;
  for (const char* name : {"h1", "h2", "h3"}) {
    nodes.push_back(MakeNode(dir_, name));
    ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*nodes.back().log, nodes.back().key, name)).ok());
  }
  std::vector<std::thread> threads;
  std::vector<std::string> errors(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 5; ++round) {
        AddRuns(&nodes[i], 20, "r" + std::to_string(round));
        if (round == 2 && !nodes[i].log->MakeCheckpoint().ok()) errors[i] = "checkpoint";
        ShipOptions small;
        small.batch_events = 7;  // many transactions, interleaved with the other hosts'
        auto r = Ship(url_, *nodes[i].log, small);
        if (!r.ok()) errors[i] = r.status().message();
        if (r.ok() && (r->lag() != 0 || !r->warning.empty())) errors[i] = "lag or warning";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "host " << i;
    EXPECT_EQ(CentralCount(url_, nodes[i].log->log_id()), 200);
  }
  auto rep = VerifyCentral(url_, std::nullopt);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->size(), 3u);
  for (const auto& r : *rep) {
    EXPECT_TRUE(r.ok) << r.host << ": " << r.problem;
    EXPECT_EQ(r.events, 200u);
    EXPECT_EQ(r.checkpoints, 1u);
  }
  // Nothing new: a ship sends nothing and changes nothing.
  auto idle = Ship(url_, *nodes[0].log, {});
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->events_shipped, 0u);
}

// `safex audit ship` killed with SIGKILL while it ships: the central keeps whole batches only,
// and the retry sends exactly the rest.
TEST_F(CentralTest, AShipperKilledMidShipLosesAndDuplicatesNothing) {
  Node n = MakeNode(dir_, "big");
  n.log.reset();
  audit::testing::BulkAppend(n.db, 15000, "bulk");  // 30000 events
  n = MakeNode(dir_, "big");
  ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*n.log, n.key, "big")).ok());
  const std::string log_id = n.log->log_id();

  std::vector<std::string> argv = {safex::testing::SafexBinary(),
                                   "audit",
                                   "ship",
                                   "--to",
                                   url_,
                                   "--audit-db",
                                   n.db,
                                   "--key",
                                   n.key,
                                   "--batch",
                                   "250"};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ), 0);
  int64_t seen = 0;
  for (int i = 0; i < 3000 && seen < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    seen = CentralCount(url_, log_id);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const int64_t after_kill = CentralCount(url_, log_id);
  ASSERT_GE(after_kill, 1000) << "the shipper was killed before it shipped";
  ASSERT_LT(after_kill, 30000) << "the shipper finished before it was killed";
  EXPECT_EQ(after_kill % 250, 0) << "a batch was half-committed";

  auto retry = Ship(url_, *n.log, {});
  ASSERT_TRUE(retry.ok()) << retry.status().message();
  EXPECT_EQ(retry->central_seq_before, after_kill);
  EXPECT_EQ(retry->events_shipped, static_cast<uint64_t>(30000 - after_kill));
  EXPECT_EQ(CentralCount(url_, log_id), 30000);
  EXPECT_EQ(Query(url_, "SELECT count(DISTINCT seq) FROM safex.events"), "30000");
  auto rep = VerifyCentral(url_, std::nullopt);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE((*rep)[0].ok) << (*rep)[0].problem;
}

// Events deleted on the node before they were shipped: the central cannot take a gap, and the
// shipper stops at the gap, naming it.
TEST_F(CentralTest, ANodeLogWithAGapStopsTheShipperAtTheGap) {
  Node n = MakeNode(dir_, "n");
  AddRuns(&n, 10, "r");
  ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*n.log, n.key, "n")).ok());
  n.log.reset();
  ASSERT_EQ(audit::testing::RawSql(n.db,
                                   "DROP TRIGGER events_no_delete; "
                                   "DELETE FROM events WHERE seq = 7"),
            "");
  n = MakeNode(dir_, "n");
  auto r = Ship(url_, *n.log, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss) << r.status().message();
  EXPECT_NE(r.status().message().find("event 7"), std::string::npos) << r.status().message();
  EXPECT_EQ(CentralCount(url_, n.log->log_id()), 6);
}

// A checkpoint signed by another key than the one pinned at enrolment is refused; the events
// before it are shipped and verify.
TEST_F(CentralTest, ACheckpointByAnotherKeyIsRefused) {
  Node n = MakeNode(dir_, "n");
  AddRuns(&n, 3, "r");
  ASSERT_TRUE(Enrol(url_, *EnrolmentOf(*n.log, n.key, "n")).ok());
  n.log.reset();
  std::remove(n.key.c_str());
  std::remove((n.key + ".pub").c_str());
  n = MakeNode(dir_, "n");
  ASSERT_TRUE(n.log->MakeCheckpoint().ok());  // a new key: not the pinned one
  auto r = Ship(url_, *n.log, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not by the key pinned at enrolment"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(CentralCount(url_, n.log->log_id()), 6);
  EXPECT_EQ(Query(url_, "SELECT count(*) FROM safex.checkpoints"), "0");
}

TEST_F(CentralTest, TheCommandLineEndToEnd) {
  Node n = MakeNode(dir_, "cli");
  AddRuns(&n, 4, "r");
  ASSERT_TRUE(n.log->MakeCheckpoint().ok());
  auto run = [&](std::vector<std::string> args) { return safex::testing::RunSafex(args); };
  auto init = run({"audit", "central", "init", "--to", url_});
  EXPECT_EQ(init.status, 0) << init.err;
  EXPECT_NE(init.out.find("already there"), std::string::npos);
  auto enrol = run({"audit", "central", "enrol", "--to", url_, "--host", "cli-host", "--audit-db",
                    n.db, "--key", n.key});
  EXPECT_EQ(enrol.status, 0) << enrol.err;
  auto again = run({"audit", "central", "enrol", "--to", url_, "--host", "cli-host", "--audit-db",
                    n.db, "--key", n.key});
  EXPECT_EQ(again.status, 3);
  EXPECT_NE(again.err.find("already enrolled"), std::string::npos) << again.err;
  auto ship = run({"audit", "ship", "--to", url_, "--audit-db", n.db, "--key", n.key, "--json"});
  ASSERT_EQ(ship.status, 0) << ship.err;
  EXPECT_NE(ship.out.find("\"events_shipped\":8"), std::string::npos) << ship.out;
  EXPECT_NE(ship.out.find("\"checkpoints_shipped\":1"), std::string::npos) << ship.out;
  auto verify = run({"audit", "verify", "--central", url_});
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("host cli-host"), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("intact: 8 events, 1 checkpoints"), std::string::npos) << verify.out;

  ASSERT_EQ(AsOwnerBypassingTriggers(url_, "UPDATE safex.events SET exit_code = 7 WHERE seq = 4"),
            "");
  auto broken = run({"audit", "verify", "--central", url_, "--host", "cli-host"});
  EXPECT_EQ(broken.status, 1);
  EXPECT_NE(broken.out.find("host cli-host"), std::string::npos) << broken.out;
  EXPECT_NE(broken.out.find("BROKEN at seq 4"), std::string::npos) << broken.out;
  auto unknown = run({"audit", "verify", "--central", url_, "--host", "nope"});
  EXPECT_EQ(unknown.status, 3);
  auto unreachable = run(
      {"audit", "ship", "--to", "host=/nonexistent port=1", "--audit-db", n.db, "--key", n.key});
  EXPECT_EQ(unreachable.status, 3);
  EXPECT_NE(unreachable.err.find("cannot connect"), std::string::npos) << unreachable.err;
}

}  // namespace
}  // namespace safex::fleet::testing
