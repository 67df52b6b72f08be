#include "supervisor/serve/session_files.h"

#include "common/sha256.h"
#include "plan/verify.h"
#include "supervisor/output/stream_validator.h"

namespace safex::serve {
namespace {

audit::SessionEvent FileEvent(const Session& s, audit::SessionEvent::What what,
                              const std::string& path, std::string_view bytes,
                              const Caller& caller) {
  audit::SessionEvent e;
  e.session_id = s.id;
  e.what = what;
  e.requester = {caller.uid, caller.gid, caller.pid};
  e.reason = path;
  e.file_bytes = bytes.size();
  e.file_sha256 = Sha256Hex(bytes);
  return e;
}

}  // namespace

Status CheckSessionPath(const plan::Plan& plan, const std::string& path) {
  if (path.find('\0') != std::string::npos || !plan::IsNormalAbsolutePath(path) || path == "/") {
    return Status::InvalidArgument("\"" + path +
                                   "\" is not an absolute, normalised path (no \".\", \"..\" or "
                                   "empty components)");
  }
  for (const plan::Mount& m : plan.mounts) {
    if (m.read_only) continue;
    if (path.size() > m.target.size() + 1 && path.starts_with(m.target) &&
        path[m.target.size()] == '/') {
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("\"" + path + "\" is not below a writable mount of policy " +
                                 plan.policy_name);
}

Result<nlohmann::json> PutSessionFile(SessionLease& lease, const std::string& path,
                                      std::string_view bytes, const Caller& caller,
                                      const SessionRecorder& record) {
  const Session& s = lease.session();
  SAFEX_RETURN_IF_ERROR(CheckSessionPath(s.prepared->plan, path));
  SAFEX_RETURN_IF_ERROR(lease.sandbox().WriteFile(path, bytes, 0644));
  // Recorded once it is in the sandbox: the log says what the program could see.
  const audit::SessionEvent e =
      FileEvent(s, audit::SessionEvent::What::kFileIn, path, bytes, caller);
  SAFEX_RETURN_IF_ERROR(record(e).With("the file was written but could not be recorded"));
  return nlohmann::json{{"path", path}, {"bytes", e.file_bytes}, {"sha256", e.file_sha256}};
}

Result<std::string> GetSessionFile(SessionLease& lease, const std::string& path, uint64_t max_bytes,
                                   const Caller& caller, const SessionRecorder& record) {
  const Session& s = lease.session();
  const plan::Plan& plan = s.prepared->plan;
  SAFEX_RETURN_IF_ERROR(CheckSessionPath(plan, path));
  SAFEX_ASSIGN_OR_RETURN(std::string bytes, lease.sandbox().ReadFile(path, max_bytes));
  SAFEX_ASSIGN_OR_RETURN(output::ValidatorSet validators,
                         output::ValidatorSet::Compile(plan.validators));
  output::ValidationReport report =
      validators.ValidateFile(path, validators.FileValidatorsFor(path), bytes, bytes.size(), false);
  // What was read is recorded, delivered or not (the log shows what left the sandbox's reach).
  SAFEX_RETURN_IF_ERROR(
      record(FileEvent(s, audit::SessionEvent::What::kFileOut, path, bytes, caller)));
  if (report.rejected) {
    const output::Finding* f = report.rejection();
    return Status::FailedPrecondition("session file " + path + " was rejected by a validator" +
                                      (f != nullptr ? ": " + f->Summary() : std::string()));
  }
  return std::move(report.delivered);
}

}  // namespace safex::serve
