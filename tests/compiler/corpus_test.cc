// The broken-policy corpus: every tests/corpus/broken/compile/*.policy starts with
// `# expect: E0xx LINE:COL` lines, the diagnostics (errors and warnings) the compiler must report,
// in order and nothing else. `extends` resolves in parents/ and then in the corpus folder.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/compiler.h"
#include "tests/support/test_support.h"

namespace safex::compiler {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Expectations(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  const std::string prefix = "# expect: ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) break;
    out.push_back(line.substr(prefix.size()));
  }
  return out;
}

TEST(CompileCorpusTest, EveryBrokenPolicyReportsExactlyItsExpectedDiagnostics) {
  std::string dir = safex::testing::SourceDir() + "/tests/corpus/broken/compile";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".policy") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 25u);
  std::set<std::string> codes;
  CompileOptions opt;
  opt.search_path = {dir + "/parents", dir};
  for (const auto& path : files) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto expected = Expectations(ss.str());
    ASSERT_FALSE(expected.empty()) << path << ": no `# expect: E0xx LINE:COL` header";
    auto r = CompileFile(path, opt);
    std::vector<std::string> got;
    for (const auto& d : r.diagnostics) {
      got.push_back(d.code + " " + std::to_string(d.span.begin.line) + ":" +
                    std::to_string(d.span.begin.column));
      codes.insert(d.code);
    }
    EXPECT_EQ(got, expected) << path << "\n" << RenderAll(r);
    EXPECT_FALSE(r.ok()) << path << " compiled";
  }
  // The corpus exercises each family: structure/types, extends/tightening, plan invariants.
  for (const char* c :
       {"E020", "E021", "E022", "E023", "E024", "E025", "E026", "E027", "E028", "E029",
        "E032", "E033", "E034", "E035", "E036", "E037", "E040", "E041", "E042", "E045",
        "E046", "E047", "E048", "E049", "E050", "E051", "E053", "E054", "E061", "E064",
        "E066", "E067", "E068", "E071", "E073", "E074", "E081", "E083"}) {
    EXPECT_TRUE(codes.count(c)) << c << " is not exercised by the corpus";
  }
}

}  // namespace
}  // namespace safex::compiler
