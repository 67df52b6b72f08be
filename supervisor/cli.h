// The `safex` command line: one file per group of verbs (crun's layout). Each Register* function
// adds its subcommands to the app; a subcommand's callback stores the process exit status in
// *exit_code. Exit statuses: see docs/cli.md (2 = usage error everywhere).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/run_setup.h"

namespace safex::cli {

// check, compile, explain, fmt, diff: policy authoring (cli_policy.cc). Unprivileged.
void RegisterPolicyCommands(CLI::App& app, int* exit_code);
// The program of `run` and `submit`: everything after the command line's first "--"
// (cli_args.h), set before CLI11 parses the rest. nullopt: there was no "--".
using ProgramArgv = std::optional<std::vector<std::string>>;

// run: one sandboxed run (cli_run.cc). Root.
void RegisterRunCommand(CLI::App& app, int* exit_code, const ProgramArgv* program);
// audit list|show|verify|checkpoint|export (cli_audit.cc).
void RegisterAuditCommands(CLI::App& app, int* exit_code);
// audit central init|enrol and audit ship: the fleet audit (cli_fleet.cc).
void RegisterFleetCommands(CLI::App* audit_cmd, int* exit_code);
// audit verify --central URL [--host NAME]: exit 0 intact, 1 broken, 3 unreadable.
int VerifyCentralCommand(const std::string& url, const std::optional<std::string>& host,
                         bool as_json);
// serve: the host service on a Unix socket (cli_serve.cc). Root.
void RegisterServeCommand(CLI::App& app, int* exit_code);
// test: a policy's tests and the built-in probes, run for real (cli_test.cc). Root.
void RegisterTestCommand(CLI::App& app, int* exit_code);
// The options `run` and `test` share: host config, audit log, state root, runsc.
void AddRunSetupOptions(CLI::App* cmd, supervisor::RunSetupFlags* flags);
// submit: one run through the service (cli_submit.cc).
void RegisterSubmitCommand(CLI::App& app, int* exit_code, const ProgramArgv* program);
// session open|show|put|get|close: agent sessions through the service (cli_session.cc).
void RegisterSessionCommands(CLI::App& app, int* exit_code);

// Adds a set of verbs to the app (the core's: all of them; the executable's own: submit).
using RegisterVerbs = void (*)(CLI::App& app, int* exit_code, const ProgramArgv* program);

// Parses the command line with the verbs `register_verbs` adds, runs the chosen verb and returns
// the process exit status (2 for a usage error). Everything after the first "--" is the
// program's and never reaches CLI11 (cli_args.h); a verb that takes no program refuses it.
// One parser for the executable and its core (cli_parse.cc), so the two cannot drift apart.
int ParseAndRun(int argc, char** argv, RegisterVerbs register_verbs);

}  // namespace safex::cli
