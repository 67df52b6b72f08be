// The JSON request decoder of POST /v1/runs and base64.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/serve/base64.h"
#include "supervisor/serve/submit_request.h"

namespace safex::serve {
namespace {

Result<SubmitRequest> P(const std::string& body, RequestLimits limits = {}) {
  return ParseSubmitRequest(body, limits);
}

TEST(SubmitRequestTest, Minimal) {
  auto r = P(R"J({"policy":"python-untrusted","argv":["python3","-c","print(1)"]})J");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->policy, "python-untrusted");
  EXPECT_EQ(r->argv.size(), 3u);
  EXPECT_FALSE(r->stdin_data.has_value());
}

TEST(SubmitRequestTest, StdinAndFiles) {
  auto r = P(R"({"policy":"p","argv":["cat"],"stdin":"aGVsbG8=","files":[{"name":"a.py","data":"eA=="},{"data":"","name":"empty"}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r->stdin_data, "hello");
  ASSERT_EQ(r->files.size(), 2u);
  EXPECT_EQ(r->files[0].name, "a.py");
  EXPECT_EQ(r->files[0].data, "x");
  EXPECT_EQ(r->files[1].data, "");
}

TEST(SubmitRequestTest, BadRequestsAreInvalidArgument) {
  const char* bad[] = {
      "",
      "not json",
      "[]",
      R"({"argv":["a"]})",                                   // no policy
      R"({"policy":"p"})",                                   // no argv
      R"({"policy":"p","argv":[]})",
      R"({"policy":"p","argv":[""]})",
      R"({"policy":"p","argv":["a",1]})",
      R"({"policy":"p","argv":"a"})",
      R"({"policy":"../etc/passwd","argv":["a"]})",
      R"({"policy":"P","argv":["a"]})",
      R"({"policy":"p","argv":["a"],"extra":1})",           // unknown field
      R"({"policy":"p","argv":["a\u0000b"]})",              // NUL
      R"({"policy":"p","argv":["a"],"stdin":"not base64!"})",
      R"({"policy":"p","argv":["a"],"stdin":"aGk"})",       // unpadded
      R"({"policy":"p","argv":["a"],"stdin":"aGl="})",      // non-canonical pad bits
      R"({"policy":"p","argv":["a"],"files":[{"name":"../x","data":""}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a/b","data":""}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":".hidden","data":""}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a","data":""},{"name":"a","data":""}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a","data":"","mode":1}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a"}]})",
      R"({"policy":"p","argv":[["nested"]]})",
      "{\"policy\":\"p\",\"argv\":[\"\xff\"]}",               // invalid UTF-8
      "{\"policy\":\"p\",\"argv\":[\"\xc0\xaf\"]}",           // overlong
  };
  for (const char* b : bad) {
    auto r = P(b);
    EXPECT_FALSE(r.ok()) << b;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << b;
    }
  }
}

// Issue 12: nlohmann keeps the last of two equal keys and skips a byte order mark; a second
// reader of the same body (a proxy, a log) may not, so both are refused.
TEST(SubmitRequestTest, DuplicateKeysAndByteOrderMarkAreRefused) {
  const std::string good = R"({"policy":"p","argv":["a"],"files":[{"name":"a","data":""}]})";
  ASSERT_TRUE(P(good).ok());
  const std::string bad[] = {
      R"({"policy":"p","policy":"q","argv":["a"]})",
      R"({"policy":"p","argv":["a"],"argv":["rm"]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a","name":"b","data":""}]})",
      R"({"policy":"p","\u0070olicy":"q","argv":["a"]})",  // the same name, escaped
      "\xEF\xBB\xBF" + good,
  };
  for (const std::string& b : bad) {
    auto r = P(b);
    ASSERT_FALSE(r.ok()) << b;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << b;
    EXPECT_TRUE(r.status().message().find("duplicate key") != std::string::npos ||
                r.status().message().find("byte order mark") != std::string::npos)
        << b << ": " << r.status().message();
  }
}

TEST(SubmitRequestTest, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = R"({"policy":"p","argv":["a"],"files":)" + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  auto r = P(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper"), std::string::npos);
}

TEST(SubmitRequestTest, LimitsAreResourceExhausted) {
  RequestLimits l;
  l.max_argv = 2;
  l.max_argv_bytes = 10;
  l.max_stdin_bytes = 3;
  l.max_input_files = 1;
  l.max_input_bytes = 3;
  const char* over[] = {
      R"({"policy":"p","argv":["a","b","c"]})",
      R"({"policy":"p","argv":["aaaaaaaaaaaa"]})",
      R"({"policy":"p","argv":["a"],"stdin":"aGVsbG8="})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a","data":""},{"name":"b","data":""}]})",
      R"({"policy":"p","argv":["a"],"files":[{"name":"a","data":"aGVsbG8="}]})",
  };
  for (const char* b : over) {
    auto r = P(b, l);
    ASSERT_FALSE(r.ok()) << b;
    EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted) << b;
  }
}

TEST(SubmitRequestTest, EncodeRoundTrips) {
  SubmitRequest req;
  req.policy = "p-1";
  req.argv = {"sh", "-c", "echo \"hi\"\n", "ünïcode"};
  req.stdin_data = std::string("\0\x01\xff", 3);
  req.files = {{"main.py", std::string("\x00\xfe", 2)}};
  auto body = EncodeSubmitRequest(req);
  ASSERT_TRUE(body.ok());
  auto back = ParseSubmitRequest(*body, {});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->argv, req.argv);
  EXPECT_EQ(back->stdin_data, req.stdin_data);
  EXPECT_EQ(back->files[0].data, req.files[0].data);
  req.argv = {"\xff"};
  EXPECT_FALSE(EncodeSubmitRequest(req).ok());
}

TEST(Base64Test, RoundTripAndStrictness) {
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    auto d = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  for (const char* bad : {"a", "ab", "abc", "a===", "ab=c", "aGVsbG8", "aGVs bG8=", "aGk=aGk=",
                          "aR==", "aGl="}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << bad;
  }
  EXPECT_TRUE(Base64Decode("").has_value());
}

// Property: random bytes never crash the decoder and what it accepts re-encodes to the same
// request.
TEST(SubmitRequestPropertyTest, RandomMutations) {
  std::mt19937 rng(99);
  const std::string base =
      R"({"policy":"p","argv":["python3","-c","x"],"stdin":"aGk=","files":[{"name":"a","data":"eA=="}]})";
  for (int iter = 0; iter < 5000; ++iter) {
    std::string t = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[at] = static_cast<char>(rng() % 256); break;
        case 1: t.insert(at, 1, "{}[]\",:\\0a"[rng() % 10]); break;
        default: t.erase(at, 1); break;
      }
    }
    auto r = ParseSubmitRequest(t, {});
    if (r.ok()) {
      EXPECT_TRUE(ValidPolicyName(r->policy));
      EXPECT_FALSE(r->argv.empty());
      auto again = EncodeSubmitRequest(*r);
      ASSERT_TRUE(again.ok());
      auto back = ParseSubmitRequest(*again, {});
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(back->argv, r->argv);
    }
  }
}

}  // namespace
}  // namespace safex::serve
