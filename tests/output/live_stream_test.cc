// Live output validation (supervisor/output/live_stream.h, plan/stream_delivery.h): which
// streams may stream, and the property that makes streaming safe: whatever LiveStream sends while
// the run goes on, plus what Finish sends after it, is exactly what validating the whole output
// delivers; and a rejection found while streaming is one the whole output's validation finds too.
// Checked on random outputs (text, lines, UTF-8, invalid bytes, escapes, CR, bidi controls,
// secrets) cut into random chunks, under several validator chains.
#include "supervisor/output/live_stream.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "plan/stream_delivery.h"

namespace safex::output {
namespace {

using plan::ControlChars;
using plan::OverflowAction;
using plan::RegexAction;
using plan::RegexRule;
using plan::Validator;
using plan::ValidatorTarget;

Validator Stdout(uint64_t max, OverflowAction on = OverflowAction::kReject) {
  Validator v;
  v.target = ValidatorTarget::kStdout;
  v.max_bytes = max;
  v.on_overflow = on;
  return v;
}

ValidatorSet Compile(const std::vector<Validator>& vs) {
  auto r = ValidatorSet::Compile(vs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(StreamDeliveryTest, LineLocalPatterns) {
  for (const char* p : {"AKIA[0-9A-Z]{16}", "-----BEGIN [A-Z ]*PRIVATE KEY-----", "tok[0-9]{2}",
                        "a.b", "(?i)secret", "\\bword\\b", "[a-z]+@[a-z]+\\.com", "x\\.y",
                        "\\$HOME", "\\^", "(?P<n>ab)c"}) {
    EXPECT_TRUE(plan::IsLineLocalPattern(p)) << p;
  }
  for (const char* p :
       {"a\\nb", "a\\sb", "[^a]",          "(?s)a.b", "(?is)x",      "^start", "end$",
        "\\Aa",  "a\\z",  "[\\x00-\\x7f]", "\\x0a",   "[[:space:]]", "\\D",    "\\W+",
        "\\pL",  "\\PL",  "\\Q\n\\E",      "\\012",   "a\nb",        "\\C"}) {
    EXPECT_FALSE(plan::IsLineLocalPattern(p)) << p;
  }
}

TEST(StreamDeliveryTest, WhatHoldsAStream) {
  Validator v = Stdout(1024);
  v.regex.push_back({"AKIA[0-9A-Z]{16}", RegexAction::kReject, ""});
  EXPECT_TRUE(plan::StreamDeliveryOf({v}, ValidatorTarget::kStdout).live);
  EXPECT_TRUE(plan::StreamDeliveryOf({}, ValidatorTarget::kStdout).live);
  Validator j = Stdout(1024);
  j.json = plan::JsonRule{};
  auto held = plan::StreamDeliveryOf({v, j}, ValidatorTarget::kStdout);
  EXPECT_FALSE(held.live);
  EXPECT_NE(held.why_held.find("JSON"), std::string::npos);
  EXPECT_TRUE(plan::StreamDeliveryOf({v, j}, ValidatorTarget::kStderr).live);  // stdout's only
  Validator span = Stdout(1024);
  span.regex.push_back({"(?s)BEGIN.*END", RegexAction::kRedact, "[x]"});
  EXPECT_FALSE(plan::StreamDeliveryOf({span}, ValidatorTarget::kStdout).live);
}

TEST(LiveStreamTest, SendsCompleteValidatedLinesAsTheyCome) {
  Validator v = Stdout(1 << 20);
  v.regex.push_back({"tok[0-9]{2}", RegexAction::kRedact, "[x]"});
  ValidatorSet set = Compile({v});
  LiveStream live(set.validators(), ValidatorTarget::kStdout);
  ASSERT_TRUE(live.live());
  EXPECT_EQ(live.Feed("hello tok1").deliver, "");  // the line is not complete
  EXPECT_EQ(live.Feed("2 there\nnext").deliver, "hello [x] there\n");
  EXPECT_EQ(live.Feed(" line\n").deliver, "next line\n");
}

TEST(LiveStreamTest, ARejectionStopsTheStream) {
  Validator v = Stdout(1 << 20);
  v.regex.push_back({"AKIA[0-9A-Z]{16}", RegexAction::kReject, ""});
  ValidatorSet set = Compile({v});
  LiveStream live(set.validators(), ValidatorTarget::kStdout);
  EXPECT_EQ(live.Feed("fine\n").deliver, "fine\n");
  LiveStream::Step s = live.Feed("key AKIAABCDEFGHIJKLMNOP\nmore\n");
  EXPECT_TRUE(s.rejected);
  EXPECT_EQ(s.deliver, "");
  EXPECT_EQ(live.Feed("after\n").deliver, "");
}

TEST(LiveStreamTest, ARejectingSizeCapRejectsOnceItIsPassed) {
  ValidatorSet set = Compile({Stdout(10)});
  LiveStream live(set.validators(), ValidatorTarget::kStdout);
  EXPECT_EQ(live.Feed("12345\n").deliver, "12345\n");
  EXPECT_TRUE(live.Feed("678901\n").rejected);
}

TEST(LiveStreamTest, ATruncatingCapHoldsTheRestWithANotice) {
  ValidatorSet set = Compile({Stdout(10, OverflowAction::kTruncate)});
  LiveStream live(set.validators(), ValidatorTarget::kStdout);
  EXPECT_EQ(live.Feed("12345\n").deliver, "12345\n");
  LiveStream::Step s = live.Feed("678901\n");
  EXPECT_FALSE(s.rejected);
  EXPECT_NE(s.notice.find("size cap"), std::string::npos);
  const std::string all = "12345\n678901\n";
  LiveStream::Step rest =
      live.Finish(set.ValidateStream(ValidatorTarget::kStdout, all, all.size(), false));
  EXPECT_EQ(rest.deliver, "6789");
}

TEST(LiveStreamTest, AnEscapeUnderAControlCheckHoldsTheRest) {
  Validator v = Stdout(1 << 20);
  v.control = ControlChars::kStrip;
  ValidatorSet set = Compile({v});
  LiveStream live(set.validators(), ValidatorTarget::kStdout);
  EXPECT_EQ(live.Feed("a\n").deliver, "a\n");
  LiveStream::Step s = live.Feed("\x1b]0;title\nstill the title\x07 b\n");
  EXPECT_EQ(s.deliver, "");
  EXPECT_NE(s.notice.find("escape"), std::string::npos);
}

// Random outputs under several chains: live + Finish == whole, and live rejections are real.
std::string RandomOutput(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a",         "bc",           "hello",
      " ",         "\n",           "\r\n",
      "\r",        "\t",           "é",
      "😀",         "\xff",         "\xc3",
      "\x1b[31m",  "\x1b]0;t\x07", "\x07",
      "\u202e",    "\xc2\x9b",     "tok42",
      "tok",       "AKIA",         "ABCDEFGHIJKLMNOP",
      "SECRET-7",  "[x]",          "-----BEGIN RSA PRIVATE KEY-----",
      "0123456789"};
  std::uniform_int_distribution<size_t> piece(0, kPieces.size() - 1);
  std::uniform_int_distribution<int> count(0, 60);
  std::string out;
  for (int i = count(rng); i > 0; --i) out += kPieces[piece(rng)];
  return out;
}

std::vector<std::vector<Validator>> Chains() {
  std::vector<std::vector<Validator>> chains;
  chains.push_back({});
  {  // like python-untrusted extending base-untrusted
    Validator base = Stdout(1 << 20);
    base.control = ControlChars::kStrip;
    Validator own = Stdout(64 << 10);
    own.utf8 = true;
    own.control = ControlChars::kReject;
    own.regex.push_back({"AKIA[0-9A-Z]{16}", RegexAction::kReject, ""});
    own.regex.push_back({"-----BEGIN [A-Z ]*PRIVATE KEY-----", RegexAction::kRedact, "[key]"});
    chains.push_back({base, own});
  }
  {
    Validator v = Stdout(120, OverflowAction::kTruncate);
    v.max_lines = 4;
    v.control = ControlChars::kStrip;
    chains.push_back({v});
  }
  {
    Validator v = Stdout(1 << 20);
    v.utf8 = true;
    v.regex.push_back({"tok[0-9]{2}", RegexAction::kRedact, "[a-longer-replacement]"});
    v.regex.push_back({"SECRET-[0-9]", RegexAction::kRedact, "[x]"});
    Validator cap = Stdout(150, OverflowAction::kTruncate);
    cap.max_lines = 6;
    chains.push_back({v, cap});
  }
  {
    Validator v = Stdout(200);
    v.max_lines = 3;
    v.on_overflow = OverflowAction::kReject;
    chains.push_back({v});
  }
  return chains;
}

TEST(LiveStreamTest, WhatStreamsIsWhatTheWholeOutputDelivers) {
  std::mt19937 rng(20261202);
  int live_bytes = 0, rejected_live = 0;
  for (const std::vector<Validator>& chain : Chains()) {
    ValidatorSet set = Compile(chain);
    for (int round = 0; round < 1500; ++round) {
      const std::string out = RandomOutput(rng);
      LiveStream live(set.validators(), ValidatorTarget::kStdout);
      ASSERT_TRUE(live.live());
      std::string sent;
      bool rejected = false;
      std::uniform_int_distribution<size_t> cut(1, 12);
      for (size_t at = 0; at < out.size();) {
        const size_t n = std::min(cut(rng), out.size() - at);
        LiveStream::Step s = live.Feed(std::string_view(out).substr(at, n));
        at += n;
        sent += s.deliver;
        if (s.rejected) rejected = true;
      }
      const ValidationReport whole =
          set.ValidateStream(ValidatorTarget::kStdout, out, out.size(), false);
      if (rejected) {
        ++rejected_live;
        EXPECT_TRUE(whole.rejected)
            << "live rejected what the whole output accepts: " << ::testing::PrintToString(out);
        continue;
      }
      live_bytes += static_cast<int>(sent.size());
      if (whole.rejected) continue;  // validated lines may have gone out before the rejection
      LiveStream::Step rest = live.Finish(whole);
      EXPECT_EQ(rest.notice, "") << ::testing::PrintToString(out);
      EXPECT_EQ(sent + rest.deliver, whole.delivered) << ::testing::PrintToString(out);
    }
  }
  // The property is not vacuous: text did stream, and rejections were found live.
  EXPECT_GT(live_bytes, 10000);
  EXPECT_GT(rejected_live, 50);
}

}  // namespace
}  // namespace safex::output
