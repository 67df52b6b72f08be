// SHA-256 over bytes, as lowercase hex or raw; incremental for streams.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace safex {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);
std::string ToHex(const uint8_t* data, size_t len);
inline std::string ToHex(const Sha256Digest& d) { return ToHex(d.data(), d.size()); }

// Incremental hashing, e.g. of a stream that is larger than what we keep.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(std::string_view data);
  // REQUIRES: called once; the hasher is finished afterwards.
  Sha256Digest Finish();
  std::string FinishHex() { return ToHex(Finish()); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// SHA-256 of a file's whole content as lowercase hex, read from `fd` from offset 0 to its end
// (pread: the descriptor's offset is left alone), and how many bytes that was when `size` is
// given. An error (Status::Errno of the read) when a read fails.
Result<std::string> Sha256HexOfFd(int fd, uint64_t* size = nullptr);

}  // namespace safex
