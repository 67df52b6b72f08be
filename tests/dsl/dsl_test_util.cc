#include "tests/dsl/dsl_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsl/diagnostics.h"
#include "dsl/formatter.h"

namespace safex::dsl::testing {

File ParseOk(std::string_view text) {
  ParseResult r = Parse("test.policy", text);
  std::string all;
  for (const Diagnostic& d : r.diagnostics) all += RenderDiagnostic(d, text);
  EXPECT_TRUE(r.ok()) << all;
  return std::move(r.file);
}

std::vector<std::string> Codes(const ParseResult& r) {
  std::vector<std::string> out;
  for (const Diagnostic& d : r.diagnostics) {
    out.push_back(d.code + " " + std::to_string(d.span.begin.line) + ":" +
                  std::to_string(d.span.begin.column));
  }
  return out;
}

std::vector<std::string> Codes(std::string_view text) { return Codes(Parse("t.policy", text)); }

namespace {

bool SameValue(const Value& a, const Value& b, std::string* why) {
  if (a.kind != b.kind || a.text != b.text || a.number != b.number || a.unit != b.unit ||
      a.items.size() != b.items.size()) {
    *why = "value " + FormatValue(a) + " vs " + FormatValue(b);
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!SameValue(a.items[i], b.items[i], why)) return false;
  }
  return true;
}

bool SameValues(const std::vector<Value>& a, const std::vector<Value>& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = "value count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameValue(a[i], b[i], why)) return false;
  }
  return true;
}

}  // namespace

bool SameTree(const std::vector<Statement>& a, const std::vector<Statement>& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = "statement count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const Statement& x = a[i];
    const Statement& y = b[i];
    if (x.annotations.size() != y.annotations.size()) {
      *why = "annotation count";
      return false;
    }
    for (size_t k = 0; k < x.annotations.size(); ++k) {
      if (x.annotations[k].name != y.annotations[k].name) {
        *why = "annotation name";
        return false;
      }
      if (!SameValues(x.annotations[k].args, y.annotations[k].args, why)) return false;
    }
    if (!SameValues(x.head, y.head, why)) return false;
    if (x.has_assignment != y.has_assignment || x.has_block != y.has_block) {
      *why = "assignment/block presence";
      return false;
    }
    if (x.has_assignment && !SameValue(x.assigned, y.assigned, why)) return false;
    if (x.has_block && !SameTree(x.block, y.block, why)) return false;
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> ListFiles(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ext) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace safex::dsl::testing
