// The canonical layout (docs/policy-syntax.md, "Formatting"): 2-space indentation, one
// statement per line, ` = `, lists on one line when they fit in 100 columns and hold no comment,
// else one item per line with a trailing comma; a block stays on one line only when it was
// written on one line, holds one statement without a block, and fits. Comments stay where they
// were: an own-line comment keeps its line (re-indented), a trailing comment stays at the end of
// the line it trailed. At most one blank line is kept between statements.
//
// Every layout decision depends only on the tree, the comments' relative positions and widths,
// never on the original spacing; so formatting formatted text changes nothing.
#include "dsl/formatter.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "dsl/text.h"

namespace safex::dsl {
namespace {

constexpr size_t kWidth = 100;
constexpr uint64_t kEnd = std::numeric_limits<uint64_t>::max();

std::string QuoteString(const std::string& s) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    size_t n = text::DecodeUtf8(s, i, &cp);
    if (n == 0) {  // not from Parse(), which only makes valid UTF-8
      cp = 0xFFFD;
      n = 1;
    }
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (text::IsForbiddenRaw(cp) || cp == 0xFEFF) {
          std::snprintf(buf, sizeof buf, "\\u{%x}", static_cast<unsigned>(cp));
          out += buf;
        } else if (cp == 0xFFFD && n == 1) {
          out += "\\u{fffd}";
        } else {
          out.append(s, i, n);
        }
    }
    i += n;
  }
  out += '"';
  return out;
}

std::string QuoteRegex(const std::string& t) {
  // Backslash pairs are copied as they are (RE2's escapes); a bare `/` is the delimiter, so it
  // is written `\/` (Parse() turned `\/` into `/`).
  std::string out = "/";
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\' && i + 1 < t.size()) {
      out += t[i];
      out += t[++i];
    } else if (t[i] == '/') {
      out += "\\/";
    } else {
      out += t[i];
    }
  }
  out += '/';
  return out;
}

std::string TrimRight(const std::string& s) {
  size_t n = s.size();
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) --n;
  return s.substr(0, n);
}

std::string FlatAnnotation(const Annotation& a) {
  std::string out = "@" + a.name;
  if (!a.args.empty()) {
    out += '(';
    for (size_t i = 0; i < a.args.size(); ++i) {
      if (i > 0) out += ", ";
      out += FormatValue(a.args[i]);
    }
    out += ')';
  }
  return out;
}

std::string FlatStatement(const Statement& s) {
  std::string out;
  for (const Annotation& a : s.annotations) out += FlatAnnotation(a) + " ";
  for (size_t i = 0; i < s.head.size(); ++i) {
    if (i > 0) out += ' ';
    out += FormatValue(s.head[i]);
  }
  if (s.has_assignment) out += " = " + FormatValue(s.assigned);
  return out;
}

class Printer {
 public:
  explicit Printer(const File& f) : comments_(f.comments) {
    std::stable_sort(comments_.begin(), comments_.end(), [](const Comment& a, const Comment& b) {
      return a.span.begin.offset < b.span.begin.offset;
    });
  }

  std::string Run(const File& f) {
    Statements(f.statements, 0, kEnd);
    OwnLineComments(kEnd, 0, true);
    return std::move(out_);
  }

 private:
  static std::string Indent(int level) { return std::string(static_cast<size_t>(level) * 2, ' '); }

  bool HasCommentIn(uint64_t begin, uint64_t end) const {
    auto it =
        std::lower_bound(comments_.begin(), comments_.end(), begin,
                         [](const Comment& c, uint64_t off) { return c.span.begin.offset < off; });
    return it != comments_.end() && it->span.begin.offset < end;
  }

  bool MustBreak(const Value& v) const {
    if (v.kind != ValueKind::kList) return false;
    if (HasCommentIn(v.span.begin.offset, v.span.end.offset)) return true;
    for (const Value& item : v.items) {
      if (MustBreak(item)) return true;
    }
    return false;
  }

  // A blank line before an item that started more than one line after the previous one ended.
  void Blank(uint32_t begin_line) {
    if (!block_start_ && begin_line > last_src_ + 1) out_ += '\n';
    block_start_ = false;
  }

  // Ends the output line, attaching the next comment if it trailed the source line that the
  // output line ends with (and comes before `next_offset`, where the next element starts).
  void EndLine(uint64_t next_offset) {
    if (next_ < comments_.size()) {
      const Comment& c = comments_[next_];
      if (c.span.begin.line == line_src_ && c.span.begin.offset < next_offset) {
        line_ += "  #" + TrimRight(c.text);
        ++next_;
      }
    }
    out_ += TrimRight(line_);
    out_ += '\n';
    line_.clear();
    last_src_ = line_src_;
  }

  void OwnLineComments(uint64_t before, int indent, bool allow_blank) {
    while (next_ < comments_.size() && comments_[next_].span.begin.offset < before) {
      const Comment& c = comments_[next_];
      if (allow_blank) {
        Blank(c.span.begin.line);
      } else {
        block_start_ = false;
      }
      out_ += TrimRight(Indent(indent) + "#" + c.text);
      out_ += '\n';
      last_src_ = c.span.begin.line;
      ++next_;
    }
  }

  void AppendValue(const Value& v, int indent) {
    if (v.kind != ValueKind::kList) {
      line_ += FormatValue(v);
      return;
    }
    if (!MustBreak(v)) {
      const std::string flat = FormatValue(v);
      if (text::Utf8Length(line_) + text::Utf8Length(flat) <= kWidth) {
        line_ += flat;
        return;
      }
    }
    const uint64_t close = v.span.end.offset > 0 ? v.span.end.offset - 1 : 0;  // the `]`
    line_ += '[';
    line_src_ = v.span.begin.line;
    EndLine(v.items.empty() ? close : v.items[0].span.begin.offset);
    for (size_t i = 0; i < v.items.size(); ++i) {
      const Value& item = v.items[i];
      OwnLineComments(item.span.begin.offset, indent + 1, false);
      line_ = Indent(indent + 1);
      AppendValue(item, indent + 1);
      line_ += ',';
      line_src_ = item.span.end.line;
      EndLine(i + 1 < v.items.size() ? v.items[i + 1].span.begin.offset : close);
    }
    OwnLineComments(close, indent + 1, false);
    line_ = Indent(indent) + "]";
    line_src_ = v.span.end.line;
  }

  void AppendAnnotation(const Annotation& a, int indent) {
    line_ += "@" + a.name;
    if (a.args.empty()) return;
    line_ += '(';
    for (size_t i = 0; i < a.args.size(); ++i) {
      if (i > 0) line_ += ", ";
      AppendValue(a.args[i], indent);
    }
    line_ += ')';
  }

  bool CanInline(const Statement& s) const {
    if (s.block.size() != 1 || s.block_span.begin.line != s.block_span.end.line) return false;
    const Statement& inner = s.block[0];
    if (inner.has_block) return false;
    for (const Annotation& a : inner.annotations) {
      for (const Value& v : a.args) {
        if (MustBreak(v)) return false;
      }
    }
    for (const Value& v : inner.head) {
      if (MustBreak(v)) return false;
    }
    if (inner.has_assignment && MustBreak(inner.assigned)) return false;
    return text::Utf8Length(line_) + text::Utf8Length(FlatStatement(inner)) + 5 <= kWidth;
  }

  void Statements(const std::vector<Statement>& list, int indent, uint64_t close_offset) {
    for (size_t i = 0; i < list.size(); ++i) {
      PrintStatement(list[i], indent,
                     i + 1 < list.size() ? list[i + 1].span.begin.offset : close_offset);
    }
  }

  void PrintStatement(const Statement& s, int indent, uint64_t next_offset) {
    OwnLineComments(s.span.begin.offset, indent, true);
    Blank(s.span.begin.line);
    line_ = Indent(indent);
    const uint64_t head_offset = s.head.empty() ? s.span.begin.offset : s.head[0].span.begin.offset;
    const uint32_t head_line = s.head.empty() ? s.span.begin.line : s.head[0].span.begin.line;
    const bool own_line_annotations =
        !s.annotations.empty() && s.annotations.back().span.end.line != head_line;
    for (size_t k = 0; k < s.annotations.size(); ++k) {
      const Annotation& a = s.annotations[k];
      AppendAnnotation(a, indent);
      if (own_line_annotations) {
        const uint64_t next =
            k + 1 < s.annotations.size() ? s.annotations[k + 1].span.begin.offset : head_offset;
        line_src_ = a.span.end.line;
        EndLine(next);
        OwnLineComments(next, indent, false);
        line_ = Indent(indent);
      } else {
        line_ += ' ';
      }
    }
    for (size_t k = 0; k < s.head.size(); ++k) {
      if (k > 0) line_ += ' ';
      AppendValue(s.head[k], indent);
    }
    if (s.has_assignment) {
      line_ += " = ";
      AppendValue(s.assigned, indent);
    }
    if (!s.has_block) {
      line_src_ = s.span.end.line;
      EndLine(next_offset);
      return;
    }
    const uint64_t close = s.block_span.end.offset > 0 ? s.block_span.end.offset - 1 : 0;  // `}`
    if (s.block.empty() && !HasCommentIn(s.block_span.begin.offset, s.block_span.end.offset)) {
      line_ += " {}";
      line_src_ = s.span.end.line;
      EndLine(next_offset);
      return;
    }
    if (CanInline(s)) {
      line_ += " { " + FlatStatement(s.block[0]) + " }";
      line_src_ = s.span.end.line;
      EndLine(next_offset);
      return;
    }
    line_ += " {";
    line_src_ = s.block_span.begin.line;
    EndLine(s.block.empty() ? close : s.block[0].span.begin.offset);
    block_start_ = true;
    Statements(s.block, indent + 1, close);
    OwnLineComments(close, indent + 1, true);
    line_ = Indent(indent) + "}";
    line_src_ = s.block_span.end.line;
    EndLine(next_offset);
    block_start_ = false;
  }

  std::vector<Comment> comments_;
  size_t next_ = 0;
  std::string out_;
  std::string line_;
  uint32_t line_src_ = 0;  // source line where the output line's last element ends
  uint32_t last_src_ = 0;  // source line where the last emitted item ended
  bool block_start_ = true;
};

}  // namespace

std::string FormatValue(const Value& v) {
  switch (v.kind) {
    case ValueKind::kIdent:
      return v.text;
    case ValueKind::kString:
      return QuoteString(v.text);
    case ValueKind::kInteger:
      return std::to_string(v.number);
    case ValueKind::kQuantity:
      return std::to_string(v.number) + v.unit;
    case ValueKind::kRegex:
      return QuoteRegex(v.text);
    case ValueKind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += FormatValue(v.items[i]);
      }
      out += ']';
      return out;
    }
  }
  return "";
}

std::string Format(const File& file) { return Printer(file).Run(file); }

}  // namespace safex::dsl
