#include "drivers/gvisor/session_sandbox.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace safex::drivers::gvisor {
namespace {

using Clock = std::chrono::steady_clock;

// A file command's answer: a whole 16 MiB file goes through two pipes and a tmpfs.
constexpr std::chrono::milliseconds kFileTimeout{60000};

// What a file command's errno means to the caller.
Status FileError(const std::string& path, uint32_t err) {
  const std::string why = err == ELOOP ? "a symlink is on its path (never followed)"
                          : err == EINVAL || err == ENXIO ? "it is not a regular file"
                          : err == EFBIG                  ? "it is larger than the size allowed"
                                                          : std::strerror(static_cast<int>(err));
  const std::string msg = "session file " + path + ": " + why;
  if (err == ENOENT) return Status::NotFound(msg);
  if (err == EFBIG) return Status::ResourceExhausted(msg);
  if (err == EACCES || err == EPERM || err == EROFS) return Status::PermissionDenied(msg);
  return Status::InvalidArgument(msg);
}

}  // namespace

bool DrainIdle(SessionParts& p) {
  // Between commands the log holds only the launcher's own waiting: nothing to keep. runsc's
  // diagnostics are kept (capped) for the error of a sandbox that dies.
  DrainInto(p.io.log.read, nullptr, 0);
  DrainInto(p.io.diag.read, &p.io.idle_diag, p.options->diagnostics_cap);
  RunState& s = *p.state;
  if (!s.runsc.reaped()) s.runsc.TryWait().ok();
  if (s.runsc.reaped()) p.dead = true;
  return !p.dead;
}

Result<std::string> AwaitAnswer(SessionParts& p, char kind, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!p.dead) {
    const bool open = p.wire.Pump();
    if (std::optional<SessionFrame> f = p.wire.Next()) {
      if (f->kind == kind) return std::move(f->payload);
      break;  // an answer to something else: the launcher is not following the protocol
    }
    if (!open || !DrainIdle(p) || Clock::now() >= deadline) break;
    pollfd fds[2] = {{p.wire.answers_fd(), POLLIN, 0}, {p.state->runsc.pidfd(), POLLIN, 0}};
    poll(fds, 2, 50);
  }
  p.dead = true;
  p.state->StopSandbox(p.options->kill_grace);
  return Status::Unavailable("the session's sandbox stopped answering; it was destroyed");
}

GvisorSession::GvisorSession(std::string id, std::string plan_digest, int64_t created_ns,
                             Enforcement evidence, std::unique_ptr<SessionParts> parts)
    : SessionSandbox(std::move(id), std::move(plan_digest), created_ns), parts_(std::move(parts)) {
  enforcement_ = std::move(evidence);
}

GvisorSession::~GvisorSession() {
  // EOF on its commands: the launcher (the sandbox's init) exits, and everything goes.
  parts_->wire.Close();
  parts_->state->Teardown(parts_->options->kill_grace);
}

bool GvisorSession::Alive() { return !parts_->dead && DrainIdle(*parts_); }

Result<RunResult> GvisorSession::Exec(const RunRequest& request) {
  if (!Alive()) return Status::Unavailable("the session's sandbox is gone");
  return ExecCommand(*parts_, request);
}

Status GvisorSession::WriteFile(const std::string& path, std::string_view bytes, uint32_t mode) {
  if (bytes.size() > kMaxSessionPayloadBytes) {
    return Status::ResourceExhausted("a file written into a session holds at most 16 MiB");
  }
  if (!Alive()) return Status::Unavailable("the session's sandbox is gone");
  std::string payload;
  PutU32(&payload, mode & 07777);
  payload += path;
  payload.push_back('\0');
  payload.append(bytes);
  SAFEX_RETURN_IF_ERROR(parts_->wire.Send('w', payload, kFileTimeout));
  SAFEX_ASSIGN_OR_RETURN(std::string answer, AwaitAnswer(*parts_, 'w', kFileTimeout));
  if (answer.size() != 4) return Status::Internal("the session's launcher answered badly");
  const uint32_t err = GetU32(answer, 0);
  return err == 0 ? Status::Ok() : FileError(path, err);
}

Result<std::string> GvisorSession::ReadFile(const std::string& path, uint64_t max_bytes) {
  if (!Alive()) return Status::Unavailable("the session's sandbox is gone");
  std::string payload;
  PutU32(&payload, static_cast<uint32_t>(std::min<uint64_t>(max_bytes, kMaxSessionPayloadBytes)));
  payload += path;
  payload.push_back('\0');
  SAFEX_RETURN_IF_ERROR(parts_->wire.Send('r', payload, kFileTimeout));
  SAFEX_ASSIGN_OR_RETURN(std::string answer, AwaitAnswer(*parts_, 'r', kFileTimeout));
  if (answer.size() < 4) return Status::Internal("the session's launcher answered badly");
  const uint32_t err = GetU32(answer, 0);
  if (err != 0) return FileError(path, err);
  return answer.substr(4);
}

}  // namespace safex::drivers::gvisor
