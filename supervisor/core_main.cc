// libsafex-core.so's entry (supervisor/core_library.h): every verb of `safex`, and safex-oci.
// The executable (main.cc) calls it after checking and loading this library.
#include <cstdio>
#include <cstring>

#include "supervisor/cli.h"
#include "supervisor/cli_args.h"
#include "supervisor/oci/oci_runtime.h"

#ifndef SAFEX_BUILD_ID
#error "SAFEX_BUILD_ID is set by CMake (supervisor/CMakeLists.txt)"
#endif

namespace {

void RegisterAllVerbs(CLI::App& app, int* exit_code, const safex::cli::ProgramArgv* program) {
  using namespace safex::cli;
  RegisterPolicyCommands(app, exit_code);
  RegisterRunCommand(app, exit_code, program);
  RegisterTestCommand(app, exit_code);
  RegisterAuditCommands(app, exit_code);
  RegisterServeCommand(app, exit_code);
  RegisterSubmitCommand(app, exit_code, program);
  RegisterSessionCommands(app, exit_code);
}

}  // namespace

// The only symbol the library exports (core_exports.map).
extern "C" __attribute__((visibility("default"))) int safex_core_main_v1(int argc, char** argv,
                                                                         const char* build_id) {
  if (build_id == nullptr || std::strcmp(build_id, SAFEX_BUILD_ID) != 0) {
    std::fprintf(stderr,
                 "safex: its core library is of another build (executable %s, core %s); install "
                 "the executable and libsafex-core.so of one build together\n",
                 build_id != nullptr ? build_id : "(none)", SAFEX_BUILD_ID);
    return 125;
  }
  // Started as safex-oci (a link to the executable): the OCI runtime, with runc's command line.
  if (safex::cli::StartedAsOciRuntime(argc, argv)) {
    return safex::supervisor::oci::RunOciRuntime(argc, argv);
  }
  return safex::cli::ParseAndRun(argc, argv, RegisterAllVerbs);
}
