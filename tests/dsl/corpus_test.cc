// The broken-syntax corpus (tests/corpus/broken/syntax/*.policy): each file starts with one or more
// `# expect: E0xx LINE:COL` lines, the diagnostics Parse() must report, in order and nothing
// else. The wording is not asserted, so messages can improve without touching the corpus.
// The valid corpus (tests/dsl/testdata/valid and policies/examples) must parse cleanly.
#include <gtest/gtest.h>

#include <regex>
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

std::vector<std::string> Expectations(const std::string& text) {
  static const std::regex kExpect(R"(^# expect: (E\d{3}) (\d+):(\d+)\s*$)");
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (!std::regex_match(line, m, kExpect)) break;  // the header is the leading lines
    out.push_back(m[1].str() + " " + m[2].str() + ":" + m[3].str());
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
  for (const std::string& p : ListFiles(safex::testing::SourceDir() + "/policies/examples",
                                        ".policy")) {
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
