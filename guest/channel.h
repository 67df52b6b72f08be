// The agent's end of the host channel: the virtio-serial port named kPortName, opened once and
// kept open for the whole boot (closing it would make QEMU drop data queued towards the host).
// Blocking I/O: the agent has nothing better to do while the host is slow to read.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "drivers/microvm/wire.h"

namespace safex::guest {

class Channel {
 public:
  // Finds the port in /sys/class/virtio-ports and opens its /dev node, waiting up to `timeout`
  // for the device to appear (the virtio_console module probes asynchronously).
  static std::optional<Channel> Open(std::chrono::milliseconds timeout, std::string* error);

  Channel(Channel&& o) noexcept;
  Channel& operator=(Channel&& o) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  int fd() const { return fd_; }
  // Writes one frame completely. False when the port is gone (the host closed it).
  bool Send(microvm::FrameType type, std::string_view payload);
  // Reads the next frame; nullopt on EOF, error or a frame over `max_payload`.
  std::optional<microvm::Frame> Receive(size_t max_payload);

 private:
  explicit Channel(int fd) : fd_(fd), reader_(microvm::kMaxSpecFrame) {}
  int fd_ = -1;
  microvm::FrameReader reader_;
};

}  // namespace safex::guest
