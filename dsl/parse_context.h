// The mutable state of one Parse(): positions, diagnostics, the tree under construction, nesting
// depth and error recovery. Internal to dsl/ (used by grammar.h and parser.cc only).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/ast.h"
#include "dsl/diagnostics.h"
#include "dsl/parser.h"

namespace safex::dsl::internal {

// Thrown after an error was recorded: abandons the current statement, which the statement rule
// catches, skips and carries on after (statement-level recovery).
struct SyntaxAbort {};
// Thrown when parsing cannot usefully continue (diagnostic cap reached, too many statements).
struct FatalAbort {};

// Error codes of the syntax phase (E001-E019). Stable: docs/policy-syntax.md documents them.
namespace code {
inline constexpr const char kBadByte[] = "E001";     // invalid UTF-8, NUL, control, bidi
inline constexpr const char kTooLarge[] = "E002";    // file exceeds max_bytes
inline constexpr const char kUnexpected[] = "E003";  // unexpected token / character
inline constexpr const char kUnterminatedString[] = "E004";
inline constexpr const char kBadEscape[] = "E005";
inline constexpr const char kRawControl[] = "E006";  // raw tab in a string or regex
inline constexpr const char kIntegerOverflow[] = "E007";
inline constexpr const char kUnknownUnit[] = "E008";
inline constexpr const char kQuantityOverflow[] = "E009";
inline constexpr const char kMalformedNumber[] = "E010";  // `_` misplaced, fraction, sign, space
inline constexpr const char kUnterminatedRegex[] = "E011";
inline constexpr const char kEmptyRegex[] = "E012";
inline constexpr const char kUnclosed[] = "E013";     // `{`, `[` or `(` never closed
inline constexpr const char kStrayCloser[] = "E014";  // `}`, `]` or `)` with nothing open
inline constexpr const char kTooDeep[] = "E015";
inline constexpr const char kTooMany[] = "E016";  // items, statements, arguments
inline constexpr const char kTokenTooLong[] = "E017";
inline constexpr const char kExpectedValue[] = "E018";
inline constexpr const char kDanglingAnnotation[] = "E019";
}  // namespace code

class ParseContext {
 public:
  ParseContext(std::string_view text, const ParseLimits& limits, const std::string& path,
               File* file, std::vector<Diagnostic>* diagnostics);

  const ParseLimits& limits() const { return limits_; }
  const char* base() const { return base_; }
  const char* end() const { return end_; }

  Position PositionAt(const char* p) const;
  Span SpanOf(const char* begin, const char* end) const;
  // A span covering the one (UTF-8) character at p, or an empty span at the end of the input.
  Span CharSpan(const char* p) const;
  // "`x`", "end of line", "end of file", for messages about what was found at p.
  std::string Describe(const char* p) const;

  // Records an error. Throws FatalAbort once limits().max_diagnostics have been recorded.
  void Report(const char* code, Span span, std::string message, std::string help = "");
  // Whether an error was reported at or after p.
  bool ErrorSince(const char* p) const;
  // Records an error and abandons the current statement.
  [[noreturn]] void Fail(const char* code, Span span, std::string message, std::string help = "");

  // ---- Building the tree. Frames form a stack: statements contain lists and annotations,
  // lists contain lists; a finished statement goes into the enclosing statement's block or, at
  // the top, into the file.
  struct Checkpoint {
    size_t frames;
    size_t open;
  };
  Checkpoint Save() const { return {frames_.size(), open_.size()}; }
  void Restore(const Checkpoint& c);

  void BeginStatement(const char* p);
  void EndStatement();
  // After FatalAbort: attaches the statements whose blocks were being read to the tree, so the
  // best-effort tree keeps, say, the policy; drops the statement that was half read.
  void FinishAfterAbort();
  Statement& CurrentStatement();  // REQUIRES: the innermost frame is a statement

  // Adds a finished value to the innermost frame: a list's items, an annotation's arguments, a
  // statement's head or (after `=`) its assigned value.
  void EmitValue(Value v);
  void BeginList(const char* open);  // after the depth check
  void EndList(const char* end);     // end: just past `]`
  void BeginAnnotation(const char* at);
  void SetAnnotationName(const char* begin, const char* end);
  void SetAnnotationParen(const char* paren) { frames_.back().open = paren; }
  const char* AnnotationParen() const { return frames_.back().open; }
  // The end of the innermost list's last item. REQUIRES: the innermost frame is a non-empty list.
  const char* LastListItemEnd() const {
    return base_ + frames_.back().list.items.back().span.end.offset;
  }
  void EndAnnotation(const char* end);
  void BeginAssignment();
  void BeginBlock(const char* brace);
  void EndBlock(const char* end);  // end: just past `}` (or the end of the input)

  // Nesting of blocks and lists. Fails with E015 when one more level would exceed max_depth:
  // this check runs before the grammar recurses, so the C++ stack stays bounded.
  void Open(const char* p);
  void Close();
  size_t depth() const { return open_.size(); }
  const std::vector<const char*>& open() const { return open_; }

  void AddComment(const char* begin, const char* end);

  // Error recovery: from the start of a failed statement, the position just past it: the end of
  // its line (not consumed), past a `;`, past the `}` that balances its block, or before a `}`
  // that closes the enclosing block. Brackets, strings, regexes and comments are skipped
  // lexically. Linear in the text skipped.
  // Also used from a token boundary inside a statement, to skip the rest of it.
  const char* SkipStatement(const char* from);

  // Set once an "unclosed at the end of the file" error was reported, or recovery ran to the end
  // of the file with brackets open: later unclosed-at-EOF errors would only repeat it.
  bool eof_errors_suppressed = false;
  // Where to resume after the current statement fails, when that is past SkipStatement()'s
  // answer (a mismatched `}` that ended a list is consumed with it).
  const char* resume_hint = nullptr;
  const char* string_open = nullptr;  // the `"` of the string being lexed
  const char* regex_open = nullptr;   // the `/` of the regex being lexed

  // Describes the innermost statement so far, for "expected ... after `x`".
  std::string LastTokenText() const;

 private:
  struct Frame {
    enum class Kind { kStatement, kList, kAnnotation };
    Kind kind = Kind::kStatement;
    Statement stmt;
    bool in_assignment = false;
    Value list;
    Annotation ann;
    const char* open = nullptr;  // `[` of a list, `(` of an annotation
  };

  std::vector<Statement>& Siblings();

  const char* base_;
  const char* end_;
  const ParseLimits& limits_;
  const std::string& path_;
  File* file_;
  std::vector<Diagnostic>* diagnostics_;
  std::vector<uint64_t> line_starts_;
  std::vector<Frame> frames_;
  std::vector<const char*> open_;  // the `{` and `[` currently open, outermost first
};

}  // namespace safex::dsl::internal
