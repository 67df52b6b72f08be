// The policy syntax tree. The grammar is deliberately generic (a tree of statements, like HCL):
// the parser knows the shape of the language, the compiler knows its meaning. That keeps the
// hostile-input surface (the parser) small and lets the compiler give "did you mean" help for
// every misspelt keyword.
//
//   policy "python-untrusted" extends "base-untrusted" {     # head: [policy, "…", extends, "…"]
//     limits { memory = 512MiB  wall_time = 30s }            # head: [limits], block
//     mount tmpfs at "/tmp" { size = 64MiB }                 # head: [mount, tmpfs, at, "/tmp"]
//     egress "pypi.org:443"                                  # head: [egress, "pypi.org:443"]
//     deny [ptrace, mount]                                   # head: [deny, [ptrace, mount]]
//     reject /AKIA[0-9A-Z]{16}/                              # head: [reject, /…/]
//     @override("SEC-123: pandas needs it") memory = 1GiB    # annotation + assignment
//   }
//
// A statement is: annotations, then head values, then optionally `= value`, then optionally a
// `{ block }`. It ends at the end of its line, at `;`, or right after its `= value` or `}`; so
// `wall_time = 30s  cpu_time = 20s` on one line is two statements. Lists may span lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace safex::dsl {

// 1-based line and column (column counts bytes); offset is the 0-based byte offset.
struct Position {
  uint32_t line = 1;
  uint32_t column = 1;
  uint64_t offset = 0;
};

// [begin, end) in one source file.
struct Span {
  Position begin;
  Position end;
};

enum class ValueKind {
  kIdent,     // trust, untrusted, true, ptrace, PYTHONDONTWRITEBYTECODE
  kString,    // "text", escapes resolved (\" \\ \n \t \u{hex}); always valid UTF-8
  kInteger,   // 64, 1_000 (no unit)
  kQuantity,  // 64MiB, 30s: an integer with a unit from the grammar's unit list
  kRegex,     // /pattern/ ; `\/` is an escaped slash, every other escape is kept for RE2
  kList,      // [v, v, ...], trailing comma allowed
};

struct Value {
  ValueKind kind = ValueKind::kIdent;
  Span span;
  std::string text;          // kIdent name, kString contents, kRegex pattern
  uint64_t number = 0;       // kInteger and kQuantity: the number as written
  std::string unit;          // kQuantity: one of B KiB MiB GiB TiB ns us ms s m h
  std::vector<Value> items;  // kList
};

// @name(args...) before a statement, e.g. @override("reason").
struct Annotation {
  Span span;
  std::string name;
  std::vector<Value> args;
};

struct Statement {
  Span span;                             // the whole statement, block included
  std::vector<Annotation> annotations;
  std::vector<Value> head;               // never empty
  bool has_assignment = false;
  Value assigned;                        // valid when has_assignment
  bool has_block = false;
  Span block_span;                       // from `{` to `}` inclusive, when has_block
  std::vector<Statement> block;          // valid when has_block
};

struct Comment {
  Span span;
  std::string text;  // without the leading '#', without the newline
};

struct File {
  std::string path;
  std::vector<Statement> statements;
  std::vector<Comment> comments;  // in source order, for the formatter
};

}  // namespace safex::dsl
