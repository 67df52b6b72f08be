// safex: run untrusted code under a verified policy. See docs/architecture.md.
//
// The executable runs `safex submit` itself and hands every other verb, and safex-oci, to its
// core library (core_library.h): a submit, the hot path of agent platforms, then loads only
// libstdc++ and libcrypto instead of every library the supervisor needs.
#include "supervisor/cli.h"
#include "supervisor/cli_args.h"
#include "supervisor/core_library.h"

namespace {

void RegisterSubmitOnly(CLI::App& app, int* exit_code, const safex::cli::ProgramArgv* program) {
  safex::cli::RegisterSubmitCommand(app, exit_code, program);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace safex::cli;
  if (!StartedAsOciRuntime(argc, argv) && argc > 0 &&
      VerbOf(SplitAtSeparator(argc, argv).safex_args) == "submit") {
    return ParseAndRun(argc, argv, RegisterSubmitOnly);
  }
  return RunCore(argc, argv, SAFEX_BUILD_ID);
}
