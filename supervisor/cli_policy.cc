#include "supervisor/cli.h"

namespace safex::cli {

void RegisterPolicyCommands(CLI::App& app, int* exit_code) {
  (void)app;
  (void)exit_code;
}

}  // namespace safex::cli
