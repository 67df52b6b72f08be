// Reading typed values out of the generic syntax tree, with diagnostics. Shared by the policy
// lowering and the host config (both are written in the policy language).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/ast.h"
#include "dsl/diagnostics.h"

namespace safex::compiler {

// Collects the diagnostics of one phase for one file.
class Diags {
 public:
  // Errors past this many are counted but not recorded (the parser caps its own at 100).
  static constexpr size_t kMaxDiagnostics = 100;
  Diags(std::string path, std::vector<dsl::Diagnostic>* out) : path_(std::move(path)), out_(out) {}
  void Error(const char* code, const dsl::Span& span, std::string message, std::string help = "");
  void Warning(const char* code, const dsl::Span& span, std::string message, std::string help = "");
  const std::string& path() const { return path_; }
  std::vector<dsl::Diagnostic>* out() const { return out_; }
  size_t errors() const { return errors_; }

 private:
  std::string path_;
  std::vector<dsl::Diagnostic>* out_;
  size_t errors_ = 0;
};

// "identifier", "string", "integer", "size", "duration", "regex", "list".
std::string DescribeValue(const dsl::Value& v);

// Each reader reports E021 (wrong type), E022 (wrong unit kind), E023 (out of range) or E026
// (unknown name) and returns nullopt on error.
std::optional<uint64_t> ReadDuration(const dsl::Value& v, Diags& d, std::string_view what);  // ns
std::optional<uint64_t> ReadSize(const dsl::Value& v, Diags& d, std::string_view what);  // bytes
// A plain integer in [min, max].
std::optional<uint64_t> ReadInteger(const dsl::Value& v, Diags& d, std::string_view what,
                                    uint64_t min, uint64_t max);
std::optional<bool> ReadBool(const dsl::Value& v, Diags& d, std::string_view what);
std::optional<std::string> ReadString(const dsl::Value& v, Diags& d, std::string_view what);
// An identifier from `choices`; E026 with "did you mean" otherwise.
std::optional<std::string> ReadChoice(const dsl::Value& v, Diags& d, std::string_view what,
                                      const std::vector<std::string_view>& choices);
// A list whose items are checked by the caller; E021 when `v` is not a list.
const std::vector<dsl::Value>* ReadList(const dsl::Value& v, Diags& d, std::string_view what);

// "30s", "1.5 GiB"-free human forms: the largest unit that divides the value exactly.
std::string FormatDuration(uint64_t ns);
std::string FormatSize(uint64_t bytes);

// Errno names accepted by `errno NAME [...]` (E2BIG ... EXDEV).
std::optional<int> ErrnoFromName(std::string_view name);
std::string ErrnoName(int value);
std::vector<std::string_view> ErrnoNames();

}  // namespace safex::compiler
