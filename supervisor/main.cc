// safex: run untrusted code under a verified policy. See docs/architecture.md.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/version.h"
#include "supervisor/cli.h"
#include "supervisor/cli_args.h"
#include "supervisor/oci/oci_runtime.h"

int main(int argc, char** argv) {
  // Started as safex-oci (a link to this binary): the OCI runtime, with runc's command line.
  const char* slash = argc > 0 ? std::strrchr(argv[0], '/') : nullptr;
  if (argc > 0 && std::strcmp(slash != nullptr ? slash + 1 : argv[0], "safex-oci") == 0) {
    return safex::supervisor::oci::RunOciRuntime(argc, argv);
  }
  CLI::App app{"safex: run untrusted code under a verified policy", "safex"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("safex ") + safex::kSafexVersion);
  int exit_code = 0;
  // Security: the program's argv is cut off before CLI11 sees anything (cli_args.h).
  safex::cli::SplitCommandLine split = safex::cli::SplitAtSeparator(argc, argv);
  const std::string verb = safex::cli::VerbOf(split.safex_args);
  if (split.program && !safex::cli::VerbTakesProgram(verb)) {
    std::fprintf(stderr, "safex%s%s: takes no program after \"--\" (only run and submit do)\n",
                 verb.empty() ? "" : " ", verb.c_str());
    return 2;  // usage error
  }
  safex::cli::RegisterPolicyCommands(app, &exit_code);
  safex::cli::RegisterRunCommand(app, &exit_code, &split.program);
  safex::cli::RegisterTestCommand(app, &exit_code);
  safex::cli::RegisterAuditCommands(app, &exit_code);
  safex::cli::RegisterServeCommand(app, &exit_code);
  safex::cli::RegisterSubmitCommand(app, &exit_code, &split.program);
  safex::cli::RegisterSessionCommands(app, &exit_code);
  // CLI11 takes the arguments without the program name, last first.
  std::vector<std::string> args(split.safex_args.rbegin(), split.safex_args.rend() - 1);
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage error
  }
  return exit_code;
}
