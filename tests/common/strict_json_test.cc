// ParseStrictJson: what nlohmann accepts and a strict reader must not (issue 12), and that
// ordinary documents still read the same.
#include "common/strict_json.h"

#include <gtest/gtest.h>

#include <string>

namespace safex {
namespace {

std::string Error(std::string_view text, const StrictJsonOptions& options = {}) {
  auto r = ParseStrictJson(text, options);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  return r.status().message();
}

TEST(StrictJsonTest, OrdinaryDocumentsParse) {
  auto r = ParseStrictJson(R"( {"a": [1, -2, "x", null, true, {"b": 1.5}], "c": {}} )");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)["a"][1], -2);
  EXPECT_EQ((*r)["a"][5]["b"], 1.5);
  EXPECT_TRUE((*r)["c"].is_object());
  EXPECT_TRUE(ParseStrictJson("[]").ok());
  EXPECT_TRUE(ParseStrictJson("\"caf\xc3\xa9\"").ok());
  // The same key in different objects is not a duplicate.
  EXPECT_TRUE(ParseStrictJson(R"({"a": {"k": 1}, "b": {"k": 2}})").ok());
}

TEST(StrictJsonTest, DuplicateKeysAreRefusedAtAnyDepth) {
  EXPECT_NE(Error(R"({"a": 1, "a": 2})").find("duplicate key \"a\""), std::string::npos);
  EXPECT_NE(Error(R"({"x": [{"k": 1, "k": 1}]})").find("duplicate key \"k\""), std::string::npos);
  EXPECT_NE(Error(R"({"x": {"y": {"z": 1, "z": 2}}})").find("duplicate"), std::string::npos);
  // Names are compared unescaped.
  EXPECT_NE(Error(R"({"a": 1, "\u0061": 2})").find("duplicate"), std::string::npos);
}

TEST(StrictJsonTest, ByteOrderMarkIsRefused) {
  EXPECT_NE(Error("\xEF\xBB\xBF{}").find("byte order mark"), std::string::npos);
  EXPECT_NE(Error("\xEF\xBB\xBF[1]").find("byte 0"), std::string::npos);
  // Inside a string it is just a character.
  EXPECT_TRUE(ParseStrictJson("\"\xEF\xBB\xBFx\"").ok());
  // Anywhere else outside strings it is a syntax error anyway.
  EXPECT_NE(Error(" \xEF\xBB\xBF{}"), "");
}

TEST(StrictJsonTest, SyntaxErrorsNameTheByte) {
  EXPECT_NE(Error("{\"a\": }").find("byte "), std::string::npos);
  EXPECT_NE(Error("{} x"), "");         // trailing bytes
  EXPECT_NE(Error(""), "");             // nothing
  EXPECT_NE(Error("\"\xff\""), "");     // invalid UTF-8
  EXPECT_NE(Error("{\"a\": 1,}"), "");  // trailing comma
  EXPECT_NE(Error("{'a': 1}"), "");     // not JSON quotes
}

TEST(StrictJsonTest, NestingIsBounded) {
  EXPECT_NE(Error(std::string(100, '[') + std::string(100, ']')).find("nesting deeper than 32"),
            std::string::npos);
  StrictJsonOptions three;
  three.max_depth = 3;
  EXPECT_TRUE(ParseStrictJson("[[[]]]", three).ok());
  EXPECT_NE(Error("[[[[]]]]", three), "");
  EXPECT_NE(Error(R"({"a":{"b":{"c":{}}}})", three), "");
}

TEST(StrictJsonTest, IntegersOnlyRefusesFloatsAndOverflow) {
  StrictJsonOptions ints;
  ints.integers_only = true;
  EXPECT_TRUE(ParseStrictJson("[1, -9223372036854775808, 18446744073709551615]", ints).ok());
  EXPECT_NE(Error("[1.0]", ints).find("not an integer"), std::string::npos);
  EXPECT_NE(Error("[1e3]", ints).find("not an integer"), std::string::npos);
  EXPECT_NE(Error("[18446744073709551616]", ints).find("not an integer"), std::string::npos);
  EXPECT_TRUE(ParseStrictJson("[1.0]").ok());
}

}  // namespace
}  // namespace safex
