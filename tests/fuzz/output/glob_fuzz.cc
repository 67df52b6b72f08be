// Glob matching on hostile patterns and names: terminates quickly, never crashes, and a literal
// pattern matches exactly its own (normalised) path.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "supervisor/output/glob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t split = in.find('\n');
  if (split == std::string_view::npos) return 0;
  const std::string_view pattern = in.substr(0, split);
  const std::string_view path = in.substr(split + 1);
  safex::output::PathGlob glob(pattern);
  const bool full = glob.Matches(path);
  const bool beneath = glob.CouldMatchBeneath(path);
  (void)beneath;
  if (glob.IsLiteral() && pattern.find('\\') == std::string_view::npos &&
      pattern.find('[') == std::string_view::npos) {
    std::string a, b;
    for (std::string_view c : safex::output::SplitPath(pattern)) a += "/" + std::string(c);
    for (std::string_view c : safex::output::SplitPath(path)) b += "/" + std::string(c);
    if (full != (!a.empty() && a == b)) abort();
  }
  return 0;
}
