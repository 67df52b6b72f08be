#include "supervisor/output/stream_validator.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <utility>

#include "common/sha256.h"
#include "supervisor/output/escape.h"
#include "supervisor/output/glob.h"
#include "supervisor/output/json_check.h"

namespace safex::output {
namespace {

struct CompiledValidator {
  size_t index = 0;
  const plan::Validator* spec = nullptr;  // points into Impl::validators
  std::string display;
  // Every regex rule of the validator, in order: one RE2::Set pass finds which of them match;
  // the single patterns locate matches (reject) and find every match (redact).
  std::unique_ptr<RE2::Set> set;
  std::vector<std::unique_ptr<RE2>> each;
  bool has_reject = false;
  bool has_redact = false;
  std::unique_ptr<PathGlob> glob;  // kFile
  JsonCheckOptions json;
};

std::string Pattern(const plan::RegexRule& r) {
  return "/" + EscapeForLog(r.pattern, {.max_output = 120}) + "/";
}

uint64_t LineAt(std::string_view text, uint64_t offset) {
  offset = std::min<uint64_t>(offset, text.size());
  return 1 + static_cast<uint64_t>(std::count(text.begin(), text.begin() + offset, '\n'));
}

std::string At(uint64_t offset, uint64_t line) {
  return "byte " + std::to_string(offset) + " (line " + std::to_string(line) + ")";
}

struct Span {
  size_t begin;
  size_t end;
  size_t rule;
};

// Every non-empty match of `re` in text, left to right, non-overlapping.
void FindAll(const RE2& re, std::string_view text, size_t rule, std::vector<Span>* out) {
  size_t pos = 0;
  re2::StringPiece m;
  while (pos <= text.size() && re.Match(re2::StringPiece(text.data(), text.size()), pos,
                                        text.size(), RE2::UNANCHORED, &m, 1)) {
    const size_t b = static_cast<size_t>(m.data() - text.data());
    const size_t e = b + m.size();
    if (e == b) {  // e.g. \b: nothing to redact; step past it
      pos = b + 1;
      continue;
    }
    out->push_back({b, e, rule});
    pos = e;
  }
}

// Which rules of cv match text. Falls back to one pattern at a time if the set's DFA runs out of
// memory (each RE2 then falls back to its NFA: slower, still linear).
std::vector<int> MatchingRules(const CompiledValidator& cv, std::string_view text) {
  std::vector<int> hits;
  RE2::Set::ErrorInfo info{RE2::Set::kNoError};
  const re2::StringPiece sp(text.data(), text.size());
  if (!cv.set->Match(sp, &hits, &info) && info.kind != RE2::Set::kNoError) {
    hits.clear();
    for (size_t i = 0; i < cv.each.size(); ++i) {
      if (RE2::PartialMatch(sp, *cv.each[i])) hits.push_back(static_cast<int>(i));
    }
  }
  std::sort(hits.begin(), hits.end());
  return hits;
}

class Chain {
 public:
  Chain(ValidationReport* report, const CompileOptions& options)
      : report_(report), options_(options) {}

  // Applies one validator to text_ (which views captured or buf_). False when it rejected.
  bool Apply(const CompiledValidator& cv);

  std::string_view text_;
  bool truncated_ = false;
  uint64_t produced_ = 0;

 private:
  Finding& Add(const CompiledValidator& cv, const char* check, CheckOutcome outcome,
               std::string detail) {
    Finding f;
    f.subject = report_->subject;
    f.validator_index = cv.index;
    f.validator = cv.display;
    f.check = check;
    f.outcome = outcome;
    f.detail = std::move(detail);
    report_->findings.push_back(std::move(f));
    return report_->findings.back();
  }
  Finding& AddAt(const CompiledValidator& cv, const char* check, CheckOutcome outcome,
                 std::string detail, uint64_t offset, uint64_t line) {
    Finding& f = Add(cv, check, outcome, std::move(detail));
    f.offset = offset;
    f.line = line;
    return f;
  }
  void Replace(std::string next) {
    buf_ = std::move(next);
    text_ = buf_;
  }
  bool ApplyMax(const CompiledValidator& cv);
  bool ApplyScan(const CompiledValidator& cv);
  bool ApplyRegex(const CompiledValidator& cv);
  bool ApplyJson(const CompiledValidator& cv);

  ValidationReport* report_;
  const CompileOptions& options_;
  std::string buf_;
};

bool Chain::ApplyMax(const CompiledValidator& cv) {
  const plan::Validator& v = *cv.spec;
  if (v.max_bytes == 0) return true;
  const std::string sizes =
      std::to_string(produced_) + " bytes, max = " + std::to_string(v.max_bytes);
  if (produced_ <= v.max_bytes) {
    Add(cv, "max", CheckOutcome::kPass, sizes);
    return true;
  }
  if (v.on_overflow == plan::OverflowAction::kReject) {
    AddAt(cv, "max", CheckOutcome::kRejected, "output is " + sizes + " (overflow = reject)",
          v.max_bytes, LineAt(text_, v.max_bytes));
    return false;
  }
  if (text_.size() > v.max_bytes) text_ = text_.substr(0, v.max_bytes);
  truncated_ = true;
  AddAt(
      cv, "max", CheckOutcome::kTransformed,
      "truncated to " + std::to_string(v.max_bytes) + " of " + std::to_string(produced_) + " bytes",
      v.max_bytes, LineAt(text_, v.max_bytes));
  return true;
}

bool Chain::ApplyScan(const CompiledValidator& cv) {
  const plan::Validator& v = *cv.spec;
  if (!v.utf8 && v.control == plan::ControlChars::kAllow && v.max_lines == 0) return true;
  ScanOptions so;
  so.utf8 = v.utf8;
  so.control = v.control;
  so.carriage_return = options_.carriage_return;
  so.max_lines = v.max_lines;
  so.input_truncated = truncated_;
  ScanResult r = ScanText(text_, so);
  if (r.utf8_error) {
    AddAt(cv, "utf8", CheckOutcome::kRejected,
          r.utf8_error->what + " at " + At(r.utf8_error->offset, r.utf8_error->line),
          r.utf8_error->offset, r.utf8_error->line);
    return false;
  }
  if (r.control_error) {
    AddAt(cv, "control", CheckOutcome::kRejected,
          r.control_error->what + " at " + At(r.control_error->offset, r.control_error->line) +
              " (control = reject)",
          r.control_error->offset, r.control_error->line);
    return false;
  }
  if (v.utf8) {
    if (r.partial_tail_dropped != 0) {
      Add(cv, "utf8", CheckOutcome::kTransformed,
          "valid; dropped the last " + std::to_string(r.partial_tail_dropped) +
              " bytes: a UTF-8 sequence cut by truncation");
    } else {
      Add(cv, "utf8", CheckOutcome::kPass, "valid");
    }
  }
  if (v.control == plan::ControlChars::kStrip) {
    if (r.controls_removed == 0) {
      Add(cv, "control", CheckOutcome::kPass, "none found");
    } else {
      AddAt(cv, "control", CheckOutcome::kTransformed,
            "stripped " + std::to_string(r.controls_removed) + " control characters/sequences (" +
                std::to_string(r.bytes_removed) + " bytes); first: " + r.first_removed->what +
                " at " + At(r.first_removed->offset, r.first_removed->line),
            r.first_removed->offset, r.first_removed->line);
    }
  } else if (v.control == plan::ControlChars::kReject) {
    Add(cv, "control", CheckOutcome::kPass, "none found");
  }
  const uint64_t lines = r.lines;
  const bool exceeded = r.lines_exceeded;
  const uint64_t cut = r.line_cut;
  if (r.modified) {
    Replace(std::move(r.output));
  } else {
    text_ = text_.substr(0, text_.size() - r.partial_tail_dropped);
  }
  if (v.max_lines != 0) {
    const std::string counts =
        std::to_string(lines) + " lines, max_lines = " + std::to_string(v.max_lines);
    if (!exceeded) {
      Add(cv, "max_lines", CheckOutcome::kPass, counts);
    } else if (v.on_overflow == plan::OverflowAction::kReject) {
      AddAt(cv, "max_lines", CheckOutcome::kRejected,
            counts + " (overflow = reject); line " + std::to_string(v.max_lines + 1) +
                " starts at byte " + std::to_string(cut),
            cut, v.max_lines + 1);
      return false;
    } else {
      text_ = text_.substr(0, cut);
      truncated_ = true;
      AddAt(cv, "max_lines", CheckOutcome::kTransformed,
            counts + "; truncated to the first " + std::to_string(v.max_lines) + " lines", cut,
            v.max_lines + 1);
    }
  }
  return true;
}

bool Chain::ApplyRegex(const CompiledValidator& cv) {
  if (!cv.set) return true;
  const auto& rules = cv.spec->regex;
  const std::vector<int> hits = MatchingRules(cv, text_);
  // Reject rules: the first one (in policy order) that matched, at its leftmost match.
  for (int h : hits) {
    if (rules[h].action != plan::RegexAction::kReject) continue;
    re2::StringPiece m;
    uint64_t offset = 0;
    if (cv.each[h]->Match(re2::StringPiece(text_.data(), text_.size()), 0, text_.size(),
                          RE2::UNANCHORED, &m, 1)) {
      offset = static_cast<uint64_t>(m.data() - text_.data());
    }
    const uint64_t line = LineAt(text_, offset);
    // Never echo the match: it is secret-shaped by design.
    AddAt(cv, "reject", CheckOutcome::kRejected,
          "match of " + Pattern(rules[h]) + " at " + At(offset, line), offset, line);
    return false;
  }
  if (cv.has_reject) Add(cv, "reject", CheckOutcome::kPass, "no match");
  if (!cv.has_redact) return true;

  std::vector<Span> spans;
  for (int h : hits) {
    if (rules[h].action == plan::RegexAction::kRedact) {
      FindAll(*cv.each[h], text_, static_cast<size_t>(h), &spans);
    }
  }
  if (spans.empty()) {
    Add(cv, "redact", CheckOutcome::kPass, "nothing to redact");
    return true;
  }
  // Overlapping matches (of one or several rules) become one replacement, so no byte of either
  // match survives; it takes the replacement of the match that starts first (ties: policy order).
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.rule < b.rule;
  });
  std::vector<Span> merged;
  for (const Span& s : spans) {
    if (!merged.empty() && s.begin < merged.back().end) {
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  std::string out;
  out.reserve(text_.size());
  std::vector<std::pair<size_t, size_t>> inserted;  // replacement spans in `out`
  size_t copied = 0;
  for (const Span& s : merged) {
    out.append(text_.data() + copied, s.begin - copied);
    const std::string& rep = rules[s.rule].replacement;
    inserted.emplace_back(out.size(), out.size() + rep.size());
    out.append(rep);
    copied = s.end;
  }
  out.append(text_.data() + copied, text_.size() - copied);
  const uint64_t first = merged.front().begin;
  const uint64_t first_line = LineAt(text_, first);
  const size_t count = merged.size();
  Replace(std::move(out));

  // Fail closed: no match of any rule may remain outside the replacements.
  for (int h : MatchingRules(cv, text_)) {
    std::vector<Span> again;
    FindAll(*cv.each[h], text_, static_cast<size_t>(h), &again);
    for (const Span& s : again) {
      auto it = std::upper_bound(
          inserted.begin(), inserted.end(), s.begin,
          [](size_t v, const std::pair<size_t, size_t>& r) { return v < r.first; });
      const bool inside = it != inserted.begin() && s.begin >= std::prev(it)->first &&
                          s.end <= std::prev(it)->second;
      if (!inside) {
        const uint64_t line = LineAt(text_, s.begin);
        AddAt(
            cv, "redact", CheckOutcome::kRejected,
            "a match of " + Pattern(rules[h]) + " remains after redaction at " + At(s.begin, line),
            s.begin, line);
        return false;
      }
    }
  }
  AddAt(cv, "redact", CheckOutcome::kTransformed,
        "redacted " + std::to_string(count) + " matches; first at " + At(first, first_line), first,
        first_line);
  return true;
}

bool Chain::ApplyJson(const CompiledValidator& cv) {
  if (!cv.spec->json) return true;
  const JsonCheckResult r = CheckJson(text_, cv.json);
  if (r.ok) {
    Add(cv, "json", CheckOutcome::kPass, "well-formed");
    return true;
  }
  const uint64_t line = LineAt(text_, r.offset);
  Finding& f = AddAt(cv, "json", CheckOutcome::kRejected,
                     r.message + " at " + r.path + ", " + At(r.offset, line), r.offset, line);
  f.json_path = r.path;
  return false;
}

bool Chain::Apply(const CompiledValidator& cv) {
  if (!ApplyMax(cv) || !ApplyScan(cv) || !ApplyRegex(cv) || !ApplyJson(cv)) return false;
  produced_ = text_.size();
  return true;
}

}  // namespace

const char* CheckOutcomeName(CheckOutcome o) {
  switch (o) {
    case CheckOutcome::kPass:
      return "pass";
    case CheckOutcome::kTransformed:
      return "transformed";
    case CheckOutcome::kRejected:
      return "rejected";
  }
  return "?";
}

std::string Finding::Summary() const {
  return subject + ": " + validator + ": " + check + ": " + detail;
}

const Finding* ValidationReport::rejection() const {
  if (!rejected || findings.empty()) return nullptr;
  return &findings.back();
}

std::string ValidatorDisplayName(const plan::Validator& v) {
  std::string name = std::string("validate ") + plan::ValidatorTargetName(v.target);
  if (v.target == plan::ValidatorTarget::kFile) {
    name += " \"" + EscapeForLog(v.path, {.max_output = 200, .escape_double_quote = true}) + "\"";
  }
  return name;
}

struct ValidatorSet::Impl {
  std::vector<plan::Validator> validators;
  std::vector<CompiledValidator> compiled;
  CompileOptions options;

  // `owned`, when not null, holds the captured bytes (captured views it) and may be moved into
  // the report instead of copied.
  ValidationReport Run(std::string subject, const std::vector<size_t>& indices,
                       std::string_view captured, std::string* owned, uint64_t total_bytes,
                       bool truncated) const;
  std::vector<size_t> StreamIndices(plan::ValidatorTarget target) const {
    std::vector<size_t> indices;
    for (const CompiledValidator& cv : compiled) {
      if (cv.spec->target == target) indices.push_back(cv.index);
    }
    return indices;
  }
};

ValidationReport ValidatorSet::Impl::Run(std::string subject, const std::vector<size_t>& indices,
                                         std::string_view captured, std::string* owned,
                                         uint64_t total_bytes, bool truncated) const {
  ValidationReport report;
  report.subject = EscapeForLog(subject, {.max_output = 300});
  report.captured_bytes = captured.size();
  report.total_bytes = std::max<uint64_t>(total_bytes, captured.size());
  report.raw_sha256 = Sha256Hex(captured);
  Chain chain(&report, options);
  chain.text_ = captured;
  chain.truncated_ = truncated || report.total_bytes > captured.size();
  chain.produced_ = report.total_bytes;
  for (size_t i : indices) {
    if (!chain.Apply(compiled[i])) {
      report.rejected = true;
      return report;
    }
  }
  // Unchanged or only cut: the delivered text is a prefix of the captured bytes.
  const bool prefix = chain.text_.data() == captured.data();
  const bool same = prefix && chain.text_.size() == captured.size();
  report.delivered_sha256 = same ? report.raw_sha256 : Sha256Hex(chain.text_);
  if (prefix && owned != nullptr) {
    owned->resize(chain.text_.size());
    report.delivered = std::move(*owned);
  } else {
    report.delivered.assign(chain.text_.data(), chain.text_.size());
  }
  report.delivered_bytes = report.delivered.size();
  report.truncated = chain.truncated_;
  return report;
}

ValidatorSet::ValidatorSet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ValidatorSet::ValidatorSet(ValidatorSet&&) noexcept = default;
ValidatorSet& ValidatorSet::operator=(ValidatorSet&&) noexcept = default;
ValidatorSet::~ValidatorSet() = default;

Result<ValidatorSet> ValidatorSet::Compile(const std::vector<plan::Validator>& validators,
                                           const CompileOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->validators = validators;
  impl->options = options;
  impl->compiled.resize(validators.size());
  for (size_t i = 0; i < validators.size(); ++i) {
    const plan::Validator& v = impl->validators[i];
    CompiledValidator& cv = impl->compiled[i];
    cv.index = i;
    cv.spec = &v;
    cv.display = ValidatorDisplayName(v);
    const std::string where = "validators[" + std::to_string(i) + "] (" + cv.display + ")";
    if (v.target == plan::ValidatorTarget::kFile) {
      if (v.path.empty() || v.path[0] != '/') {
        return Status::InvalidArgument(where + ": a file validator needs an absolute path");
      }
      cv.glob = std::make_unique<PathGlob>(v.path);
    } else if (!v.path.empty()) {
      return Status::InvalidArgument(where + ": a stream validator takes no path");
    }
    if (v.json) {
      if (v.json->max_depth == 0) {
        return Status::InvalidArgument(where + ": json_max_depth must be > 0");
      }
      cv.json.max_depth = v.json->max_depth;
      cv.json.required = v.json->required;
      for (const auto& [key, type] : v.json->required) {
        if (!IsKnownJsonType(type)) {
          return Status::InvalidArgument(where + ": unknown JSON type \"" + EscapeForLog(type) +
                                         "\" for key \"" + EscapeForLog(key) + "\"");
        }
      }
    }
    if (v.regex.empty()) continue;
    RE2::Options ro;
    ro.set_log_errors(false);
    ro.set_max_mem(options.regex_set_max_mem);
    cv.set = std::make_unique<RE2::Set>(ro, RE2::UNANCHORED);
    RE2::Options one = ro;
    one.set_max_mem(options.regex_max_mem);
    for (size_t k = 0; k < v.regex.size(); ++k) {
      const plan::RegexRule& rule = v.regex[k];
      const std::string what = where + ": pattern " + Pattern(rule);
      auto re = std::make_unique<RE2>(rule.pattern, one);
      if (!re->ok()) return Status::InvalidArgument(what + ": " + re->error());
      if (re->Match("", 0, 0, RE2::UNANCHORED, nullptr, 0)) {
        return Status::InvalidArgument(what + " matches the empty string");
      }
      std::string error;
      if (cv.set->Add(rule.pattern, &error) != static_cast<int>(k)) {
        return Status::InvalidArgument(what + ": " + error);
      }
      cv.each.push_back(std::move(re));
      if (rule.action == plan::RegexAction::kReject) cv.has_reject = true;
      if (rule.action == plan::RegexAction::kRedact) cv.has_redact = true;
    }
    if (!cv.set->Compile()) {
      return Status::ResourceExhausted(where + ": the regex set does not fit in " +
                                       std::to_string(options.regex_set_max_mem) + " bytes");
    }
  }
  return ValidatorSet(std::move(impl));
}

ValidationReport ValidatorSet::ValidateStream(plan::ValidatorTarget target,
                                              std::string_view captured, uint64_t total_bytes,
                                              bool capture_truncated) const {
  return impl_->Run(plan::ValidatorTargetName(target), impl_->StreamIndices(target), captured,
                    nullptr, total_bytes, capture_truncated);
}

ValidationReport ValidatorSet::ValidateStreamOwned(plan::ValidatorTarget target,
                                                   std::string&& captured, uint64_t total_bytes,
                                                   bool capture_truncated) const {
  std::string owned = std::move(captured);
  return impl_->Run(plan::ValidatorTargetName(target), impl_->StreamIndices(target), owned, &owned,
                    total_bytes, capture_truncated);
}

ValidationReport ValidatorSet::ValidateFile(std::string_view sandbox_path,
                                            const std::vector<size_t>& indices,
                                            std::string_view bytes, uint64_t total_bytes,
                                            bool truncated) const {
  std::vector<size_t> valid;
  for (size_t i : indices) {
    if (i < impl_->compiled.size()) valid.push_back(i);
  }
  return impl_->Run(std::string(sandbox_path), valid, bytes, nullptr, total_bytes, truncated);
}

std::vector<size_t> ValidatorSet::FileValidatorsFor(std::string_view sandbox_path) const {
  std::vector<size_t> out;
  for (const CompiledValidator& cv : impl_->compiled) {
    if (cv.glob && cv.glob->Matches(sandbox_path)) out.push_back(cv.index);
  }
  return out;
}

bool ValidatorSet::FileValidatorsCouldMatchBeneath(std::string_view sandbox_dir) const {
  for (const CompiledValidator& cv : impl_->compiled) {
    if (cv.glob && cv.glob->CouldMatchBeneath(sandbox_dir)) return true;
  }
  return false;
}

std::vector<std::string> ValidatorSet::LiteralFilePaths() const {
  std::vector<std::string> out;
  for (const CompiledValidator& cv : impl_->compiled) {
    if (cv.glob && cv.glob->IsLiteral()) out.push_back(cv.spec->path);
  }
  return out;
}

const std::vector<plan::Validator>& ValidatorSet::validators() const { return impl_->validators; }

}  // namespace safex::output
