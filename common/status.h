// Status and Result<T>: the error currency of safex. Nothing throws across a library boundary;
// a function that can fail returns one of these. A run's *outcome* (verdict) is data, not an error.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace safex {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // bad input from a user (policy, argv, request)
    kNotFound,
    kPermissionDenied,
    kUnavailable,      // a backend, cgroup controller or tool is missing or broken
    kFailedPrecondition,
    kResourceExhausted,
    kDataLoss,         // audit log corruption, tampering
    kInternal,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status PermissionDenied(std::string m) {
    return Status(Code::kPermissionDenied, std::move(m));
  }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status FailedPrecondition(std::string m) {
    return Status(Code::kFailedPrecondition, std::move(m));
  }
  static Status ResourceExhausted(std::string m) {
    return Status(Code::kResourceExhausted, std::move(m));
  }
  static Status DataLoss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
  // "what(arg): strerror(err)", e.g. Errno("mkdir", "/sys/fs/cgroup/pids/safex", EACCES).
  static Status Errno(const std::string& syscall, const std::string& arg, int err);
  static Status Errno(const std::string& syscall, int err) { return Errno(syscall, "", err); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;
  // Prefixes context: st.With("creating cgroup") -> "creating cgroup: <message>".
  Status With(const std::string& context) const;

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

const char* CodeName(Status::Code c);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {}     // NOLINT: implicit by design; s must not be ok

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace safex

// Early-return helpers. SAFEX_ASSIGN_OR_RETURN(auto x, Foo()) declares x.
#define SAFEX_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::safex::Status safex_st_ = (expr);      \
    if (!safex_st_.ok()) return safex_st_;   \
  } while (0)

#define SAFEX_CONCAT_INNER_(a, b) a##b
#define SAFEX_CONCAT_(a, b) SAFEX_CONCAT_INNER_(a, b)
#define SAFEX_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto SAFEX_CONCAT_(safex_r_, __LINE__) = (expr);                     \
  if (!SAFEX_CONCAT_(safex_r_, __LINE__).ok())                         \
    return SAFEX_CONCAT_(safex_r_, __LINE__).status();                 \
  lhs = std::move(SAFEX_CONCAT_(safex_r_, __LINE__)).value()
