// The service ships its audit log to the fleet's central database on a timer (audit_ship_to,
// audit_ship_interval) and reports the lag on /metrics: against a private PostgreSQL cluster and
// a real run. A central database that refuses the log (not enrolled yet) never stops a run; the
// next tick after the enrolment catches up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "fleet/central.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/fleet/pg_cluster.h"
#include "tests/serve/serve_fixture.h"

namespace safex {
namespace {

using ::testing::HasSubstr;

class ServeShipTest : public testing::ServeFixture {
 protected:
  // /metrics, once it contains `needle` (at most 20 s).
  std::string MetricsWith(const std::string& needle) {
    std::string body;
    for (int i = 0; i < 200; ++i) {
      auto m = h_.Call("GET", "/metrics");
      if (m.ok()) body = m->body;
      if (body.find(needle) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return body;
  }
};

TEST_F(ServeShipTest, TheServiceShipsItsAuditLogOnATimerAndReportsTheLag) {
  std::string why;
  auto cluster = testing::PrivateCluster::Start(&why);
  SAFEX_REQUIRE(cluster != nullptr, why);
  const std::string url = cluster->NewDatabase("serve_ship");
  ASSERT_FALSE(url.empty());
  ASSERT_TRUE(fleet::InitCentral(url).ok());
  testing::ServeOptions o;
  o.extra = "    audit_ship_to = \"" + url + "\"\n    audit_ship_interval = 1s\n";
  StartAndSnapshot(o);

  // Not enrolled: every tick fails, runs go on, the lag counts what waits.
  auto run = h_.Submit("python-untrusted", {"/bin/echo", "shipped"});
  ASSERT_EQ(run.status, 0) << run.err;
  std::string metrics = MetricsWith("safex_audit_ship_failures_total 2");
  EXPECT_THAT(metrics, HasSubstr("safex_audit_ship_last_success_seconds 0\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("safex_audit_ship_lag_events 0\n")));

  audit::AuditOptions ro;
  ro.read_only = true;
  auto log = audit::AuditLog::Open(h_.dir().Join("audit.db"), ro);
  ASSERT_TRUE(log.ok()) << log.status().message();
  auto enrolment = fleet::EnrolmentOf(**log, h_.dir().Join("central-test.key"), "serve-node");
  ASSERT_TRUE(enrolment.ok()) << enrolment.status().message();
  ASSERT_TRUE(fleet::Enrol(url, *enrolment).ok());

  metrics = MetricsWith("safex_audit_ship_lag_events 0\n");
  EXPECT_THAT(metrics, HasSubstr("safex_audit_ship_lag_events 0\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("safex_audit_shipped_events_total 0\n")));
  auto count = (*log)->EventCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(fleet::testing::Query(url, "SELECT count(*) FROM safex.events"),
            std::to_string(*count));
  EXPECT_EQ(fleet::testing::Query(url,
                                  "SELECT count(*) FROM safex.runs WHERE host = "
                                  "'serve-node' AND verdict = 'ok'"),
            "1");
  auto rep = fleet::VerifyCentral(url, std::nullopt);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE((*rep)[0].ok) << (*rep)[0].problem;

  // The owner deletes the newest shipped events at the central: the next tick ships them again
  // and the service says what it saw.
  ASSERT_EQ(fleet::testing::AsOwnerBypassingTriggers(
                url, "DELETE FROM safex.events WHERE seq > " + std::to_string(*count - 2)),
            "");
  for (int i = 0; i < 100 && h_.log().find("events were deleted there") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(h_.log(), HasSubstr("of this log, and now only 1.." + std::to_string(*count - 2) +
                                  ": events were deleted there"));
  EXPECT_EQ(fleet::testing::Query(url, "SELECT count(*) FROM safex.events"),
            std::to_string(*count));

  log->reset();
  EXPECT_EQ(h_.Stop(), 0);
  ExpectNoLeaks();
}

}  // namespace
}  // namespace safex
