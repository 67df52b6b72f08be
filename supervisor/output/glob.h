// Path globs for `validate file "..."`: which output files a validator names.
//
// A pattern is a '/'-separated path. In one component: '*' matches any run of characters
// (including a leading '.'), '?' one character (byte), "[abc]" "[a-z]" "[!a-z]" "[^a-z]" a class,
// '\' escapes the next character. A component that is exactly "**" matches zero or more whole
// components. Nothing matches across a '/'. Matching is linear in the path's length times the
// pattern's (no backtracking blow-up on hostile names).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace safex::output {

class PathGlob {
 public:
  explicit PathGlob(std::string_view pattern);

  // Whether the whole path matches.
  bool Matches(std::string_view path) const;
  // Whether some path strictly below the directory `dir` could match (dir + "/..." ).
  bool CouldMatchBeneath(std::string_view dir) const;
  // No wildcard at all: names exactly one path.
  bool IsLiteral() const { return literal_; }
  const std::string& pattern() const { return pattern_; }

 private:
  struct Token {
    enum Kind { kChar, kAny, kStar, kClass } kind;
    unsigned char c = 0;
    bool negated = false;
    std::vector<std::pair<unsigned char, unsigned char>> ranges;
  };
  struct Component {
    bool globstar = false;
    std::vector<Token> tokens;
  };
  static Component ParseComponent(std::string_view text, bool* literal);
  static bool MatchComponent(const Component& c, std::string_view name);
  // The set of pattern positions reachable after consuming `path`'s components.
  std::vector<bool> Advance(std::string_view path) const;
  void Close(std::vector<bool>* states) const;

  std::string pattern_;
  std::vector<Component> components_;
  bool literal_ = true;
};

// Splits on '/', dropping empty components ("/a//b/" -> {"a", "b"}).
std::vector<std::string_view> SplitPath(std::string_view path);

}  // namespace safex::output
