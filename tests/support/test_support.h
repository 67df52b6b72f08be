// Shared helpers for safex tests.
//
// Prerequisites: a test that needs root, runsc, namespaces or QEMU calls SAFEX_REQUIRE(cond, why).
// Outside CI a missing prerequisite skips the test; under CI (the CI environment variable is set)
// it is a failure, because CI must run every test.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace safex::testing {

bool UnderCi();
bool IsRoot();
// Paths baked in at build time.
std::string SafexBinary();     // the built `safex`
std::string SourceDir();       // the project checkout
std::string BuildDir();        // the build tree

}  // namespace safex::testing

#define SAFEX_REQUIRE(cond, why)                                                   \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      if (::safex::testing::UnderCi()) {                                           \
        FAIL() << "prerequisite missing under CI: " << (why);                      \
      } else {                                                                     \
        GTEST_SKIP() << "prerequisite missing: " << (why);                         \
      }                                                                            \
    }                                                                              \
  } while (0)

#define SAFEX_REQUIRE_ROOT() SAFEX_REQUIRE(::safex::testing::IsRoot(), "needs root")
