// The host's end of a session launcher's command channel (launch/session.c): frames of a kind
// byte, a 4-byte little-endian length and the payload, written to the launcher's fd 4 (the run's
// `go` pipe) and read back from its fd 3 (the `report` pipe, kept open after the report). Both
// ends are non-blocking: a launcher that stops reading or answering cannot hold the host.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::drivers::gvisor {

struct SessionFrame {
  char kind = 0;
  std::string payload;
};

class SessionWire {
 public:
  SessionWire() = default;
  SessionWire(UniqueFd commands, UniqueFd answers)
      : commands_(std::move(commands)), answers_(std::move(answers)) {}

  // One frame, all of it within `timeout`.
  Status Send(char kind, std::string_view payload, std::chrono::milliseconds timeout);
  // Reads what has arrived (never blocks); false at EOF or on an error (the launcher is gone,
  // or it sent more than any answer holds).
  bool Pump();
  // A whole answer when one has arrived, in order.
  std::optional<SessionFrame> Next();

  int answers_fd() const { return answers_.get(); }
  bool open() const { return commands_.valid() && answers_.valid(); }
  // EOF to the launcher: it exits, and the sandbox with it.
  void Close();

 private:
  UniqueFd commands_;
  UniqueFd answers_;
  std::string in_;
};

// Little-endian 4-byte fields of the frames.
void PutU32(std::string* out, uint32_t v);
uint32_t GetU32(std::string_view bytes, size_t at);

}  // namespace safex::drivers::gvisor
