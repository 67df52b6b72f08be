// The audit log's runs as OCSF events, for SIEMs (`safex audit export --format ocsf`).
//
// One run is one OCSF 1.1.0 Process Activity event (class_uid 1007, System Activity) with
// activity Launch: the requester asked safex to launch a program in a sandbox, and the event
// says how that ended (status, exit_code, end_time). A refusal is a launch that failed. The
// whole mapping, field by field, is in docs/audit.md ("Export as OCSF"); safex's own fields
// (verdict, digests, limits, validators, denied egress...) are under `unmapped`.
//
// Strings: OCSF text fields are for people and search, so a byte string that is not UTF-8 is
// shown escaped there (EscapeForTerminal); `unmapped` keeps the exact bytes (JsonFromBytes:
// a string, or {"hex": ...} when not UTF-8), so nothing the log holds is lost or ambiguous.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "audit/audit_log.h"

namespace safex::audit {

inline constexpr char kOcsfSchemaVersion[] = "1.1.0";
inline constexpr int kOcsfProcessActivityClass = 1007;
inline constexpr int kOcsfActivityLaunch = 1;

// What the run record itself does not say: who exports it and from where.
struct OcsfSource {
  std::string product_version;  // metadata.product.version ("" leaves it out)
  // device.hostname: the host whose log this is. The log does not record its host, so the
  // exporter says (gethostname() for a local log); "" leaves it out.
  std::string hostname;
};

// The OCSF event of one run (any state: a run still running is status Unknown). Pure: the same
// run and source give the same event. Never throws; every string in it is valid UTF-8.
nlohmann::json OcsfEventFromRun(const RunSummary& run, const OcsfSource& source);

// argv as one line for people: each argument escaped (EscapeForTerminal: no control, bidi or
// invalid-UTF-8 byte survives), single-quoted shell-style when empty or holding a space or
// quote. Lossy by design (a literal "\x1b" and an ESC byte look alike): the exact argv is kept
// elsewhere. Also what `safex audit list` shows.
std::string ArgvForDisplay(const std::vector<std::string>& argv);

}  // namespace safex::audit
