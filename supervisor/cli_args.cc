#include "supervisor/cli_args.h"

#include <string_view>

namespace safex::cli {

SplitCommandLine SplitAtSeparator(int argc, const char* const* argv) {
  SplitCommandLine out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i] != nullptr ? argv[i] : "";
    if (i > 0 && !out.program && arg == "--") {
      out.program.emplace();
      continue;
    }
    if (out.program) {
      out.program->push_back(std::move(arg));
    } else {
      out.safex_args.push_back(std::move(arg));
    }
  }
  return out;
}

std::string VerbOf(const std::vector<std::string>& safex_args) {
  // The top level has flags only (--help, --version), so the first non-option is the verb.
  for (size_t i = 1; i < safex_args.size(); ++i) {
    if (!safex_args[i].starts_with("-")) return safex_args[i];
  }
  return "";
}

bool VerbTakesProgram(const std::string& verb) { return verb == "run" || verb == "submit"; }

bool StartedAsOciRuntime(int argc, const char* const* argv) {
  if (argc < 1 || argv[0] == nullptr) return false;
  const std::string_view name = argv[0];
  const size_t slash = name.rfind('/');
  return name.substr(slash == std::string_view::npos ? 0 : slash + 1) == "safex-oci";
}

}  // namespace safex::cli
