#include "supervisor/output/json_check.h"

#include <gtest/gtest.h>

#include <string>

namespace safex::output {
namespace {

JsonCheckResult Check(std::string_view text, JsonCheckOptions o = {}) { return CheckJson(text, o); }

void ExpectOk(std::string_view text, JsonCheckOptions o = {}) {
  const JsonCheckResult r = CheckJson(text, o);
  EXPECT_TRUE(r.ok) << text << ": " << r.message << " at " << r.path << " byte " << r.offset;
}

void ExpectBad(std::string_view text, uint64_t offset, std::string_view path,
               std::string_view message_part, JsonCheckOptions o = {}) {
  const JsonCheckResult r = CheckJson(text, o);
  EXPECT_FALSE(r.ok) << text;
  EXPECT_EQ(r.offset, offset) << text << ": " << r.message;
  EXPECT_EQ(r.path, path) << text << ": " << r.message;
  EXPECT_NE(r.message.find(message_part), std::string::npos) << text << ": " << r.message;
}

TEST(JsonCheckTest, AcceptsRfc8259Values) {
  for (const char* doc :
       {"{}", "[]", "\"s\"", "0", "-0", "1.5e10", "-2E-3", "true", "false", "null", " \t\r\n[1] ",
        "{\"a\":[1,2,{\"b\":null}],\"c\":\"\\u00e9\\n\\\"\\\\\\/\\b\\f\\r\\t\"}",
        "\"\\ud83d\\ude00\"", "\"h\xc3\xa9llo \xf0\x9f\x98\x80\"", "1e999999",
        "[{\"a\":1},{\"a\":2}]", "123456789012345678901234567890"}) {
    ExpectOk(doc);
  }
}

TEST(JsonCheckTest, RejectsGrammarViolationsWithPlace) {
  ExpectBad("", 0, "$", "empty document");
  ExpectBad("   ", 3, "$", "empty document");
  ExpectBad("{} x", 3, "$", "after the JSON value");
  ExpectBad("{}{}", 2, "$", "after the JSON value");
  ExpectBad("[1,]", 3, "$[1]", "expected a value");
  ExpectBad("{\"a\":1,}", 7, "$", "expected a string key");
  ExpectBad("{'a':1}", 1, "$", "expected a string key");
  ExpectBad("{\"a\" 1}", 5, "$.a", "expected ':'");
  ExpectBad("[1 2]", 3, "$[0]", "expected ',' or ']'");
  ExpectBad("01", 0, "$", "leading zeros");
  ExpectBad("+1", 0, "$", "expected a value");
  ExpectBad(".5", 0, "$", "expected a value");
  ExpectBad("1.", 2, "$", "after '.'");
  ExpectBad("1e", 2, "$", "exponent");
  ExpectBad("-", 1, "$", "end of input");
  ExpectBad("NaN", 0, "$", "expected a value");
  ExpectBad("tru", 0, "$", "invalid literal");
  ExpectBad("[1] // c", 4, "$", "after the JSON value");
  ExpectBad("\xef\xbb\xbf{}", 0, "$", "byte order mark");
  ExpectBad("[1", 2, "$[0]", "unexpected end of input");
  ExpectBad("{\"a\":{\"b\":[1,{\"c d\":tru}]}}", 20, "$.a.b[1][\"c d\"]", "invalid literal");
}

TEST(JsonCheckTest, StringRules) {
  ExpectBad("\"abc", 0, "$", "unterminated string");
  ExpectBad("\"a\x01\"", 2, "$", "unescaped control character");
  ExpectBad("\"a\tb\"", 2, "$", "unescaped control character");
  ExpectBad("\"\\x\"", 1, "$", "invalid escape");
  ExpectBad("\"\\u12\"", 5, "$", "four hex digits");
  ExpectBad("\"\\u12G4\"", 5, "$", "four hex digits");
  ExpectBad("\"\\ud800\"", 1, "$", "lone high surrogate");
  ExpectBad("\"\\ud800\\u0041\"", 1, "$", "not followed by a low surrogate");
  ExpectBad("\"\\udc00\"", 1, "$", "lone low surrogate");
  ExpectBad("\"\xff\"", 1, "$", "invalid UTF-8");
  ExpectBad("\"\xc0\x80\"", 1, "$", "invalid UTF-8");          // overlong
  ExpectBad("\"\xed\xa0\x80\"", 1, "$", "invalid UTF-8");      // UTF-8-encoded surrogate
  ExpectBad("\"\xf4\x90\x80\x80\"", 1, "$", "invalid UTF-8");  // above U+10FFFF
  ExpectBad("[\"ok\", \"\xe2\x82\"]", 8, "$[1]", "invalid UTF-8");
}

TEST(JsonCheckTest, DuplicateKeysAreRejectedAfterUnescaping) {
  ExpectBad("{\"a\":1,\"a\":2}", 7, "$.a", "duplicate key");
  ExpectBad("{\"a\":1,\"\\u0061\":2}", 7, "$.a", "duplicate key");
  ExpectOk("{\"a\":{\"a\":1},\"b\":{\"a\":2}}");
}

TEST(JsonCheckTest, HundredThousandDeepIsRejectedAtTheDepthCap) {
  const std::string deep(100000, '[');
  const JsonCheckResult r = Check(deep);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.offset, 64u);
  EXPECT_NE(r.message.find("json_max_depth = 64"), std::string::npos);
  EXPECT_EQ(r.path,
            "$[0][0][0][0][0][0][0][0][0][0]...(44 levels)...[0][0][0][0][0][0][0][0][0][0]");
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"k\":";
    return s;
  }();
  const JsonCheckResult o = Check(objects);
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.offset, 64u * 5);
}

TEST(JsonCheckTest, DeepNestingDoesNotRecurse) {
  // With the cap lifted, a complete 100,000-deep document is checked on the explicit stack (a
  // recursive parser would overflow the thread stack here, especially under ASan).
  const std::string doc = std::string(100000, '[') + std::string(100000, ']');
  JsonCheckOptions o;
  o.max_depth = 1000000;
  ExpectOk(doc, o);
  ExpectBad(std::string(100000, '[') + std::string(99999, ']'), 199999, "$[0]",
            "unexpected end of input", o);
}

TEST(JsonCheckTest, SizeAndNumberCaps) {
  JsonCheckOptions o;
  o.max_bytes = 10;
  ExpectBad("[1,2,3,4,5,6]", 10, "$", "more than 10", o);
  ExpectBad(std::string(5000, '7'), 0, "$", "5000 characters");
  ExpectOk(std::string(4096, '7'));
}

TEST(JsonCheckTest, RequiredTopLevelKeysAndTypes) {
  JsonCheckOptions o;
  o.required = {{"status", "string"}, {"count", "integer"}, {"score", "number"}, {"items", "array"},
                {"meta", "object"},   {"ok", "boolean"},    {"err", "null"}};
  const std::string good =
      "{\"status\":\"done\",\"count\":3,\"score\":2,\"items\":[],\"meta\":{\"count\":\"x\"},"
      "\"ok\":true,\"err\":null,\"extra\":1}";
  ExpectOk(good, o);
  ExpectBad("{\"status\":\"done\"}", 0, "$.count", "required key is missing", o);
  ExpectBad(
      "{\"status\":\"done\",\"count\":3.5,\"score\":2,\"items\":[],\"meta\":{},\"ok\":true,"
      "\"err\":null}",
      25, "$.count", "has type number, required integer", o);
  ExpectBad("[1]", 0, "$", "found array", o);
  JsonCheckOptions weird;
  weird.required = {{"a b", "string"}};
  ExpectBad("{\"a b\":1}", 7, "$[\"a b\"]", "has type integer, required string", weird);
}

TEST(JsonCheckTest, KnownTypes) {
  EXPECT_TRUE(IsKnownJsonType("integer"));
  EXPECT_TRUE(IsKnownJsonType("null"));
  EXPECT_FALSE(IsKnownJsonType("int"));
  EXPECT_FALSE(IsKnownJsonType(""));
}

}  // namespace
}  // namespace safex::output
