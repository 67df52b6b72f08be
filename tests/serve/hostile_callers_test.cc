// `safex serve` against hostile local callers of its socket (the host-side review): a uid that no
// allow rule names, or one that is allowed but misbehaves, must not deny service to allowed
// callers, grow the daemon's memory, or fill the audit log's disk; and a refusal the log cannot
// take is said and answered as a service error. Each attack runs in a forked child that drops to
// its uid; the daemon is the built binary (tests/serve/serve_harness.h).
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "supervisor/serve/unix_socket.h"
#include "tests/serve/serve_harness.h"
#include "tests/support/leak_check.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace safex {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::ServeHarness;
using testing::ServeOptions;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uid_t kStranger = 4242;  // named by no allow rule of the harness's config
constexpr uid_t kNobody = 65534;   // allowed for base-untrusted only

std::string PostRun(const std::string& policy, const std::vector<std::string>& argv) {
  return json{{"policy", policy}, {"argv", argv}}.dump();
}

std::string PostRequest(const std::string& body) {
  return "POST /v1/runs HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// A child that runs `fn` as uid:gid (no supplementary groups) and exits with its return value.
class AsUser {
 public:
  AsUser(uid_t uid, const std::function<int()>& fn) {
    pid_ = fork();
    if (pid_ == 0) {
      if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
          setresuid(uid, uid, uid) != 0) {
        _exit(100);
      }
      _exit(fn());
    }
  }
  ~AsUser() { Stop(); }
  // SIGKILLs the child (if still running) and returns its exit status.
  int Stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGKILL);
    return Wait();
  }
  int Wait() {
    if (pid_ <= 0) return status_;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// One request on a fresh connection as `uid`: the answer, read until the daemon closes.
std::string RequestAs(uid_t uid, const std::string& socket, const std::string& request) {
  int p[2];
  if (pipe(p) != 0) return "";
  AsUser child(uid, [&]() {
    close(p[0]);
    auto fd = serve::ConnectUnix(socket);
    if (!fd.ok()) return 3;
    send(fd->get(), request.data(), request.size(), MSG_NOSIGNAL);
    shutdown(fd->get(), SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd->get(), buf, sizeof buf, 0)) > 0) {
      if (write(p[1], buf, static_cast<size_t>(n)) != n) break;
    }
    return 0;
  });
  close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  child.Wait();
  return out;
}

// Keeps `count` connections to `socket` open, reconnecting each one the daemon closes, sending
// `prefix` on each (nothing: idle connections), until killed.
int Hoard(const std::string& socket, int count, const std::string& prefix) {
  std::vector<UniqueFd> fds(static_cast<size_t>(count));
  for (;;) {
    for (UniqueFd& fd : fds) {
      if (fd) continue;
      auto c = serve::ConnectUnix(socket);
      if (!c.ok()) continue;
      fd = std::move(c).value();
      if (!prefix.empty()) send(fd.get(), prefix.data(), prefix.size(), MSG_NOSIGNAL);
    }
    std::vector<pollfd> pfds;
    for (UniqueFd& fd : fds) pfds.push_back({fd.get(), POLLIN, 0});
    poll(pfds.data(), pfds.size(), 20);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) fds[i].Reset();  // answered or closed: reconnect
    }
  }
}

int64_t DaemonRssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  }
  return -1;
}

int64_t Metric(ServeHarness& h, const std::string& name) {
  auto r = h.Call("GET", "/metrics");
  if (!r.ok()) return -1;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(name + " ")) return std::stoll(line.substr(name.size() + 1));
  }
  return -1;
}

class HostileCallersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SAFEX_REQUIRE_ROOT();
    SAFEX_REQUIRE(access("/usr/local/bin/runsc", X_OK) == 0, "runsc (scripts/install-deps.sh)");
    // The socket's directory must be reachable by the attacking uids.
    chmod(h_.dir().path().c_str(), 0755);
  }
  void TearDown() override {
    if (h_.running()) {
      EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
    }
  }

  // An allowed caller's run goes through within `within`.
  void ExpectServiceFor(uid_t uid, std::chrono::seconds within) {
    const auto t0 = Clock::now();
    std::string resp = RequestAs(uid, h_.socket(),
                                 PostRequest(PostRun("base-untrusted", {"/bin/echo", "served"})));
    EXPECT_THAT(resp, HasSubstr("HTTP/1.1 200")) << resp;
    EXPECT_THAT(resp, HasSubstr("served\\n"));
    EXPECT_LT(Clock::now() - t0, within);
    auto health = h_.Call("GET", "/v1/health");
    ASSERT_TRUE(health.ok()) << health.status().message();
    EXPECT_EQ(health->status, 200);
  }

  ServeHarness h_;
};

// Regression: a member of the socket group with no allow rule reconnected 70 idle sockets, and
// every submit of an allowed user failed with 503 while the health check went unanswered.
TEST_F(HostileCallersTest, IdleConnectionsOfAStrangerDoNotShutOutAllowedCallers) {
  ASSERT_EQ(h_.Start({.request_timeout = "10s"}), "");
  AsUser hoarder(kStranger, [&] { return Hoard(h_.socket(), 70, ""); });
  std::this_thread::sleep_for(1500ms);  // the hoard is in place
  ExpectServiceFor(kNobody, 30s);
  ExpectServiceFor(0, 30s);
  // The stranger holds at most its share of the connections.
  EXPECT_LE(Metric(h_, "safex_connections_open"), 4 + 2);
  EXPECT_GT(Metric(h_, "safex_requests_refused_total{reason=\"connections\"}"), 0);
  hoarder.Stop();
}

// An allowed uid that misbehaves the same way holds at most max_connections_per_uid; others are
// still served, and a head that never completes is dropped at header_timeout, not after the whole
// request_timeout.
TEST_F(HostileCallersTest, AnAllowedUidThatHoardsHoldsOnlyItsShare) {
  ASSERT_EQ(h_.Start({.request_timeout = "30s", .extra = "    header_timeout = 1s\n"}), "");
  AsUser hoarder(kNobody, [&] { return Hoard(h_.socket(), 70, "GET /v1/hea"); });
  std::this_thread::sleep_for(1500ms);
  ExpectServiceFor(0, 30s);
  EXPECT_LE(Metric(h_, "safex_connections_open"), 8 + 2);
  hoarder.Stop();
  // A slow head alone is cut at the header timeout.
  const auto t0 = Clock::now();
  std::string resp = h_.Raw("GET /v1/health HTTP/1.1\r\nHost: x", false);
  EXPECT_LT(Clock::now() - t0, 10s) << resp;
}

// Regression: sixty half-sent 8 MiB bodies from a uid with no allow rule took the daemon from
// 18 MB to 510 MB. Such a caller is refused after the head, unread; the bodies of allowed callers
// are bounded by max_buffered in total.
TEST_F(HostileCallersTest, BodiesAreNeverReadFromStrangersAndBoundedForEveryone) {
  ASSERT_EQ(h_.Start({.request_timeout = "30s",
                      .max_request = "8MiB",
                      .extra = "    max_buffered = 16MiB\n    max_connections_per_uid = 64\n"}),
            "");
  // Refused as soon as the head is in: the body is never sent, yet the answer comes at once.
  const auto t0 = Clock::now();
  std::string resp = RequestAs(kStranger, h_.socket(),
                               "POST /v1/runs HTTP/1.1\r\nContent-Length: 8388608\r\n\r\n");
  EXPECT_THAT(resp, HasSubstr("HTTP/1.1 403")) << resp;
  EXPECT_THAT(resp, HasSubstr("named by no allow rule"));
  EXPECT_LT(Clock::now() - t0, 5s);

  const int64_t rss_before = DaemonRssKiB(h_.pid());
  const std::string half =
      "POST /v1/runs HTTP/1.1\r\nContent-Length: 8388608\r\n\r\n" + std::string(4 << 20, 'x');
  AsUser strangers(kStranger, [&] { return Hoard(h_.socket(), 60, half); });
  AsUser allowed(kNobody, [&] { return Hoard(h_.socket(), 60, half); });
  std::this_thread::sleep_for(4s);
  const int64_t rss_during = DaemonRssKiB(h_.pid());
  ExpectServiceFor(0, 30s);
  strangers.Stop();
  allowed.Stop();
  ASSERT_GT(rss_before, 0);
  // max_buffered (16 MiB) plus the read buffers and the run of ExpectServiceFor.
  EXPECT_LT(rss_during - rss_before, 48 * 1024) << "KiB: " << rss_before << " -> " << rss_during;
  EXPECT_LE(Metric(h_, "safex_buffered_request_bytes"), 16 << 20);
}

// Regression: every refusal was written with its whole argv at synchronous=FULL without a bound
// (414 MB in 20 s). Now refusals per uid are recorded one by one up to the refusal rate; the rest
// are counted and recorded as summary events, so every refusal is accounted for and the log grows
// by a bounded number of bounded rows.
TEST_F(HostileCallersTest, ARefusalFloodIsBoundedAndEveryRefusalIsAccountedFor) {
  ASSERT_EQ(h_.Start({.extra = "    refusal_rate = 60\n    refusal_burst = 10\n"
                               "    refusal_argv_bytes = 1KiB\n"}),
            "");
  const std::vector<std::string> big_argv(60, std::string(1000, 'a'));
  const std::string forbidden = PostRequest(PostRun("python-untrusted", big_argv));
  constexpr int kFlood = 200;
  AsUser flooder(kNobody, [&] {
    for (int i = 0; i < kFlood; ++i) {
      auto fd = serve::ConnectUnix(h_.socket());
      if (!fd.ok()) return 3;
      send(fd->get(), forbidden.data(), forbidden.size(), MSG_NOSIGNAL);
      shutdown(fd->get(), SHUT_WR);
      char buf[4096];
      while (recv(fd->get(), buf, sizeof buf, 0) > 0) {
      }
    }
    return 0;
  });
  EXPECT_EQ(flooder.Wait(), 0);
  EXPECT_GT(Metric(h_, "safex_refusals_summarised_total"), kFlood / 2);
  ASSERT_EQ(h_.Stop(SIGTERM), 0) << h_.log();  // pending summaries are written at the stop

  uint64_t one_by_one = 0, summarised = 0, summaries = 0;
  for (const auto& r : h_.AuditRuns()) {
    if (r.state != "refused" || !r.requester.uid || *r.requester.uid != kNobody) continue;
    if (r.reason.find("further refusal") != std::string::npos) {
      ++summaries;
      summarised += std::stoull(r.reason.substr(0, r.reason.find(' ')));
      EXPECT_THAT(r.reason, HasSubstr("forbidden x"));
    } else {
      ++one_by_one;
      EXPECT_THAT(r.reason, HasSubstr("argv cut for the record"));
      uint64_t bytes = 0;
      for (const std::string& a : r.argv) bytes += a.size();
      EXPECT_LE(bytes, 1024u);
    }
  }
  EXPECT_GE(summaries, 1u);
  EXPECT_LE(one_by_one, 10u + 5u) << "burst + what the rate refilled meanwhile";
  EXPECT_EQ(one_by_one + summarised, static_cast<uint64_t>(kFlood));
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs v {};
  if (statvfs(path.c_str(), &v) != 0) return 0;
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

// The audit log on a small tmpfs of the test's own, unmounted when the test ends.
class SmallAuditVolume {
 public:
  SmallAuditVolume() {
    mounted_ = mount("tmpfs", dir_.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=24m") == 0;
  }
  ~SmallAuditVolume() {
    if (mounted_) umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  std::string db() const { return dir_.Join("audit.db"); }
  // Writes a filler file until at most `free_bytes` are left.
  void FillTo(uint64_t free_bytes) {
    std::ofstream filler(dir_.Join("filler" + std::to_string(fillers_++)), std::ios::binary);
    const std::string kib(1024, 'f');
    while (FreeBytes(dir_.path()) > free_bytes && filler.write(kib.data(), kib.size())) {
      filler.flush();
    }
  }

 private:
  testing::TempDir dir_;
  bool mounted_ = false;
  int fillers_ = 0;
};

// Below audit_reserve, refusals are only counted (into summaries): the space left stays with the
// runs of allowed callers, which go on.
TEST_F(HostileCallersTest, RefusalsNeverEatTheAuditReserveOfRuns) {
  SmallAuditVolume vol;
  ASSERT_TRUE(vol.mounted());
  ASSERT_EQ(h_.Start({.extra = "    audit_reserve = 12MiB\n", .audit_db = vol.db()}), "");
  vol.FillTo(8u << 20);  // below the reserve, plenty for runs
  const std::string forbidden = PostRequest(PostRun("python-untrusted", {"/bin/echo", "x"}));
  std::string resp = RequestAs(kNobody, h_.socket(), forbidden);
  EXPECT_THAT(resp, HasSubstr("HTTP/1.1 403")) << resp;
  EXPECT_THAT(resp, HasSubstr("not recorded one by one"));
  ExpectServiceFor(kNobody, 30s);
  EXPECT_THAT(h_.log(), HasSubstr("below audit_reserve"));
  EXPECT_EQ(h_.Stop(SIGTERM), 0) << h_.log();
  bool summary = false;
  for (const auto& r : h_.AuditRuns()) {
    summary = summary || r.reason.find("1 further refusal of uid 65534") != std::string::npos;
  }
  EXPECT_TRUE(summary) << "the counted refusal is accounted for in a summary at the stop";
}

// Regression: on a full log volume refusals were answered without being recorded and without a
// word in the service's log. A refusal the log cannot take is logged and answered 500.
TEST_F(HostileCallersTest, ARefusalThatCannotBeRecordedIsSaidAndAnswered500) {
  SmallAuditVolume vol;
  ASSERT_TRUE(vol.mounted());
  ASSERT_EQ(h_.Start({.extra = "    audit_reserve = 0B\n", .audit_db = vol.db()}), "");
  vol.FillTo(0);
  const std::string forbidden = PostRequest(PostRun("python-untrusted", {"/bin/echo", "x"}));
  std::string resp = RequestAs(kNobody, h_.socket(), forbidden);
  EXPECT_THAT(resp, HasSubstr("HTTP/1.1 500")) << resp;
  EXPECT_THAT(resp, HasSubstr("could not be recorded"));
  EXPECT_THAT(h_.log(), HasSubstr("could not be recorded in the audit log (answered 500)"));
  EXPECT_GT(Metric(h_, "safex_refusals_unrecorded_total"), 0);
  h_.Kill();  // nothing more can be recorded on that volume
}

}  // namespace
}  // namespace safex
