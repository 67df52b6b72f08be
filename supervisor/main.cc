// safex: run untrusted code under a verified policy. See docs/architecture.md.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "supervisor/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"safex: run untrusted code under a verified policy", "safex"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "safex 0.1.0");
  int exit_code = 0;
  safex::cli::RegisterPolicyCommands(app, &exit_code);
  safex::cli::RegisterRunCommand(app, &exit_code);
  safex::cli::RegisterAuditCommands(app, &exit_code);
  safex::cli::RegisterServeCommand(app, &exit_code);
  safex::cli::RegisterSubmitCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage error
  }
  return exit_code;
}
