// What every `safex audit` verb shares (cli_audit.cc, cli_fleet.cc): its exit statuses
// (docs/cli.md) and how it reports an error.
#pragma once

#include <iostream>
#include <string>

#include "audit/text_escape.h"

namespace safex::cli::audit_verbs {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // verification failed, run not found, ship warned
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreadable = 3;  // a log or the central database could not be used

// "safex audit: MESSAGE" on stderr, escaped: messages quote paths and stored text.
inline void PrintError(const std::string& msg) {
  std::cerr << "safex audit: " << audit::EscapeForTerminal(msg) << "\n";
}

}  // namespace safex::cli::audit_verbs
