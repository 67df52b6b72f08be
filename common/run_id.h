// Run ids: the one rule for the whole project. A run id names host resources (run directories,
// cgroups, namespace pins, record files) and appears in audit queries (as a GLOB prefix), so it is
// 1-64 characters of [a-z0-9-], starting with a letter or a digit: no '/', no '.', no GLOB
// metacharacters, no upper case that a case-insensitive filesystem could fold. audit::NewRunId's
// UUIDv7s ("019381c2-5b7e-7c1a-9f3e-0d2b6a4c8e11") are such ids.
#pragma once

#include <string_view>

namespace safex {

inline constexpr size_t kMaxRunIdLength = 64;

inline bool IsValidRunId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRunIdLength) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(id[0])) return false;
  for (char c : id) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

}  // namespace safex
