// Stream validators on arbitrary program output, with two fixed, realistic validator sets (the
// first input byte picks one). Properties of what is delivered are checked, not only "no crash".
#include <re2/re2.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/sha256.h"
#include "supervisor/output/stream_validator.h"
#include "supervisor/output/utf8.h"

namespace {

using namespace safex;
using namespace safex::output;

const char* const kReject[] = {"AKIA[0-9A-Z]{16}", "-----BEGIN [A-Z ]*PRIVATE KEY-----"};
const char* const kRedact[] = {"gh[pousr]_[A-Za-z0-9]{8,}", "secret=[^ \\n]+", "[0-9]{4}-[0-9]{4}"};

constexpr uint64_t kMax = 2048;
constexpr uint64_t kMaxLines = 20;

// Set A: truncate, utf8, strip controls, line cap, reject + redact.
// Set B: reject overflow, control = reject, JSON with required keys.
const ValidatorSet& SetA() {
  static const ValidatorSet* set = [] {
    plan::Validator v;
    v.target = plan::ValidatorTarget::kStdout;
    v.max_bytes = kMax;
    v.on_overflow = plan::OverflowAction::kTruncate;
    v.utf8 = true;
    v.control = plan::ControlChars::kStrip;
    v.max_lines = kMaxLines;
    for (const char* p : kReject) v.regex.push_back({p, plan::RegexAction::kReject, ""});
    for (const char* p : kRedact) v.regex.push_back({p, plan::RegexAction::kRedact, "[X]"});
    Result<ValidatorSet> r = ValidatorSet::Compile({v});
    if (!r.ok()) abort();
    return new ValidatorSet(std::move(r).value());
  }();
  return *set;
}

const ValidatorSet& SetB() {
  static const ValidatorSet* set = [] {
    plan::Validator v;
    v.target = plan::ValidatorTarget::kStdout;
    v.max_bytes = kMax;
    v.on_overflow = plan::OverflowAction::kReject;
    v.utf8 = false;
    v.control = plan::ControlChars::kReject;
    v.json = plan::JsonRule{};
    v.json->max_depth = 8;
    v.json->required = {{"ok", "boolean"}};
    Result<ValidatorSet> r = ValidatorSet::Compile({v});
    if (!r.ok()) abort();
    return new ValidatorSet(std::move(r).value());
  }();
  return *set;
}

void Check(bool cond) {
  if (!cond) abort();
}

bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) return false;
    p += c.length;
  }
  return true;
}

bool NoControls(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const Utf8Char c = DecodeUtf8(p, end);
    if (c.status != Utf8Status::kOk) return false;
    const uint32_t cp = c.code_point;
    if (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r') return false;
    if (cp == '\r' && !(p + 1 < end && p[1] == '\n')) return false;
    if (cp >= 0x7F && cp <= 0x9F) return false;
    if (IsBidiControl(cp)) return false;
    p += c.length;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool set_b = data[0] & 1;
  const std::string_view out(reinterpret_cast<const char*>(data + 1), size - 1);
  // Pretend the capture sometimes kept less than the program wrote.
  const uint64_t total = (data[0] & 2) ? out.size() + 100 : out.size();
  const ValidationReport r =
      (set_b ? SetB() : SetA())
          .ValidateStream(plan::ValidatorTarget::kStdout, out, total, total != out.size());
  Check(r.raw_sha256 == Sha256Hex(out));
  if (r.rejected) {
    Check(r.rejection() != nullptr && r.rejection()->outcome == CheckOutcome::kRejected);
    Check(r.delivered.empty() && r.delivered_sha256.empty());
    return 0;
  }
  Check(r.delivered_sha256 == Sha256Hex(r.delivered));
  Check(r.delivered.size() <= kMax);
  if (set_b) {
    Check(r.delivered == out);  // set B only checks
    return 0;
  }
  Check(ValidUtf8(r.delivered));
  Check(NoControls(r.delivered));
  uint64_t lines = 0;
  for (char c : r.delivered) lines += c == '\n';
  if (!r.delivered.empty() && r.delivered.back() != '\n') ++lines;
  Check(lines <= kMaxLines);
  for (const char* p : kReject) Check(!RE2::PartialMatch(r.delivered, p));
  // Redact patterns may only match inside a replacement ("[X]" cannot match any of them).
  for (const char* p : kRedact) Check(!RE2::PartialMatch(r.delivered, p));
  return 0;
}
