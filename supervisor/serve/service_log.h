// The service's log: one line per event on stderr, which journald keeps under the unit
// (packaging/safex.service). Every line has a severity; a line about one run starts with
// "run <id>:" so that `journalctl -u safex | grep <id>` finds its whole story (admitted, started,
// ended or refused). Under journald (JOURNAL_STREAM is set) each line starts with the syslog
// priority prefix journald reads ("<3>" error, "<4>" warning, "<6>" info), so `journalctl -p
// warning` works; elsewhere with a UTC timestamp and the level. Built on spdlog; thread-safe.
#pragma once

#include <string>

namespace safex::serve {

enum class Severity { kInfo, kWarning, kError };

void ServeLog(Severity severity, const std::string& line);
inline void ServeLog(const std::string& line) { ServeLog(Severity::kInfo, line); }
inline void ServeWarn(const std::string& line) { ServeLog(Severity::kWarning, line); }
inline void ServeError(const std::string& line) { ServeLog(Severity::kError, line); }

}  // namespace safex::serve
