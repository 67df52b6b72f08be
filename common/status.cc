#include "common/status.h"

#include <cstring>

namespace safex {

const char* CodeName(Status::Code c) {
  switch (c) {
    case Status::Code::kOk: return "ok";
    case Status::Code::kInvalidArgument: return "invalid argument";
    case Status::Code::kNotFound: return "not found";
    case Status::Code::kPermissionDenied: return "permission denied";
    case Status::Code::kUnavailable: return "unavailable";
    case Status::Code::kFailedPrecondition: return "failed precondition";
    case Status::Code::kResourceExhausted: return "resource exhausted";
    case Status::Code::kDataLoss: return "data loss";
    case Status::Code::kInternal: return "internal";
  }
  return "unknown";
}

Status Status::Errno(const std::string& syscall, const std::string& arg, int err) {
  std::string m = syscall;
  if (!arg.empty()) m += "(" + arg + ")";
  m += ": ";
  m += std::strerror(err);
  Code c = Code::kInternal;
  switch (err) {
    case ENOENT: c = Code::kNotFound; break;
    case EACCES:
    case EPERM: c = Code::kPermissionDenied; break;
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EAGAIN: c = Code::kResourceExhausted; break;
    case EINVAL: c = Code::kInvalidArgument; break;
    default: break;
  }
  return Status(c, std::move(m));
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::With(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace safex
