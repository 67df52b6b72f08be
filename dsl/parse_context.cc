#include "dsl/parse_context.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "dsl/formatter.h"
#include "dsl/text.h"

namespace safex::dsl::internal {

ParseContext::ParseContext(std::string_view text, const ParseLimits& limits,
                           const std::string& path, File* file,
                           std::vector<Diagnostic>* diagnostics)
    : base_(text.data()),
      end_(text.data() + text.size()),
      limits_(limits),
      path_(path),
      file_(file),
      diagnostics_(diagnostics) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') line_starts_.push_back(i + 1);
  }
}

Position ParseContext::PositionAt(const char* p) const {
  const auto offset = static_cast<uint64_t>(p - base_);
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const auto line = static_cast<size_t>(it - line_starts_.begin());  // >= 1
  Position pos;
  pos.line = static_cast<uint32_t>(line);
  pos.column = static_cast<uint32_t>(offset - line_starts_[line - 1] + 1);
  pos.offset = offset;
  return pos;
}

Span ParseContext::SpanOf(const char* begin, const char* end) const {
  return Span{PositionAt(begin), PositionAt(end)};
}

Span ParseContext::CharSpan(const char* p) const {
  if (p >= end_) return SpanOf(end_, end_);
  if (*p == '\n' || *p == '\r') return SpanOf(p, p);
  char32_t cp;
  size_t n = text::DecodeUtf8(std::string_view(p, static_cast<size_t>(end_ - p)), 0, &cp);
  if (n == 0) n = 1;
  return SpanOf(p, p + n);
}

std::string ParseContext::Describe(const char* p) const {
  if (p >= end_) return "the end of the file";
  if (*p == '\n' || *p == '\r') return "the end of the line";
  if (*p == '`') return "a backquote";
  const auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  };
  if (word_char(*p) && *p != '-' && *p != '.') {
    // A whole name or number reads better than its first character.
    const char* e = p;
    while (e < end_ && word_char(*e) && e - p < 40) ++e;
    return "`" + std::string(p, e) + (e < end_ && word_char(*e) ? "...`" : "`");
  }
  const Span s = CharSpan(p);
  const std::string_view ch(p, static_cast<size_t>(s.end.offset - s.begin.offset));
  return "`" + text::EscapeForTerminal(ch) + "`";
}

void ParseContext::Report(const char* code, Span span, std::string message, std::string help) {
  Diagnostic d;
  d.severity = Severity::kError;
  d.code = code;
  d.message = std::move(message);
  d.path = path_;
  d.span = span;
  d.help = std::move(help);
  diagnostics_->push_back(std::move(d));
  if (diagnostics_->size() >= std::max<uint32_t>(limits_.max_diagnostics, 1)) throw FatalAbort{};
}

bool ParseContext::ErrorSince(const char* p) const {
  const auto offset = static_cast<uint64_t>(p - base_);
  for (auto it = diagnostics_->rbegin(); it != diagnostics_->rend(); ++it) {
    if (it->span.begin.offset >= offset) return true;
  }
  return false;
}

void ParseContext::Fail(const char* code, Span span, std::string message, std::string help) {
  Report(code, span, std::move(message), std::move(help));
  throw SyntaxAbort{};
}

void ParseContext::Restore(const Checkpoint& c) {
  if (frames_.size() > c.frames)
    frames_.erase(frames_.begin() + static_cast<long>(c.frames), frames_.end());
  if (open_.size() > c.open) open_.resize(c.open);
}

std::vector<Statement>& ParseContext::Siblings() {
  return frames_.empty() ? file_->statements : frames_.back().stmt.block;
}

void ParseContext::BeginStatement(const char* p) {
  if (Siblings().size() >= limits_.max_items) {
    Report(code::kTooMany, CharSpan(p),
           frames_.empty() ? "too many statements in the file (the limit is " +
                                 std::to_string(limits_.max_items) + ")"
                           : "too many statements in one block (the limit is " +
                                 std::to_string(limits_.max_items) + ")");
    throw FatalAbort{};
  }
  Frame f;
  f.kind = Frame::Kind::kStatement;
  f.stmt.span = SpanOf(p, p);
  frames_.push_back(std::move(f));
}

void ParseContext::EndStatement() {
  Statement s = std::move(frames_.back().stmt);
  frames_.pop_back();
  Siblings().push_back(std::move(s));
}

void ParseContext::FinishAfterAbort() {
  while (!frames_.empty()) {
    if (frames_.back().kind != Frame::Kind::kStatement || !frames_.back().stmt.has_block) {
      frames_.pop_back();  // a half-read list, annotation or statement
      continue;
    }
    EndStatement();
  }
  open_.clear();
}

Statement& ParseContext::CurrentStatement() { return frames_.back().stmt; }

void ParseContext::EmitValue(Value v) {
  Frame& f = frames_.back();
  const auto too_many = [&](const char* what) {
    Fail(code::kTooMany, v.span,
         std::string("too many ") + what + " (the limit is " + std::to_string(limits_.max_items) +
             ")");
  };
  switch (f.kind) {
    case Frame::Kind::kList:
      if (f.list.items.size() >= limits_.max_items) too_many("items in one list");
      f.list.items.push_back(std::move(v));
      return;
    case Frame::Kind::kAnnotation:
      if (f.ann.args.size() >= limits_.max_items) too_many("annotation arguments");
      f.ann.args.push_back(std::move(v));
      return;
    case Frame::Kind::kStatement:
      f.stmt.span.end = v.span.end;
      if (f.in_assignment) {
        f.stmt.assigned = std::move(v);
      } else {
        if (f.stmt.head.size() >= limits_.max_items) too_many("values in one statement");
        f.stmt.head.push_back(std::move(v));
      }
      return;
  }
}

void ParseContext::BeginList(const char* open) {
  Frame f;
  f.kind = Frame::Kind::kList;
  f.list.kind = ValueKind::kList;
  f.list.span.begin = PositionAt(open);
  f.open = open;
  frames_.push_back(std::move(f));
}

void ParseContext::EndList(const char* end) {
  Value v = std::move(frames_.back().list);
  frames_.pop_back();
  v.span.end = PositionAt(end);
  Close();
  EmitValue(std::move(v));
}

void ParseContext::BeginAnnotation(const char* at) {
  Frame f;
  f.kind = Frame::Kind::kAnnotation;
  f.ann.span.begin = PositionAt(at);
  frames_.push_back(std::move(f));
}

void ParseContext::SetAnnotationName(const char* begin, const char* end) {
  if (static_cast<size_t>(end - begin) > limits_.max_token_bytes) {
    Fail(code::kTokenTooLong, SpanOf(begin, end),
         "annotation name is too long (the limit is " + std::to_string(limits_.max_token_bytes) +
             " bytes)");
  }
  frames_.back().ann.name.assign(begin, end);
}

void ParseContext::EndAnnotation(const char* end) {
  Annotation a = std::move(frames_.back().ann);
  frames_.pop_back();
  a.span.end = PositionAt(end);
  Statement& s = frames_.back().stmt;
  if (s.annotations.size() >= limits_.max_items) {
    Fail(code::kTooMany, a.span,
         "too many annotations on one statement (the limit is " +
             std::to_string(limits_.max_items) + ")");
  }
  s.span.end = a.span.end;
  s.annotations.push_back(std::move(a));
}

void ParseContext::BeginAssignment() {
  Frame& f = frames_.back();
  f.in_assignment = true;
  f.stmt.has_assignment = true;
}

void ParseContext::BeginBlock(const char* brace) {
  Open(brace);
  Statement& s = frames_.back().stmt;
  s.has_block = true;
  s.block_span.begin = PositionAt(brace);
  frames_.back().in_assignment = false;
}

void ParseContext::EndBlock(const char* end) {
  Statement& s = frames_.back().stmt;
  s.block_span.end = PositionAt(end);
  s.span.end = s.block_span.end;
  Close();
}

void ParseContext::Open(const char* p) {
  if (open_.size() + 1 > limits_.max_depth) {
    Fail(code::kTooDeep, CharSpan(p),
         "blocks and lists are nested too deeply (the limit is " +
             std::to_string(limits_.max_depth) + " levels)");
  }
  open_.push_back(p);
}

void ParseContext::Close() {
  if (!open_.empty()) open_.pop_back();
}

void ParseContext::AddComment(const char* begin, const char* end) {
  Comment c;
  c.span = SpanOf(begin, end);
  c.text.assign(begin + 1, end);  // without the '#'
  file_->comments.push_back(std::move(c));
}

std::string ParseContext::LastTokenText() const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (it->kind != Frame::Kind::kStatement) continue;
    const Statement& s = it->stmt;
    if (s.has_assignment) return "=";
    if (s.head.empty()) return "";
    std::string t = FormatValue(s.head.back());
    if (text::Utf8Length(t) > 40) {
      // Cut on a character boundary.
      size_t bytes = 0;
      size_t chars = 0;
      while (bytes < t.size() && chars < 37) {
        ++bytes;
        while (bytes < t.size() && (static_cast<unsigned char>(t[bytes]) & 0xC0) == 0x80) ++bytes;
        ++chars;
      }
      t = t.substr(0, bytes) + "...";
    }
    return t;
  }
  return "";
}

const char* ParseContext::SkipStatement(const char* from) {
  // Open brackets since `from`, and how many of each kind, so a closer finds its opener in
  // amortised constant time even on 100,000 unbalanced brackets.
  std::vector<char> stack;
  std::array<size_t, 2> count{};  // [ {
  const auto kind = [](char c) { return c == '[' || c == ']' ? 0 : 1; };
  const char* p = from;
  while (p < end_) {
    const char c = *p;
    switch (c) {
      case '\n':
        if (stack.empty()) return p;
        ++p;
        break;
      case '\r':
        if (stack.empty() && p + 1 < end_ && p[1] == '\n') return p;
        ++p;
        break;
      case ';':
        ++p;
        if (stack.empty()) return p;
        break;
      case '#':
        while (p < end_ && *p != '\n' && *p != '\r') ++p;
        break;
      case '"':
      case '/': {
        // A string or regex closed on this line is skipped whole (brackets inside it do not
        // count). An unclosed one is more likely a typo (`at /tmp {`) than a string that really
        // holds the rest of the line, so then the quote is skipped alone. Linear: after an
        // unclosed quote there is no other one of its kind on the line.
        const char* q = p + 1;
        while (q < end_ && *q != c && *q != '\n' && *q != '\r') {
          q += (*q == '\\' && q + 1 < end_ && q[1] != '\n' && q[1] != '\r') ? 2 : 1;
        }
        p = (q < end_ && *q == c) ? q + 1 : p + 1;
        break;
      }
      // Parentheses are not tracked: an annotation's `(...)` stays on one line, and an
      // unclosed `(` must not swallow the rest of the file.
      case '[':
      case '{':
        stack.push_back(c);
        ++count[kind(c)];
        ++p;
        break;
      case ']':
      case '}': {
        const int k = kind(c);
        if (count[k] == 0) {
          if (c == '}') return p;  // closes the enclosing block
          ++p;                     // a stray `]`: part of the junk
          break;
        }
        while (true) {
          const char top = stack.back();
          stack.pop_back();
          --count[kind(top)];
          if (kind(top) == k) break;
        }
        ++p;
        if (c == '}' && stack.empty()) return p;  // the statement ends after its block
        break;
      }
      default:
        ++p;
    }
  }
  if (!stack.empty()) eof_errors_suppressed = true;
  return p;
}

}  // namespace safex::dsl::internal
