// The policy grammar as PEGTL rules, and the actions that build the tree. Internal to dsl/: only
// parser.cc includes it.
//
// The grammar is deterministic: every construct is chosen by its first character, and once
// chosen it either matches or records a diagnostic and throws SyntaxAbort (no backtracking over
// a rule that has run an action, so actions run exactly once and parsing is linear). Errors are
// raised by the `fail_*` rules, which look at what is there to say something useful. The
// statement rule (`statement_r`) catches SyntaxAbort, skips the broken statement and carries on,
// so one run reports every broken statement of a file.
//
//   file        <- BOM? (sep / statement)* EOF
//   statement   <- annotations head assignment? block? stmt_end
//   annotations <- (annotation (blank / eol / comment)*)*
//   annotation  <- '@' name ('(' (value (',' value)* ','?)? ')')?      (on one line)
//   head        <- ident (blank* value)*
//   assignment  <- blank* '=' blank* value
//   block       <- blank* '{' (sep / statement)* '}'
//   stmt_end    <- blank* (';' / &'#' / &eol / &'}' / EOF / &(ident / '@') after `= v` or `}`)
//   value       <- list / string / regex / number / ident
//   list        <- '[' bws (value bws (',' bws / &']'))* ']'     (bws: blanks, newlines, comments)
//   sep         <- blank+ / eol / ';' / comment
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tao/pegtl.hpp>

#include "dsl/ast.h"
#include "dsl/parse_context.h"
#include "dsl/parser.h"
#include "dsl/text.h"
#include "dsl/unit_help.h"

namespace safex::dsl::grammar {

namespace pegtl = tao::pegtl;
using internal::ParseContext;
namespace code = internal::code;

// ---------------------------------------------------------------------------------------------
// Helpers for hand-written rules.

// A rule matched by F::Match(in, ctx). Used for the depth guard, the error rules and recovery.
template <typename F>
struct custom {
  using rule_t = custom;
  using subs_t = pegtl::type_list<>;
  template <pegtl::apply_mode, pegtl::rewind_mode, template <typename...> class,
            template <typename...> class, typename Input>
  static bool match(Input& in, ParseContext& ctx) {
    return F::Match(in, ctx);
  }
};

inline bool IsIdentFirst(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool IsIdentOther(char c) {
  return IsIdentFirst(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool AtLineEnd(const char* p, const char* end) {
  return p >= end || *p == '\n' || *p == '\r';
}
// Can a value start with this character?
inline bool StartsValue(char c) {
  return IsIdentFirst(c) || IsDigit(c) || c == '"' || c == '/' || c == '[';
}
inline bool IsNegativeNumber(const char* p, const char* end) {
  return p + 1 < end && *p == '-' && IsDigit(p[1]);
}

std::string Where(const ParseContext& ctx, const char* p);  // "3:7"

// ---------------------------------------------------------------------------------------------
// Lexical rules.

struct blank : pegtl::one<' ', '\t'> {};
struct ws : pegtl::star<blank> {};
struct eol : pegtl::sor<pegtl::one<'\n'>, pegtl::string<'\r', '\n'>> {};
struct comment : pegtl::seq<pegtl::one<'#'>, pegtl::star<pegtl::not_one<'\n', '\r'>>> {};
// Inside brackets, line breaks and comments are white space too.
struct bws : pegtl::star<pegtl::sor<blank, eol, comment>> {};

struct ident_first : pegtl::ranges<'a', 'z', 'A', 'Z', '_'> {};
struct ident_other : pegtl::ranges<'a', 'z', 'A', 'Z', '0', '9', '-', '.', '_'> {};
struct ident_tail : pegtl::star<ident_other> {};
struct ident : pegtl::seq<ident_first, ident_tail> {};

// Digits with `_` separators, an optional fraction (always an error, with help), and a unit glued
// to the number (checked against the unit list by the action).
struct digit_run : pegtl::star<pegtl::ranges<'0', '9', '_'>> {};
struct number
    : pegtl::seq<pegtl::digit, digit_run, pegtl::opt<pegtl::one<'.'>, pegtl::digit, digit_run>,
                 pegtl::opt<ident_first, ident_tail>> {};

struct FailEscape;
struct FailStringChar;
struct FailRegexChar;

struct string_open : pegtl::one<'"'> {};
struct unicode_escape : pegtl::seq<pegtl::one<'u'>, pegtl::one<'{'>,
                                   pegtl::rep_min_max<1, 6, pegtl::xdigit>, pegtl::one<'}'>> {};
struct escape : pegtl::seq<pegtl::one<'\\'>, pegtl::sor<pegtl::one<'"', '\\', 'n', 't', 'r'>,
                                                        unicode_escape, custom<FailEscape>>> {};
// The prescan already refused invalid UTF-8 and control characters other than tab/CR/LF.
struct string_plain : pegtl::plus<pegtl::not_one<'"', '\\', '\t', '\n', '\r'>> {};
struct string_lit
    : pegtl::seq<
          string_open,
          pegtl::until<pegtl::one<'"'>, pegtl::sor<string_plain, escape, custom<FailStringChar>>>> {
};

struct regex_open : pegtl::one<'/'> {};
struct regex_escape : pegtl::seq<pegtl::one<'\\'>, pegtl::not_one<'\n', '\r', '\t'>> {};
struct regex_plain : pegtl::plus<pegtl::not_one<'/', '\\', '\t', '\n', '\r'>> {};
struct regex_lit
    : pegtl::seq<regex_open, pegtl::until<pegtl::one<'/'>, pegtl::sor<regex_plain, regex_escape,
                                                                      custom<FailRegexChar>>>> {};

// ---------------------------------------------------------------------------------------------
// Values.

struct OpenList;
struct FailListValue;
struct FailListSeparator;

struct value;
struct list_open : custom<OpenList> {};
struct list_close : pegtl::one<']'> {};
struct list_entry
    : pegtl::seq<pegtl::sor<value, custom<FailListValue>>, bws,
                 pegtl::sor<pegtl::one<','>, pegtl::at<list_close>, custom<FailListSeparator>>,
                 bws> {};
struct list : pegtl::seq<list_open, bws, pegtl::until<list_close, list_entry>> {};
struct value : pegtl::sor<list, string_lit, regex_lit, number, ident> {};

// ---------------------------------------------------------------------------------------------
// Statements.

struct FailAnnotationName;
struct FailAnnotationValue;
struct FailAnnotationSeparator;
struct FailStatementStart;
struct FailAssignedValue;
struct CheckDetachedUnit;
struct OpenBlock;
struct UnclosedBlockAtEof;
struct Continuation;
struct RecoverStatementEnd;

struct ann_at : pegtl::one<'@'> {};
struct ann_name : pegtl::seq<ident_first, ident_tail> {};
struct ann_paren : pegtl::one<'('> {};
struct ann_close : pegtl::one<')'> {};
struct ann_entry
    : pegtl::seq<pegtl::sor<value, custom<FailAnnotationValue>>, ws,
                 pegtl::sor<pegtl::one<','>, pegtl::at<ann_close>, custom<FailAnnotationSeparator>>,
                 ws> {};
struct ann_args : pegtl::seq<ann_paren, ws, pegtl::until<ann_close, ann_entry>> {};
struct annotation
    : pegtl::seq<ann_at, pegtl::sor<ann_name, custom<FailAnnotationName>>, pegtl::opt<ann_args>> {};
struct ann_gap : pegtl::star<pegtl::sor<blank, eol, comment>> {};
struct annotations : pegtl::star<annotation, ann_gap> {};

struct head : pegtl::seq<pegtl::sor<ident, custom<FailStatementStart>>, pegtl::star<ws, value>> {};
struct assign_op : pegtl::one<'='> {};
struct assignment : pegtl::seq<ws, assign_op, ws, pegtl::sor<value, custom<FailAssignedValue>>,
                               custom<CheckDetachedUnit>> {};

struct statement_r;
struct sep : pegtl::sor<pegtl::plus<blank>, eol, pegtl::one<';'>, comment> {};
struct block_open : custom<OpenBlock> {};
struct block_close : pegtl::one<'}'> {};
struct block_eof : custom<UnclosedBlockAtEof> {};
struct block
    : pegtl::seq<ws, block_open,
                 pegtl::until<pegtl::sor<block_close, block_eof>, pegtl::sor<sep, statement_r>>> {};

struct stmt_end : pegtl::seq<ws, pegtl::sor<pegtl::one<';'>, pegtl::at<pegtl::one<'#'>>,
                                            pegtl::at<eol>, pegtl::at<pegtl::one<'}'>>, pegtl::eof,
                                            custom<Continuation>, custom<RecoverStatementEnd>>> {};
struct statement
    : pegtl::seq<annotations, head, pegtl::opt<assignment>, pegtl::opt<block>, stmt_end> {};

// A statement with error recovery: on SyntaxAbort (the error is already recorded) it drops
// the statement's partial tree, restores the nesting depth, skips the statement's text and
// succeeds, so the enclosing block or file carries on with the next statement.
struct statement_r {
  using rule_t = statement_r;
  using subs_t = pegtl::type_list<statement>;
  template <pegtl::apply_mode A, pegtl::rewind_mode M, template <typename...> class Action,
            template <typename...> class Control, typename Input>
  static bool match(Input& in, ParseContext& ctx) {
    const char* start = in.current();
    const ParseContext::Checkpoint checkpoint = ctx.Save();
    ctx.BeginStatement(start);
    try {
      if (Control<statement>::template match<A, M, Action, Control>(in, ctx)) {
        ctx.EndStatement();
        return true;
      }
      // Every failure inside a statement raises; this is a defensive fallback.
      ctx.Report(code::kUnexpected, ctx.CharSpan(start),
                 "expected a statement, found " + ctx.Describe(start));
    } catch (const internal::SyntaxAbort&) {
    }
    ctx.Restore(checkpoint);
    const char* resume = ctx.SkipStatement(start);
    if (ctx.resume_hint != nullptr && ctx.resume_hint > resume) resume = ctx.resume_hint;
    ctx.resume_hint = nullptr;
    if (resume == start) {
      // A stray `}` at the top level: skip the rest of its line, so a run of them (or a line of
      // junk after one) is one error, and parsing always makes progress.
      resume = start + 1;
      while (!AtLineEnd(resume, in.end())) ++resume;
    }
    in.iterator() = resume;
    return true;
  }
};

struct bom : pegtl::string<'\xEF', '\xBB', '\xBF'> {};
struct file : pegtl::seq<pegtl::opt<bom>, pegtl::until<pegtl::eof, pegtl::sor<sep, statement_r>>> {
};

// ---------------------------------------------------------------------------------------------
// Hand-written rules: nesting, context checks and errors. A Fail* rule never returns normally.

struct OpenList {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (p >= in.end() || *p != '[') return false;
    ctx.Open(p);  // E015 when too deep, before recursing
    ctx.BeginList(p);
    in.bump(1);
    return true;
  }
};

struct OpenBlock {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (p >= in.end() || *p != '{') return false;
    ctx.BeginBlock(p);  // E015 when too deep
    in.bump(1);
    return true;
  }
};

struct UnclosedBlockAtEof {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    if (!in.empty()) return false;
    const std::vector<const char*>& open = ctx.open();
    // An error inside the block (a string or list that swallowed a `}`, say) most likely
    // explains the missing `}`: then this would only repeat it.
    if (!ctx.eof_errors_suppressed && !open.empty() && !ctx.ErrorSince(open.front())) {
      ctx.eof_errors_suppressed = true;
      std::string help = "add `}` to close it";
      if (open.size() > 1) {
        help += "; the enclosing block";
        help += open.size() > 2 ? "s opened at " : " opened at ";
        for (size_t i = 0; i + 1 < open.size(); ++i) {
          if (i > 0) help += ", ";
          help += Where(ctx, open[i]);
        }
        help += open.size() > 2 ? " are not closed either" : " is not closed either";
      }
      ctx.Report(code::kUnclosed, ctx.CharSpan(open.back()),
                 "unclosed `{`: the block is still open at the end of the file", help);
    }
    ctx.EndBlock(in.current());
    return true;
  }
};

// After `= value` or a block, another statement may follow on the same line.
struct Continuation {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const Statement& s = ctx.CurrentStatement();
    if (!s.has_assignment && !s.has_block) return false;
    const char* p = in.current();
    return p < in.end() && (IsIdentFirst(*p) || *p == '@');
  }
};

// Something that cannot follow the statement: report it, skip the rest of the statement's text
// and keep what was parsed.
struct RecoverStatementEnd {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    const Statement& s = ctx.CurrentStatement();
    const std::string found = ctx.Describe(p);
    if (*p == ']' || *p == ')') {
      ctx.Report(code::kStrayCloser, ctx.CharSpan(p),
                 "unexpected " + found + ": no " + (*p == ']' ? "list" : "`(`") + " is open");
    } else if (IsNegativeNumber(p, in.end())) {
      ctx.Report(code::kMalformedNumber, ctx.CharSpan(p), "negative numbers are not supported");
    } else if (!s.has_assignment && !s.has_block) {
      std::string help;
      if (*p == ':' && p + 1 < in.end() && IsDigit(p[1])) {
        help = "write a host and port as a string, e.g. `\"pypi.org:443\"`";
      } else if (*p == ':') {
        help = "assign with `=`, e.g. `memory = 512MiB`";
      }
      if (*p == '(') help = "annotations are written `@name(...)` before a statement";
      ctx.Report(code::kUnexpected, ctx.CharSpan(p),
                 "expected `=`, a value or `{` after `" + ctx.LastTokenText() + "`, found " + found,
                 help);
    } else {
      ctx.Report(code::kUnexpected, ctx.CharSpan(p),
                 "expected the end of the statement, found " + found,
                 "put one statement on each line, or separate statements with `;`");
    }
    in.iterator() = ctx.SkipStatement(p);
    return true;
  }
};

struct FailStatementStart {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    const Statement& s = ctx.CurrentStatement();
    if (!s.annotations.empty()) {
      ctx.Fail(code::kDanglingAnnotation, s.annotations.back().span,
               "annotation `@" + s.annotations.back().name + "` is not followed by a statement",
               "write the statement after the annotation, e.g. `@override(\"reason\") memory = "
               "1GiB`");
    }
    const std::string found = ctx.Describe(p);
    const Span here = ctx.CharSpan(p);
    switch (p < in.end() ? *p : '\0') {
      case '}':
        ctx.Fail(code::kStrayCloser, here, "unexpected `}`: no block is open");
      case ']':
        ctx.Fail(code::kStrayCloser, here, "unexpected `]`: no list is open");
      case ')':
        ctx.Fail(code::kStrayCloser, here, "unexpected `)`: no `(` is open");
      case '{':
        ctx.Fail(code::kUnexpected, here, "expected a statement, found `{`",
                 "a block opens on the line of the statement it belongs to, e.g. `limits {`");
      case '=':
        ctx.Fail(code::kUnexpected, here, "expected a name before `=`");
      default:
        break;
    }
    if (p + 1 < in.end() && p[0] == '/' && p[1] == '/') {
      ctx.Fail(code::kUnexpected, here, "expected a statement, found `//`",
               "comments start with `#`");
    }
    std::string what = found;
    if (p < in.end()) {
      if (IsDigit(*p)) what = "a number";
      if (*p == '"') what = "a string";
      if (*p == '/') what = "a regex";
      if (*p == '[') what = "a list";
    }
    ctx.Fail(code::kUnexpected, here, "expected a statement, found " + what,
             what == found ? "" : "a statement starts with a name, e.g. `memory = 512MiB`");
  }
};

struct FailAssignedValue {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (IsNegativeNumber(p, in.end())) {
      ctx.Fail(code::kMalformedNumber, ctx.CharSpan(p), "negative numbers are not supported");
    }
    std::string help;
    if (p < in.end() && *p == '{') {
      help = "a block follows its statement without `=`, e.g. `limits {`";
    }
    ctx.Fail(code::kExpectedValue, ctx.CharSpan(p),
             "expected a value after `=`, found " + ctx.Describe(p), help);
  }
};

// `memory = 512 MiB`: the unit must be glued to its number.
struct CheckDetachedUnit {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const Statement& s = ctx.CurrentStatement();
    if (s.assigned.kind != ValueKind::kInteger) return true;
    const char* p = in.current();
    const char* q = p;
    while (q < in.end() && (*q == ' ' || *q == '\t')) ++q;
    if (q == p || q >= in.end() || !IsIdentFirst(*q)) return true;
    const char* w = q;
    while (w < in.end() && IsIdentOther(*w)) ++w;
    const std::string_view word(q, static_cast<size_t>(w - q));
    std::string_view unit = FindUnit(word) != nullptr ? word : MeantUnit(word);
    if (unit.empty()) return true;
    // Only when the word ends the statement: `limit = 5  b = 3` is two statements.
    const char* after = w;
    while (after < in.end() && (*after == ' ' || *after == '\t')) ++after;
    if (!(AtLineEnd(after, in.end()) || *after == ';' || *after == '#' || *after == '}')) {
      return true;
    }
    ctx.Fail(code::kMalformedNumber, ctx.SpanOf(q, w),
             "a unit must follow its number without a space",
             "write `" + std::to_string(s.assigned.number) + std::string(unit) + "`");
  }
};

// E013 for a list that reaches the end of the file or a `}`/`)` before its `]`.
template <typename Input>
[[noreturn]] void FailUnclosedList(Input& in, ParseContext& ctx) {
  const char* p = in.current();
  const char* open = ctx.open().back();
  std::string help;
  if (p >= in.end()) {
    ctx.eof_errors_suppressed = true;
    help = "add `]` to close it";
  } else {
    help = "expected `]` before the " + ctx.Describe(p) + " at " + Where(ctx, p);
    // The `}` or `)` was meant as the list's `]`: recovery consumes it. At the top level there
    // is nothing it could close: the rest of the line is junk too.
    const char* resume = p + 1;
    bool block_open = false;
    for (const char* o : ctx.open()) block_open = block_open || *o == '{';
    if (!block_open) {
      while (!AtLineEnd(resume, in.end())) ++resume;
    }
    ctx.resume_hint = resume;
  }
  ctx.Fail(code::kUnclosed, ctx.CharSpan(open), "unclosed `[`: the list is never closed", help);
}

struct FailListValue {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (p >= in.end() || *p == '}' || *p == ')') FailUnclosedList(in, ctx);
    if (IsNegativeNumber(p, in.end())) {
      ctx.Fail(code::kMalformedNumber, ctx.CharSpan(p), "negative numbers are not supported");
    }
    ctx.Fail(code::kExpectedValue, ctx.CharSpan(p),
             "expected a value or `]`, found " + ctx.Describe(p));
  }
};

struct FailListSeparator {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (p >= in.end() || *p == '}' || *p == ')') FailUnclosedList(in, ctx);
    std::string help;
    if (StartsValue(*p)) {
      help = ctx.PositionAt(p).line != ctx.PositionAt(ctx.LastListItemEnd()).line
                 ? "a `,` is missing, or the list opened at " + Where(ctx, ctx.open().back()) +
                       " is not closed with `]`"
                 : "separate list items with `,`";
    }
    ctx.Fail(code::kUnexpected, ctx.CharSpan(p),
             "expected `,` or `]` after a list item, found " + ctx.Describe(p), help);
  }
};

struct FailAnnotationName {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    ctx.Fail(code::kUnexpected, ctx.CharSpan(p),
             "expected an annotation name after `@`, found " + ctx.Describe(p),
             "annotations look like `@override(\"reason\")`");
  }
};

template <typename Input>
[[noreturn]] void FailUnclosedParen(Input& in, ParseContext& ctx) {
  const char* p = in.current();
  ctx.Fail(code::kUnclosed, ctx.CharSpan(ctx.AnnotationParen()),
           "unclosed `(`: the annotation's arguments are not closed on this line",
           p >= in.end() || *p == '\n' || *p == '\r'
               ? "add `)`: an annotation's arguments end on the line where they start"
               : "expected `)` before the " + ctx.Describe(p) + " at " + Where(ctx, p));
}

struct FailAnnotationValue {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (AtLineEnd(p, in.end()) || *p == '}' || *p == '{') FailUnclosedParen(in, ctx);
    if (IsNegativeNumber(p, in.end())) {
      ctx.Fail(code::kMalformedNumber, ctx.CharSpan(p), "negative numbers are not supported");
    }
    ctx.Fail(code::kExpectedValue, ctx.CharSpan(p),
             "expected a value or `)`, found " + ctx.Describe(p));
  }
};

struct FailAnnotationSeparator {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (AtLineEnd(p, in.end()) || *p == '}' || *p == '{') FailUnclosedParen(in, ctx);
    ctx.Fail(code::kUnexpected, ctx.CharSpan(p),
             "expected `,` or `)` after an annotation argument, found " + ctx.Describe(p),
             StartsValue(*p) ? "separate arguments with `,`" : "");
  }
};

struct FailEscape {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();  // just after the backslash
    if (AtLineEnd(p, in.end())) {
      ctx.Fail(code::kUnterminatedString, ctx.CharSpan(ctx.string_open),
               "unterminated string (opened here)",
               "a string ends with `\"` on the same line; there are no multi-line strings");
    }
    const char* backslash = p - 1;
    if (*p == 'u') {
      const char* e = p + 1;
      while (e < in.end() && e < p + 12 && !AtLineEnd(e, in.end()) && *e != '"' && *e != '}') {
        ++e;
      }
      if (e < in.end() && *e == '}') ++e;
      ctx.Fail(code::kBadEscape, ctx.SpanOf(backslash, e), "malformed unicode escape",
               "write `\\u{...}` with 1 to 6 hexadecimal digits, e.g. `\\u{e9}`");
    }
    const Span ch = ctx.CharSpan(p);
    const char* e = in.begin() + ch.end.offset;
    ctx.Fail(code::kBadEscape, ctx.SpanOf(backslash, e),
             "unknown escape `\\" +
                 text::EscapeForTerminal(std::string_view(p, static_cast<size_t>(e - p))) +
                 "` in a string",
             "the escapes are \\\" \\\\ \\n \\t \\r and \\u{...}");
  }
};

struct FailStringChar {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    if (AtLineEnd(p, in.end())) {
      ctx.Fail(code::kUnterminatedString, ctx.CharSpan(ctx.string_open),
               "unterminated string (opened here)",
               "a string ends with `\"` on the same line; there are no multi-line strings");
    }
    ctx.Fail(code::kRawControl, ctx.CharSpan(p), "tab character in a string",
             "write a tab as `\\t`");
  }
};

struct FailRegexChar {
  template <typename Input>
  static bool Match(Input& in, ParseContext& ctx) {
    const char* p = in.current();
    const char* bad = (p < in.end() && *p == '\\') ? p + 1 : p;
    if (AtLineEnd(bad, in.end())) {
      ctx.Fail(code::kUnterminatedRegex, ctx.CharSpan(ctx.regex_open),
               "unterminated regex (opened here)",
               "a regex ends with `/` on the same line; a path is written as a string, e.g. "
               "\"/tmp\"");
    }
    ctx.Fail(code::kRawControl, ctx.CharSpan(bad), "tab character in a regex",
             "write a tab as `\\t`");
  }
};

// ---------------------------------------------------------------------------------------------
// Actions: build the tree as rules succeed.

template <typename Rule>
struct action : pegtl::nothing<Rule> {};

template <>
struct action<comment> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.AddComment(in.begin(), in.end());
  }
};

template <>
struct action<ident> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    Value v;
    v.kind = ValueKind::kIdent;
    v.span = ctx.SpanOf(in.begin(), in.end());
    if (in.size() > ctx.limits().max_token_bytes) {
      ctx.Fail(code::kTokenTooLong, v.span,
               "name is too long (" + std::to_string(in.size()) + " bytes; the limit is " +
                   std::to_string(ctx.limits().max_token_bytes) + ")");
    }
    v.text = in.string();
    ctx.EmitValue(std::move(v));
  }
};

void ApplyNumber(const char* begin, const char* end, ParseContext& ctx);
template <>
struct action<number> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ApplyNumber(in.begin(), in.end(), ctx);
  }
};

template <>
struct action<string_open> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.string_open = in.begin();
  }
};

void CheckUnicodeEscape(const char* u, const char* end, ParseContext& ctx);
template <>
struct action<unicode_escape> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    CheckUnicodeEscape(in.begin(), in.end(), ctx);
  }
};

void ApplyString(const char* begin, const char* end, ParseContext& ctx);
template <>
struct action<string_lit> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ApplyString(in.begin(), in.end(), ctx);
  }
};

template <>
struct action<regex_open> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.regex_open = in.begin();
  }
};

void ApplyRegex(const char* begin, const char* end, ParseContext& ctx);
template <>
struct action<regex_lit> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ApplyRegex(in.begin(), in.end(), ctx);
  }
};

template <>
struct action<list> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.EndList(in.end());
  }
};

template <>
struct action<ann_at> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.BeginAnnotation(in.begin());
  }
};

template <>
struct action<ann_name> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.SetAnnotationName(in.begin(), in.end());
  }
};

template <>
struct action<ann_paren> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.SetAnnotationParen(in.begin());
  }
};

template <>
struct action<annotation> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.EndAnnotation(in.end());
  }
};

template <>
struct action<assign_op> {
  template <typename ActionInput>
  static void apply(const ActionInput&, ParseContext& ctx) {
    ctx.BeginAssignment();
  }
};

template <>
struct action<block_close> {
  template <typename ActionInput>
  static void apply(const ActionInput& in, ParseContext& ctx) {
    ctx.EndBlock(in.end());
  }
};

}  // namespace safex::dsl::grammar
