// Output validators: what comes out of the sandbox is checked as carefully as what goes in.
//
// A ValidatorSet is compiled once per plan (RE2 patterns included) and then validates stdout,
// stderr and collected files. It is immutable after Compile and safe to use from several threads.
//
// For one subject (stdout, stderr, or one file), every validator of the plan that targets it
// applies, in plan order, each to what the previous one delivers. Within one validator the checks
// run in this order, and the first rejection stops everything:
//   1. max        size cap on what the program produced: truncate (keep the first max bytes) or
//                 reject;
//   2. utf8       strict UTF-8 (RFC 3629); a sequence cut by truncation at the very end is dropped,
//                 not rejected;
//      control    C0/C1 controls, escape sequences, bidi controls: allow, strip or reject
//                 (see text_scan.h for the exact set);
//      max_lines  line cap, with the same overflow action as max (truncate keeps max_lines lines);
//   3. reject /re/  any match rejects (RE2::Set, one pass);
//      redact /re/  every match is replaced (overlapping matches are merged into one replacement);
//                 afterwards the text is scanned again and any match outside a replacement
//                 rejects (fail closed: a redaction must never leave or create a match);
//   4. json       strict RFC 8259, depth cap, required top-level keys (json_check.h).
// Steps 2-4 look at the text as delivered by the steps before them: what the caller would receive.
//
// What the caller receives (ValidationReport::delivered) is the text after truncation, stripping
// and redaction; nothing at all when the subject is rejected.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plan/plan.h"
#include "supervisor/output/text_scan.h"

namespace safex::output {

enum class CheckOutcome { kPass, kTransformed, kRejected };
const char* CheckOutcomeName(CheckOutcome o);

// Finding::validator_index of findings that come from the plan's `outputs` caps (or the walk's
// bounds) rather than from one validator.
inline constexpr size_t kOutputsBlock = static_cast<size_t>(-1);

// The result of one check of one validator on one subject.
struct Finding {
  std::string subject;  // "stdout", "stderr", or the file's path inside the sandbox (escaped)
  // Index in plan.validators (provenance key "validators[i]"), or kOutputsBlock.
  size_t validator_index = 0;
  // e.g. "validate stdout", "validate file \"/data/out/*.json\"", "outputs"
  std::string validator;
  std::string check;  // max | utf8 | control | max_lines | reject | redact | json | collect
  CheckOutcome outcome = CheckOutcome::kPass;
  std::string detail;  // what happened and where; escaped (safe for logs, JSON and terminals)
  // Where, in the text the check looked at (the text delivered by the checks before it; equal to
  // the raw output's offsets as long as nothing was stripped or redacted before this check).
  std::optional<uint64_t> offset;
  std::optional<uint64_t> line;  // 1-based
  std::string json_path;         // json findings: "$.a[3]"

  // One line for a verdict, e.g.
  // "stdout: validate stdout: reject /AKIA[0-9A-Z]{16}/: match at byte 1234 (line 3)".
  std::string Summary() const;
};

struct ValidationReport {
  std::string subject;  // as in Finding (escaped)
  bool rejected = false;
  std::vector<Finding> findings;  // every check that ran, in order; the last one rejected if any

  std::string delivered;        // what the caller receives; empty when rejected
  uint64_t total_bytes = 0;     // produced by the program (may exceed what was captured)
  uint64_t captured_bytes = 0;  // handed to the validators
  uint64_t delivered_bytes = 0;
  bool truncated = false;        // delivered lacks part of what the program produced
  std::string raw_sha256;        // SHA-256 (hex) of the captured bytes
  std::string delivered_sha256;  // SHA-256 (hex) of delivered; "" when rejected

  // The rejecting finding, or null.
  const Finding* rejection() const;
};

struct CompileOptions {
  // How '\r' is treated by control = strip|reject. The plan has no field for it yet.
  CarriageReturn carriage_return = CarriageReturn::kCrlfOnly;
  // RE2 memory bounds: the reject/redact set of one validator, and each pattern on its own.
  int64_t regex_set_max_mem = 32 << 20;
  int64_t regex_max_mem = 4 << 20;
};

class ValidatorSet {
 public:
  // Compiles every validator of the plan. Fails (InvalidArgument) on a pattern RE2 rejects or
  // that matches the empty string, an unknown JSON type, or a file validator without a path.
  static Result<ValidatorSet> Compile(const std::vector<plan::Validator>& validators,
                                      const CompileOptions& options = {});

  ValidatorSet(ValidatorSet&&) noexcept;
  ValidatorSet& operator=(ValidatorSet&&) noexcept;
  ~ValidatorSet();

  // Validates stdout or stderr. `captured` is what the capture kept; `total_bytes` what the
  // program wrote (>= captured.size()); `capture_truncated` whether the capture cut it.
  // REQUIRES: target is kStdout or kStderr.
  ValidationReport ValidateStream(plan::ValidatorTarget target, std::string_view captured,
                                  uint64_t total_bytes, bool capture_truncated) const;
  // The same, taking ownership of the captured bytes: when the delivered text is the captured
  // text or a prefix of it (nothing stripped or redacted), it is moved, not copied.
  ValidationReport ValidateStreamOwned(plan::ValidatorTarget target, std::string&& captured,
                                       uint64_t total_bytes, bool capture_truncated) const;

  // Validates a collected file with the validators at `indices` (see FileValidatorsFor).
  // `sandbox_path` names it in findings.
  ValidationReport ValidateFile(std::string_view sandbox_path, const std::vector<size_t>& indices,
                                std::string_view bytes, uint64_t total_bytes, bool truncated) const;

  // Indices (in plan order) of the file validators whose path or glob matches `sandbox_path`
  // (an absolute path inside the sandbox). Glob rules: see glob.h.
  std::vector<size_t> FileValidatorsFor(std::string_view sandbox_path) const;
  // Whether some file validator could match a path strictly below the directory `sandbox_dir`.
  bool FileValidatorsCouldMatchBeneath(std::string_view sandbox_dir) const;
  // The file validators' paths that contain no wildcard (each names exactly one file).
  std::vector<std::string> LiteralFilePaths() const;

  const std::vector<plan::Validator>& validators() const;

 private:
  struct Impl;
  explicit ValidatorSet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "validate stdout", "validate file \"/data/out/*.json\"" (escaped).
std::string ValidatorDisplayName(const plan::Validator& v);

}  // namespace safex::output
