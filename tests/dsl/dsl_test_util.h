// Helpers for the dsl tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dsl/ast.h"
#include "dsl/parser.h"

namespace safex::dsl::testing {

// Parses and fails the current test (with every rendered diagnostic) when there are errors.
File ParseOk(std::string_view text);

// The diagnostics of a parse as "E008 3:17" strings, in order.
std::vector<std::string> Codes(const ParseResult& r);
std::vector<std::string> Codes(std::string_view text);

// Structural equality, ignoring spans: same statements, annotations, values and blocks.
bool SameTree(const std::vector<Statement>& a, const std::vector<Statement>& b, std::string* why);

// The whole text of a file; fails the test when it cannot be read.
std::string ReadFile(const std::string& path);
// Files in a directory with the given extension, sorted.
std::vector<std::string> ListFiles(const std::string& dir, const std::string& ext);

}  // namespace safex::dsl::testing
