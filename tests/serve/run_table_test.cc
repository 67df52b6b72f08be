// The runs API's pure parts: the table of held runs (admission, idempotency keys, events,
// retention), kept-file names and their safe opening, and the new request fields.
#include "supervisor/serve/run_table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "supervisor/serve/result_files.h"
#include "supervisor/serve/submit_request.h"
#include "tests/support/temp_dir.h"

namespace safex::serve {
namespace {

std::shared_ptr<RunEntry> Entry(const std::string& id, uint32_t uid, const std::string& key = "") {
  Caller c;
  c.uid = uid;
  auto e = std::make_shared<RunEntry>(id, c, "p", 1);
  e->idempotency_key = key;
  return e;
}

TEST(RunTableTest, AKeyGivesTheSameRunToTheSameUidOnly) {
  int changes = 0;
  RunTable t({}, [&] { ++changes; });
  bool existing = true;
  auto a = t.Admit(Entry("run-a", 1000, "k1"), &existing);
  EXPECT_FALSE(existing);
  auto again = t.Admit(Entry("run-b", 1000, "k1"), &existing);
  EXPECT_TRUE(existing);
  EXPECT_EQ(again->run_id, "run-a");
  auto other = t.Admit(Entry("run-c", 1001, "k1"), &existing);  // another uid's key space
  EXPECT_FALSE(existing);
  EXPECT_EQ(other->run_id, "run-c");
  t.Forget("run-a");
  auto fresh = t.Admit(Entry("run-d", 1000, "k1"), &existing);
  EXPECT_FALSE(existing);
  EXPECT_EQ(t.Find("run-a"), nullptr);
  EXPECT_NE(t.Find("run-d"), nullptr);
}

TEST(RunTableTest, EventsAreNumberedLinesAndWakeFollowers) {
  std::atomic<int> changes{0};
  RunTable t({}, [&] { ++changes; });
  bool existing = false;
  auto e = t.Admit(Entry("run-a", 0), &existing);
  t.SetState(*e, RunState::kRunning, 5);
  t.Event(*e, {{"type", "stdout"}, {"data", "x\n"}});
  t.Finish(*e, 200, {{"verdict", "ok"}}, "", {}, 9);
  ASSERT_EQ(e->events.size(), 3u);
  EXPECT_EQ(e->events[0], "{\"seq\":0,\"state\":\"running\",\"type\":\"state\"}\n");
  EXPECT_EQ(e->events[1], "{\"data\":\"x\\n\",\"seq\":1,\"type\":\"stdout\"}\n");
  EXPECT_EQ(e->events[2], "{\"result\":{\"verdict\":\"ok\"},\"seq\":2,\"type\":\"result\"}\n");
  EXPECT_EQ(changes.load(), 3);
  nlohmann::json s = RunStateJson(*e, std::nullopt);
  EXPECT_EQ(s["state"], "finished");
  EXPECT_EQ(s["result"]["verdict"], "ok");
}

// Regression (issue 17): Finish marked the run finished, let go of the entry's lock and only then
// appended the result event. The event loop, woken in between by another run, ended the stream
// with its last chunk and no result: `safex submit` said "outcome unknown" (exit 120) for a run
// that had ended ok. A reader of the entry must never see a finished run without its result.
TEST(RunTableTest, AFinishedRunAlreadyHoldsItsResultEvent) {
  RunTable t({}, [] {});
  constexpr int kRuns = 20000;
  std::vector<std::shared_ptr<RunEntry>> runs;
  bool existing = false;
  for (int i = 0; i < kRuns; ++i) {
    runs.push_back(t.Admit(Entry("run-" + std::to_string(i), 0), &existing));
  }
  std::atomic<int> current{0};
  std::atomic<int> torn{0};  // sightings, not runs: the reader may see one run many times
  std::thread reader([&] {
    // As PumpRun does: under the entry's lock, a finished run's events must end in its result.
    for (int i; (i = current.load()) < kRuns;) {
      RunEntry& e = *runs[static_cast<size_t>(i)];
      std::lock_guard<std::mutex> l(e.mu);
      if (e.state != RunState::kFinished) continue;
      if (e.events.empty() || e.events.back().find("\"type\":\"result\"") == std::string::npos) {
        ++torn;
      }
    }
  });
  for (int i = 0; i < kRuns; ++i) {
    t.Finish(*runs[static_cast<size_t>(i)], 200, {{"verdict", "ok"}, {"stdout", {{"text", "hi"}}}},
             "", {}, 9);
    current.store(i + 1);
  }
  reader.join();
  EXPECT_EQ(torn.load(), 0) << "finished runs seen without their result event";
}

TEST(RunTableTest, RetentionByTimeCountAndFileBytes) {
  RetentionLimits limits;
  limits.ttl_ns = 100;
  limits.max_runs = 3;
  limits.max_file_bytes = 50;
  RunTable t(limits, [] {});
  bool existing = false;
  std::vector<std::shared_ptr<RunEntry>> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(t.Admit(Entry("run-" + std::to_string(i), 0, "k" + std::to_string(i)),
                           &existing));
  }
  ResultFileList files;
  files.total_bytes = 30;
  files.files.push_back({"f", 30, "00"});
  t.Finish(*runs[0], 200, {}, "/dir/0", files, 10);
  t.Finish(*runs[1], 200, {}, "/dir/1", files, 20);
  // Four held, three allowed: the oldest finished goes; 60 file bytes of 50: its files go.
  std::vector<std::string> removed = t.Expire(50);
  EXPECT_EQ(removed, std::vector<std::string>{"/dir/0"});
  EXPECT_EQ(t.Find("run-0"), nullptr);
  EXPECT_NE(t.Find("run-1"), nullptr);
  EXPECT_FALSE(runs[1]->files_removed);
  // Its key is free again.
  auto back = t.Admit(Entry("run-9", 0, "k0"), &existing);
  EXPECT_FALSE(existing);
  // Past the ttl: run-1 goes with its files; runs still going stay whatever their age.
  removed = t.Expire(20 + 101);
  EXPECT_EQ(removed, std::vector<std::string>{"/dir/1"});
  EXPECT_EQ(t.Find("run-1"), nullptr);
  EXPECT_NE(t.Find("run-2"), nullptr);
}

TEST(ResultFilesTest, NamesFromUrls) {
  for (const char* ok : {"a", "result.json", "sub/x.txt", "a b", "é.txt"}) {
    EXPECT_TRUE(ValidResultFileName(ok)) << ok;
  }
  for (const char* bad : {"", "/etc/passwd", "..", "../x", "a/../b", "a//b", "a/", "./a", "a/.",
                          "a\nb", "\x7f"}) {
    EXPECT_FALSE(ValidResultFileName(bad)) << bad;
  }
  EXPECT_FALSE(ValidResultFileName(std::string("a\0b", 3)));
  EXPECT_EQ(*PercentDecode("sub%2Fx%20y.txt"), "sub/x y.txt");
  EXPECT_FALSE(PercentDecode("a%00b").ok());
  EXPECT_FALSE(PercentDecode("a%0").ok());
  EXPECT_FALSE(PercentDecode("a%zz").ok());
}

TEST(ResultFilesTest, ListsAndOpensOnlyRegularFilesBeneathTheRunsDirectory) {
  testing::TempDir dir;
  dir.Write("result.json", "{}");
  ASSERT_EQ(mkdir(dir.Join("sub").c_str(), 0700), 0);
  dir.Write("sub/x.txt", "hello");
  ASSERT_EQ(symlink("/etc/passwd", dir.Join("link").c_str()), 0);
  ASSERT_EQ(symlink("/etc", dir.Join("up").c_str()), 0);
  auto list = ListResultFiles(dir.path());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->files.size(), 2u);
  EXPECT_EQ(list->files[0].name, "result.json");
  EXPECT_EQ(list->files[1].name, "sub/x.txt");
  EXPECT_EQ(list->files[1].size, 5u);
  EXPECT_EQ(list->total_bytes, 7u);
  EXPECT_TRUE(OpenResultFile(dir.path(), "sub/x.txt").ok());
  EXPECT_FALSE(OpenResultFile(dir.path(), "link").ok());       // a symlink is not followed
  EXPECT_FALSE(OpenResultFile(dir.path(), "up/passwd").ok());  // nor one on the way
  EXPECT_FALSE(OpenResultFile(dir.path(), "sub").ok());        // not a regular file
  EXPECT_FALSE(OpenResultFile(dir.path(), "../x").ok());
}

TEST(SubmitRequestTest, WaitAndWallTime) {
  RequestLimits limits;
  auto r = ParseSubmitRequest(R"({"policy":"p","argv":["x"],"wait":false,"wall_time_ms":1500})",
                              limits);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->wait);
  EXPECT_EQ(r->wall_time_ms, 1500u);
  EXPECT_TRUE(ParseSubmitRequest(R"({"policy":"p","argv":["x"]})", limits)->wait);
  for (const char* bad : {R"({"policy":"p","argv":["x"],"wait":1})",
                          R"({"policy":"p","argv":["x"],"wall_time_ms":0})",
                          R"({"policy":"p","argv":["x"],"wall_time_ms":-5})",
                          R"({"policy":"p","argv":["x"],"wall_time_ms":1.5})",
                          R"({"policy":"p","argv":["x"],"wall_time_ms":86400001})"}) {
    EXPECT_FALSE(ParseSubmitRequest(bad, limits).ok()) << bad;
  }
  auto encoded = EncodeSubmitRequest(*r);
  ASSERT_TRUE(encoded.ok());
  auto back = ParseSubmitRequest(*encoded, limits);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->wait);
  EXPECT_EQ(back->wall_time_ms, 1500u);
}

}  // namespace
}  // namespace safex::serve
