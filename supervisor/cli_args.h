// The command line split at its first "--" (issue: option injection after "--").
//
// Everything after the first "--" is the program's argv, always, whatever the option order:
// it never reaches CLI11. (CLI11 lets a repeatable option such as --search-path end at "--" and
// then parses the program's own arguments as safex options: `--runsc /tmp/evil` after "--" made
// root execute it.) Only the part before "--" is parsed as safex options; verbs that run a
// program (run, submit) take the rest verbatim, and every other verb refuses a "--".
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace safex::cli {

struct SplitCommandLine {
  // argv[0] and everything before the first "--", for CLI11.
  std::vector<std::string> safex_args;
  // Everything after the first "--" (possibly empty); nullopt when there is no "--".
  std::optional<std::vector<std::string>> program;
};

SplitCommandLine SplitAtSeparator(int argc, const char* const* argv);

// The verb named by `safex_args` (the first argument that is not an option), "" if none.
std::string VerbOf(const std::vector<std::string>& safex_args);

// Whether `verb` takes a program after "--".
bool VerbTakesProgram(const std::string& verb);

// Whether the process was started as safex-oci (a link to the safex executable, the OCI runtime
// with runc's command line): argv[0]'s last path component.
bool StartedAsOciRuntime(int argc, const char* const* argv);

}  // namespace safex::cli
