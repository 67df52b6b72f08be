#include "guest/channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "common/small_file.h"
#include "guest/util.h"

namespace safex::guest {
namespace {

// "vport0p1" when /sys/class/virtio-ports/vport0p1/name holds kPortName; "" if not (yet) there.
std::string FindPort() {
  DIR* d = opendir("/sys/class/virtio-ports");
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::optional<std::string> name =
        ReadSmallFile(std::string("/sys/class/virtio-ports/") + e->d_name + "/name");
    if (name && TrimNewline(*name) == microvm::kPortName) {
      found = e->d_name;
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

std::optional<Channel> Channel::Open(std::chrono::milliseconds timeout, std::string* error) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string port = FindPort();
    if (!port.empty()) {
      int fd = open(("/dev/" + port).c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
      if (fd >= 0) return Channel(fd);
      if (errno != ENOENT) {
        *error = "open /dev/" + port + ": " + std::strerror(errno);
        return std::nullopt;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      *error = std::string("virtio-serial port ") + microvm::kPortName + " did not appear";
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Channel::Channel(Channel&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), reader_(std::move(o.reader_)) {}

Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    reader_ = std::move(o.reader_);
  }
  return *this;
}

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

bool Channel::Send(microvm::FrameType type, std::string_view payload) {
  std::string frame = microvm::EncodeFrame(type, payload);
  return WriteAll(fd_, frame.data(), frame.size());
}

std::optional<microvm::Frame> Channel::Receive(size_t max_payload) {
  for (;;) {
    if (auto f = reader_.Next()) {
      if (f->payload.size() > max_payload) return std::nullopt;
      return f;
    }
    if (reader_.failed()) return std::nullopt;
    char buf[64 * 1024];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    reader_.Feed(buf, static_cast<size_t>(n));
  }
}

}  // namespace safex::guest
