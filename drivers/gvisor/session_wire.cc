#include "drivers/gvisor/session_wire.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "drivers/sigpipe_block.h"

namespace safex::drivers::gvisor {
namespace {

// No answer is larger than a file read back (launch/session.c: 20 MiB and the frame's head).
constexpr size_t kMaxAnswer = 20 * 1024 * 1024 + 64;

}  // namespace

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out->push_back(static_cast<char>(v >> shift));
}

uint32_t GetU32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
  return v;
}

Status SessionWire::Send(char kind, std::string_view payload, std::chrono::milliseconds timeout) {
  if (!commands_) return Status::Unavailable("the session's sandbox is gone");
  SigpipeBlock sigpipe_block;  // a launcher that died makes the write EPIPE, not a signal
  std::string frame(1, kind);
  PutU32(&frame, static_cast<uint32_t>(payload.size()));
  frame.append(payload);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = write(commands_.get(), frame.data() + off, frame.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return Status::Unavailable("the session's sandbox does not take commands: " +
                                 Status::Errno("write", errno).message());
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("the session's sandbox did not take its command in time");
    }
    pollfd p{commands_.get(), POLLOUT, 0};
    poll(&p, 1, 50);
  }
  return Status::Ok();
}

bool SessionWire::Pump() {
  char buf[65536];
  while (answers_) {
    const ssize_t n = read(answers_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0 || in_.size() + static_cast<size_t>(n) > kMaxAnswer) {
      answers_.Reset();
      return false;
    }
    in_.append(buf, static_cast<size_t>(n));
  }
  return false;
}

std::optional<SessionFrame> SessionWire::Next() {
  if (in_.size() < 5) return std::nullopt;
  const uint32_t len = GetU32(in_, 1);
  if (in_.size() < 5 + static_cast<size_t>(len)) return std::nullopt;
  SessionFrame f{in_[0], in_.substr(5, len)};
  in_.erase(0, 5 + static_cast<size_t>(len));
  return f;
}

void SessionWire::Close() {
  commands_.Reset();
  answers_.Reset();
}

}  // namespace safex::drivers::gvisor
