// The daemon's HTTP request parser: what it accepts, what it refuses with which status, and
// properties over random inputs (splitting, mutation, bounds).
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/serve/http_parser.h"

namespace safex::serve {
namespace {

using State = HttpRequestParser::State;

HttpRequestParser Parse(const std::string& text, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  p.Feed(text);
  return p;
}

TEST(HttpParserTest, PostWithBody) {
  auto p = Parse("POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.request().method, "POST");
  EXPECT_EQ(p.request().Path(), "/v1/runs");
  EXPECT_EQ(p.request().body, "hello");
  ASSERT_NE(p.request().Header("host"), nullptr);
  EXPECT_EQ(*p.request().Header("host"), "x");
}

TEST(HttpParserTest, GetWithQueryAndNoBody) {
  auto p = Parse("GET /v1/runs?limit=5 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.request().Path(), "/v1/runs");
  EXPECT_EQ(p.request().Query(), "limit=5");
}

TEST(HttpParserTest, HeaderNamesAreCaseInsensitiveAndValuesTrimmed) {
  auto p = Parse("POST / HTTP/1.1\r\nCONTENT-length:   3  \r\n\r\nabc");
  ASSERT_EQ(p.state(), State::kDone);
  EXPECT_EQ(p.request().body, "abc");
}

TEST(HttpParserTest, BytesAfterTheBodyAreNotConsumed) {
  HttpRequestParser p;
  std::string text = "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nabGARBAGE";
  size_t used = 0;
  EXPECT_EQ(p.Feed(text, &used), State::kDone);
  EXPECT_EQ(used, text.size() - 7);
  EXPECT_EQ(p.request().body, "ab");
}

TEST(HttpParserTest, Refusals) {
  struct Case {
    std::string text;
    int status;
  };
  HttpLimits small;
  small.max_body_bytes = 10;
  const Case cases[] = {
      {"POST /v1/runs HTTP/1.1\r\n\r\n", 411},                                   // no length
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411},            // chunked
      {"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 413},                    // too large
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / FOO\r\n\r\n", 400},
      {"GET http://x/ HTTP/1.1\r\n\r\n", 400},                                   // not origin-form
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400},                        // obs-fold
      {"GET / HTTP/1.1\r\nX: a\x01\r\n\r\n", 400},
      {"GET / HTTP/1.1\nX: a\n\n", 400},                                          // bare LF
      {"GET / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417},
  };
  for (const Case& c : cases) {
    auto p = Parse(c.text, small);
    EXPECT_EQ(p.state(), State::kError) << c.text;
    EXPECT_EQ(p.error_status(), c.status) << c.text << " -> " << p.error_message();
  }
}

TEST(HttpParserTest, HeadAndHeaderCountLimits) {
  HttpLimits limits;
  limits.max_header_bytes = 256;
  limits.max_headers = 4;
  auto big = Parse("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", limits);
  EXPECT_EQ(big.error_status(), 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 5; ++i) many += "X" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(Parse(many + "\r\n", limits).error_status(), 431);
  // A head that never ends is refused once it reaches the cap, however it is fed.
  HttpRequestParser p(limits);
  State st = State::kNeedMore;
  for (int i = 0; i < 1000 && st == State::kNeedMore; ++i) st = p.Feed("a");
  EXPECT_EQ(st, State::kError);
  EXPECT_EQ(p.error_status(), 431);
}

TEST(HttpParserTest, LongTarget) {
  HttpLimits limits;
  limits.max_target_bytes = 16;
  EXPECT_EQ(Parse("GET /" + std::string(40, 'a') + " HTTP/1.1\r\n\r\n", limits).error_status(), 414);
}

TEST(HttpParserTest, ExpectContinueIsNoticed) {
  HttpRequestParser p;
  EXPECT_EQ(p.Feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"),
            State::kNeedMore);
  EXPECT_TRUE(p.headers_done());
  EXPECT_TRUE(p.expects_continue());
  EXPECT_EQ(p.Feed("abc"), State::kDone);
}

TEST(HttpParserTest, FormatResponse) {
  std::string r = FormatResponse(503, "application/json", "{}", {"Retry-After: 1"});
  EXPECT_EQ(r,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{}");
}

// Property: any split of a valid request parses to the same request.
TEST(HttpParserPropertyTest, SplittingDoesNotChangeTheResult) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 500; ++iter) {
    std::string body(rng() % 200, 'x');
    for (char& c : body) c = static_cast<char>(rng() % 256);
    std::string text = "POST /v1/runs?x=" + std::to_string(iter) +
                       " HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(rng() % 50, 'p') +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    HttpRequestParser p;
    size_t pos = 0;
    while (pos < text.size() && p.state() == State::kNeedMore) {
      size_t n = 1 + rng() % 17;
      size_t used = 0;
      p.Feed(std::string_view(text).substr(pos, n), &used);
      pos += used;
    }
    ASSERT_EQ(p.state(), State::kDone) << iter;
    EXPECT_EQ(p.request().body, body);
    EXPECT_EQ(pos, text.size());
  }
}

// Property: random mutations of a valid request never crash and never exceed the limits; an
// error always carries a 4xx/5xx status.
TEST(HttpParserPropertyTest, MutatedRequestsStayBounded) {
  std::mt19937 rng(777);
  const std::string base =
      "POST /v1/runs HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789";
  HttpLimits limits;
  limits.max_header_bytes = 128;
  limits.max_body_bytes = 64;
  limits.max_headers = 8;
  for (int iter = 0; iter < 5000; ++iter) {
    std::string t = base;
    int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: if (at < t.size()) t[at] = static_cast<char>(rng() % 256); break;
        case 1: t.insert(at, 1, static_cast<char>(rng() % 256)); break;
        default: if (at < t.size()) t.erase(at, 1); break;
      }
    }
    HttpRequestParser p(limits);
    size_t used = 0;
    State st = p.Feed(t, &used);
    EXPECT_LE(used, t.size());
    EXPECT_LE(p.request().body.size(), limits.max_body_bytes);
    EXPECT_LE(p.request().headers.size(), limits.max_headers);
    if (st == State::kError) {
      EXPECT_GE(p.error_status(), 400);
      EXPECT_LT(p.error_status(), 600);
    }
  }
}

}  // namespace
}  // namespace safex::serve
