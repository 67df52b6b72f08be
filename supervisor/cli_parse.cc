// ParseAndRun (cli.h): the one command-line parse of the executable and its core.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/version.h"
#include "supervisor/cli.h"
#include "supervisor/cli_args.h"

namespace safex::cli {

int ParseAndRun(int argc, char** argv, RegisterVerbs register_verbs) {
  // An empty argv (execve with no argv[0]) has no program name to drop below: a usage error.
  if (argc < 1) {
    std::fprintf(stderr, "safex: started without a program name (argv is empty)\n");
    return 2;
  }
  CLI::App app{"safex: run untrusted code under a verified policy", "safex"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("safex ") + kSafexVersion);
  int exit_code = 0;
  // Security: the program's argv is cut off before CLI11 sees anything (cli_args.h).
  SplitCommandLine split = SplitAtSeparator(argc, argv);
  const std::string verb = VerbOf(split.safex_args);
  if (split.program && !VerbTakesProgram(verb)) {
    std::fprintf(stderr, "safex%s%s: takes no program after \"--\" (only run and submit do)\n",
                 verb.empty() ? "" : " ", verb.c_str());
    return 2;
  }
  register_verbs(app, &exit_code, &split.program);
  // CLI11 takes the arguments without the program name, last first.
  std::vector<std::string> args(split.safex_args.rbegin(), split.safex_args.rend() - 1);
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return exit_code;
}

}  // namespace safex::cli
