#include "tests/support/test_support.h"

#include <unistd.h>

#include <cstdlib>

namespace safex::testing {

bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::string(ci) != "0" && std::string(ci) != "false";
}

bool IsRoot() { return geteuid() == 0; }

std::string SafexBinary() { return SAFEX_TEST_BINARY; }
std::string SourceDir() { return SAFEX_TEST_SOURCE_DIR; }
std::string BuildDir() { return SAFEX_TEST_BUILD_DIR; }

}  // namespace safex::testing
