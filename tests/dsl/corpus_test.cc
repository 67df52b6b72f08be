// The broken-syntax corpus (tests/corpus/broken/syntax/*.policy): each file starts with one or more
// `# expect: E0xx LINE:COL` lines, the diagnostics Parse() must report, in order and nothing
// else. The wording is not asserted, so messages can improve without touching the corpus.
// The valid corpus (tests/dsl/testdata/valid and policies/examples) must parse cleanly.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "dsl/diagnostics.h"
#include "dsl/parser.h"
#include "tests/dsl/dsl_test_util.h"
#include "tests/support/test_support.h"

namespace safex::dsl {
namespace {

using testing::Codes;
using testing::ListFiles;
using testing::ReadFile;

// "# expect: E008 4:17" -> "E008 4:17"; "" when the line is not an expectation. (No std::regex:
// GCC 12 warns inside it under the sanitizer build.)
std::string ParseExpectation(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  const std::string prefix = "# expect: ";
  if (line.rfind(prefix, 0) != 0) return "";
  const std::string rest = line.substr(prefix.size());
  // E + 3 digits, a space, digits, ':', digits.
  if (rest.size() < 8 || rest[0] != 'E' || rest[4] != ' ') return "";
  for (size_t i = 1; i < 4; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(rest[i]))) return "";
  }
  const size_t colon = rest.find(':', 5);
  if (colon == std::string::npos || colon == 5 || colon + 1 >= rest.size()) return "";
  for (size_t i = 5; i < rest.size(); ++i) {
    if (i != colon && !std::isdigit(static_cast<unsigned char>(rest[i]))) return "";
  }
  return rest;
}

std::vector<std::string> Expectations(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string e = ParseExpectation(text.substr(pos, nl - pos));
    if (e.empty()) break;  // the header is the leading lines
    out.push_back(e);
    pos = nl + 1;
  }
  return out;
}

TEST(CorpusTest, BrokenSyntaxFilesReportTheExpectedErrors) {
  const std::string dir = safex::testing::SourceDir() + "/tests/corpus/broken/syntax";
  const std::vector<std::string> files = ListFiles(dir, ".policy");
  ASSERT_GE(files.size(), 25u) << dir;
  size_t multi = 0;
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = ReadFile(path);
    const std::vector<std::string> expected = Expectations(text);
    ASSERT_FALSE(expected.empty()) << "no `# expect: E0xx LINE:COL` header";
    if (expected.size() > 1) ++multi;
    const ParseResult r = Parse(path, text);
    EXPECT_FALSE(r.ok());
    std::string rendered;
    for (const Diagnostic& d : r.diagnostics) {
      const std::string one = RenderDiagnostic(d, text);
      EXPECT_NE(one.find("error[" + d.code + "]"), std::string::npos) << one;
      EXPECT_GE(d.code, "E001");
      EXPECT_LE(d.code, "E019");
      rendered += one;
    }
    EXPECT_EQ(Codes(r), expected) << rendered;
  }
  EXPECT_GE(multi, 5u) << "the corpus should hold files with several errors";
}

TEST(CorpusTest, ValidFilesParse) {
  std::vector<std::string> files =
      ListFiles(safex::testing::SourceDir() + "/tests/dsl/testdata/valid", ".policy");
  ASSERT_GE(files.size(), 3u);
  for (const std::string& p :
       ListFiles(safex::testing::SourceDir() + "/policies/examples", ".policy")) {
    files.push_back(p);
  }
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = ReadFile(path);
    const ParseResult r = Parse(path, text);
    std::string rendered;
    for (const Diagnostic& d : r.diagnostics) rendered += RenderDiagnostic(d, text);
    EXPECT_TRUE(r.ok()) << rendered;
  }
}

}  // namespace
}  // namespace safex::dsl
