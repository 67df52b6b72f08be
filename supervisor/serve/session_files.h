// Files into and out of an agent session (docs/api.md, "Sessions": PUT and GET
// /v1/sessions/ID/files/PATH). The host checks the path; the session's init inside the sandbox
// does the writing and reading as the program's uid, never following a symlink
// (launch/session.c). Every file in and out is recorded in the audit log (path, size, SHA-256)
// before the caller is answered; what is read out passes the plan's file validators whose path
// matches, as a run's output file would.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "plan/plan.h"
#include "supervisor/serve/access.h"
#include "supervisor/serve/session_table.h"

namespace safex::serve {

// Whether `path` names a file the caller may write or read in a session of `plan`: absolute and
// normalised (no ".", "..", empty component, NUL), strictly below one of the plan's writable
// mounts. InvalidArgument says why not.
Status CheckSessionPath(const plan::Plan& plan, const std::string& path);

// Writes `bytes` to `path` (mode 0644 when created) and records it: {"path", "bytes", "sha256"}.
Result<nlohmann::json> PutSessionFile(SessionLease& lease, const std::string& path,
                                      std::string_view bytes, const Caller& caller,
                                      const SessionRecorder& record);

// Reads `path` (at most `max_bytes`), validates it and records it. Returns what the caller gets
// (the validators' delivered bytes); a rejection is FailedPrecondition with the finding.
Result<std::string> GetSessionFile(SessionLease& lease, const std::string& path, uint64_t max_bytes,
                                   const Caller& caller, const SessionRecorder& record);

}  // namespace safex::serve
