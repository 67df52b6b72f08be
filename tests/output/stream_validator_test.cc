#include "supervisor/output/stream_validator.h"

#include <gtest/gtest.h>

#include <string>

#include "common/sha256.h"

namespace safex::output {
namespace {

using plan::ControlChars;
using plan::OverflowAction;
using plan::RegexAction;
using plan::RegexRule;
using plan::Validator;
using plan::ValidatorTarget;

Validator Stdout() {
  Validator v;
  v.target = ValidatorTarget::kStdout;
  v.max_bytes = 1 << 20;
  return v;
}

RegexRule Reject(std::string p) { return RegexRule{std::move(p), RegexAction::kReject, ""}; }
RegexRule Redact(std::string p, std::string rep = "[REDACTED]") {
  return RegexRule{std::move(p), RegexAction::kRedact, std::move(rep)};
}

ValidatorSet Compile(std::vector<Validator> vs) {
  Result<ValidatorSet> r = ValidatorSet::Compile(vs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

ValidationReport Validate(const ValidatorSet& set, std::string_view out) {
  return set.ValidateStream(ValidatorTarget::kStdout, out, out.size(), false);
}

const Finding& Rejection(const ValidationReport& r) {
  static const Finding kNone;
  EXPECT_TRUE(r.rejected);
  return r.rejection() ? *r.rejection() : kNone;
}

// Realistic secret shapes (fake values).
constexpr char kAwsKey[] = "AKIAIOSFODNN7EXAMPLE";
constexpr char kGithubToken[] = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
constexpr char kPrivateKeyHeader[] = "-----BEGIN RSA PRIVATE KEY-----";
const char* kAwsPattern = "AKIA[0-9A-Z]{16}";
const char* kGithubPattern = "gh[pousr]_[A-Za-z0-9]{36}";
const char* kKeyPattern = "-----BEGIN [A-Z ]*PRIVATE KEY-----";

TEST(StreamValidatorTest, NoValidatorPassesThrough) {
  ValidatorSet set = Compile({});
  ValidationReport r = Validate(set, "anything \x1b[31m");
  EXPECT_FALSE(r.rejected);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.delivered, "anything \x1b[31m");
  EXPECT_EQ(r.raw_sha256, r.delivered_sha256);
}

TEST(StreamValidatorTest, MaxTruncateOrReject) {
  Validator v = Stdout();
  v.max_bytes = 5;
  v.on_overflow = OverflowAction::kTruncate;
  ValidatorSet trunc = Compile({v});
  ValidationReport t = Validate(trunc, "0123456789");
  EXPECT_FALSE(t.rejected);
  EXPECT_EQ(t.delivered, "01234");
  EXPECT_TRUE(t.truncated);
  EXPECT_EQ(t.findings.at(0).outcome, CheckOutcome::kTransformed);
  EXPECT_EQ(t.raw_sha256, Sha256Hex("0123456789"));
  EXPECT_EQ(t.delivered_sha256, Sha256Hex("01234"));

  v.on_overflow = OverflowAction::kReject;
  ValidatorSet rej = Compile({v});
  ValidationReport r = Validate(rej, "0123456789");
  EXPECT_EQ(Rejection(r).check, "max");
  EXPECT_EQ(Rejection(r).offset, 5u);
  EXPECT_TRUE(r.delivered.empty());
  EXPECT_TRUE(r.delivered_sha256.empty());
  EXPECT_FALSE(r.raw_sha256.empty());
  EXPECT_FALSE(Validate(rej, "01234").rejected);
}

TEST(StreamValidatorTest, CaptureTruncationCountsWhatTheProgramProduced) {
  Validator v = Stdout();
  v.max_bytes = 100;
  v.on_overflow = OverflowAction::kReject;
  ValidatorSet set = Compile({v});
  // The capture kept 10 bytes of 5 GB: the size check uses the total.
  ValidationReport r = set.ValidateStream(ValidatorTarget::kStdout, "0123456789", 5ULL << 30, true);
  EXPECT_EQ(Rejection(r).check, "max");
  EXPECT_EQ(r.total_bytes, 5ULL << 30);
  EXPECT_EQ(r.captured_bytes, 10u);
}

TEST(StreamValidatorTest, Utf8CutByTruncationIsDropped) {
  Validator v = Stdout();
  v.max_bytes = 8;
  v.on_overflow = OverflowAction::kTruncate;
  v.utf8 = true;
  ValidatorSet set = Compile({v});
  ValidationReport r =
      Validate(set, "euros: \xe2\x82\xac\xe2\x82\xac");  // cut inside the first euro
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "euros: ");
  EXPECT_EQ(r.findings.at(1).check, "utf8");
  EXPECT_EQ(r.findings.at(1).outcome, CheckOutcome::kTransformed);
  // Not truncated: the same cut sequence is invalid.
  Validator strict = Stdout();
  strict.utf8 = true;
  ValidationReport bad = Validate(Compile({strict}), "euros: \xe2\x82");
  EXPECT_EQ(Rejection(bad).check, "utf8");
  EXPECT_EQ(Rejection(bad).offset, 7u);
}

TEST(StreamValidatorTest, ControlStripRejectAndLines) {
  Validator v = Stdout();
  v.control = ControlChars::kStrip;
  v.max_lines = 2;
  v.on_overflow = OverflowAction::kTruncate;
  ValidatorSet set = Compile({v});
  ValidationReport r = Validate(set, "\x1b[32mok\x1b[0m\nline two\x07\nline three\n");
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "ok\nline two\n");
  EXPECT_TRUE(r.truncated);

  v.control = ControlChars::kReject;
  ValidationReport rej = Validate(Compile({v}), "ok\n\x1b]0;pwned\x07\n");
  EXPECT_EQ(Rejection(rej).check, "control");
  EXPECT_EQ(Rejection(rej).offset, 3u);
  EXPECT_EQ(Rejection(rej).line, 2u);

  v.control = ControlChars::kAllow;
  v.on_overflow = OverflowAction::kReject;
  ValidationReport lines = Validate(Compile({v}), "1\n2\n3\n");
  EXPECT_EQ(Rejection(lines).check, "max_lines");
  EXPECT_EQ(Rejection(lines).line, 3u);
  EXPECT_EQ(Rejection(lines).offset, 4u);
}

TEST(StreamValidatorTest, RejectsSecretShapesWithoutEchoingThem) {
  Validator v = Stdout();
  v.regex = {Reject(kAwsPattern), Reject(kGithubPattern), Reject(kKeyPattern)};
  ValidatorSet set = Compile({v});
  struct Case {
    std::string text;
    uint64_t offset;
    uint64_t line;
    const char* pattern;
  } cases[] = {
      {std::string("config ok\nkey=") + kAwsKey + "\n", 14, 2, kAwsPattern},
      {std::string("token: ") + kGithubToken, 7, 1, kGithubPattern},
      {std::string("a\nb\n") + kPrivateKeyHeader + "\nMIIE...", 4, 3, kKeyPattern},
  };
  for (const Case& c : cases) {
    ValidationReport r = Validate(set, c.text);
    const Finding& f = Rejection(r);
    EXPECT_EQ(f.check, "reject");
    EXPECT_EQ(f.offset, c.offset) << c.text;
    EXPECT_EQ(f.line, c.line) << c.text;
    EXPECT_NE(f.detail.find(c.pattern), std::string::npos) << f.detail;
    EXPECT_EQ(f.detail.find(c.text.substr(c.offset, 12)), std::string::npos) << f.detail;
    EXPECT_TRUE(r.delivered.empty());
  }
  ValidationReport clean = Validate(set, "AKIA is a prefix; ghp_short; BEGIN PUBLIC KEY");
  EXPECT_FALSE(clean.rejected);
}

TEST(StreamValidatorTest, RegexSeesTheTextAfterStripping) {
  // An escape sequence spliced into a key must not hide it: the terminal would show it whole.
  Validator v = Stdout();
  v.control = ControlChars::kStrip;
  v.regex = {Reject(kAwsPattern)};
  ValidationReport r = Validate(Compile({v}), "AKIAIOSF\x1b[0mODNN7EXAMPLE");
  EXPECT_EQ(Rejection(r).check, "reject");
}

TEST(StreamValidatorTest, RedactsSecretShapes) {
  Validator v = Stdout();
  v.regex = {Redact(kAwsPattern), Redact(kGithubPattern, "<github token>"), Redact(kKeyPattern)};
  ValidatorSet set = Compile({v});
  const std::string out = std::string("aws=") + kAwsKey + " gh=" + kGithubToken + "\n" +
                          kPrivateKeyHeader + "\nagain " + kAwsKey;
  ValidationReport r = Validate(set, out);
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "aws=[REDACTED] gh=<github token>\n[REDACTED]\nagain [REDACTED]");
  const Finding& f = r.findings.back();
  EXPECT_EQ(f.check, "redact");
  EXPECT_EQ(f.outcome, CheckOutcome::kTransformed);
  EXPECT_EQ(f.offset, 4u);
  EXPECT_NE(f.detail.find("redacted 4 matches"), std::string::npos) << f.detail;
  EXPECT_NE(r.delivered_sha256, r.raw_sha256);
  EXPECT_EQ(r.delivered_sha256, Sha256Hex(r.delivered));
}

TEST(StreamValidatorTest, OverlappingRedactionsMergeSoNoByteSurvives) {
  Validator v = Stdout();
  // "secret-[0-9]+" and "[0-9]+-tail" overlap on the digits.
  v.regex = {Redact("secret-[0-9]+", "<A>"), Redact("[0-9]+-tail", "<B>")};
  ValidationReport r = Validate(Compile({v}), "x secret-1234-tail y");
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "x <A> y");
  // Adjacent (not overlapping) matches stay separate.
  ValidationReport adj = Validate(Compile({v}), "secret-1 2-tail");
  EXPECT_EQ(adj.delivered, "<A> <B>");
}

TEST(StreamValidatorTest, ReplacementThatMatchesItsPatternIsFine) {
  Validator v = Stdout();
  v.regex = {Redact("[A-Z]{5,}")};  // "[REDACTED]" contains "REDACTED", inside the replacement
  ValidationReport r = Validate(Compile({v}), "shout LOUDLY please");
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "shout [REDACTED] please");
}

TEST(StreamValidatorTest, RedactionThatCreatesANewMatchRejects) {
  Validator v = Stdout();
  v.regex = {Redact("ab", "a")};  // "aabb" -> "a" + "a" + "b" = "aab": a new "ab" across the seam
  ValidationReport r = Validate(Compile({v}), "aabb");
  EXPECT_EQ(Rejection(r).check, "redact");
  EXPECT_NE(Rejection(r).detail.find("remains after redaction"), std::string::npos);
}

TEST(StreamValidatorTest, JsonValidatorReportsPath) {
  Validator v = Stdout();
  v.json = plan::JsonRule{};
  v.json->required = {{"result", "object"}};
  ValidatorSet set = Compile({v});
  EXPECT_FALSE(Validate(set, "{\"result\":{}}\n").rejected);
  ValidationReport r = Validate(set, "{\"result\":{\"a\":[1,2,}}");
  const Finding& f = Rejection(r);
  EXPECT_EQ(f.check, "json");
  EXPECT_EQ(f.json_path, "$.result.a[2]");
  EXPECT_EQ(f.offset, 20u);
  ValidationReport deep = Validate(set, std::string(100000, '['));
  EXPECT_EQ(Rejection(deep).check, "json");
  EXPECT_EQ(Rejection(deep).offset, 64u);
  // Redaction runs first; the JSON check sees what the caller receives.
  v.regex = {Redact(kAwsPattern)};
  ValidationReport red =
      Validate(Compile({v}), std::string("{\"result\":{\"key\":\"") + kAwsKey + "\"}}");
  EXPECT_FALSE(red.rejected);
  EXPECT_EQ(red.delivered, "{\"result\":{\"key\":\"[REDACTED]\"}}");
}

TEST(StreamValidatorTest, SeveralValidatorsOfOneStreamChainInPlanOrder) {
  Validator first = Stdout();
  first.max_bytes = 1000;
  first.on_overflow = OverflowAction::kTruncate;
  first.control = ControlChars::kStrip;
  Validator second = Stdout();
  second.max_bytes = 4;
  second.on_overflow = OverflowAction::kReject;
  Validator for_stderr = second;
  for_stderr.target = ValidatorTarget::kStderr;
  ValidatorSet set = Compile({first, second, for_stderr});
  // 4 bytes once the escapes are stripped by the first validator.
  ValidationReport r = Validate(set, "\x1b[1mabcd\x1b[0m");
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.delivered, "abcd");
  ValidationReport r2 = Validate(set, "abcde");
  EXPECT_EQ(Rejection(r2).validator_index, 1u);
  EXPECT_EQ(r2.findings.front().validator_index, 0u);
  ValidationReport err = set.ValidateStream(ValidatorTarget::kStderr, "abcde", 5, false);
  EXPECT_EQ(Rejection(err).validator_index, 2u);
  EXPECT_EQ(Rejection(err).subject, "stderr");
  EXPECT_NE(Rejection(err).Summary().find("stderr: validate stderr: max: "), std::string::npos);
}

TEST(StreamValidatorTest, CompileRefusesBadValidators) {
  auto fails = [](Validator v, const char* why) {
    Result<ValidatorSet> r = ValidatorSet::Compile({v});
    EXPECT_FALSE(r.ok()) << why;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    }
  };
  Validator v = Stdout();
  v.regex = {Reject("(unclosed")};
  fails(v, "missing )");
  v.regex = {Redact("x*")};
  fails(v, "matches the empty string");
  v.regex = {};
  v.json = plan::JsonRule{};
  v.json->required = {{"a", "int"}};
  fails(v, "unknown JSON type");
  v.json->required = {};
  v.json->max_depth = 0;
  fails(v, "json_max_depth");
  Validator f;
  f.target = ValidatorTarget::kFile;
  fails(f, "absolute path");
  Validator p = Stdout();
  p.path = "/x";
  fails(p, "takes no path");
}

TEST(StreamValidatorTest, FileValidatorsMatchGlobs) {
  Validator json;
  json.target = ValidatorTarget::kFile;
  json.path = "/data/out/*.json";
  Validator all;
  all.target = ValidatorTarget::kFile;
  all.path = "/data/out/**";
  Validator exact;
  exact.target = ValidatorTarget::kFile;
  exact.path = "/data/out/report.txt";
  ValidatorSet set = Compile({Stdout(), json, all, exact});
  EXPECT_EQ(set.FileValidatorsFor("/data/out/a.json"), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(set.FileValidatorsFor("/data/out/report.txt"), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(set.FileValidatorsFor("/data/out/sub/a.json"), (std::vector<size_t>{2}));
  EXPECT_TRUE(set.FileValidatorsFor("/data/in/a.json").empty());
  EXPECT_EQ(set.LiteralFilePaths(), (std::vector<std::string>{"/data/out/report.txt"}));
  EXPECT_EQ(ValidatorDisplayName(json), "validate file \"/data/out/*.json\"");
}

TEST(StreamValidatorTest, HostileSubjectNamesAreEscapedInFindings) {
  Validator f;
  f.target = ValidatorTarget::kFile;
  f.path = "/out/**";
  f.max_bytes = 1;
  ValidatorSet set = Compile({f});
  ValidationReport r = set.ValidateFile("/out/\x1b[2Jevil\n", {0}, "xx", 2, false);
  EXPECT_EQ(Rejection(r).subject, "/out/\\x1b[2Jevil\\n");
}

}  // namespace
}  // namespace safex::output
