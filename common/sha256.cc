#include "common/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace safex {

struct Sha256Hasher::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

namespace {

// The algorithm, fetched from OpenSSL's provider once per process. EVP_sha256() makes every
// EVP_DigestInit_ex fetch it again (OpenSSL 3's implicit fetch: a locked lookup); the audit chain
// hashes every event. Measured: 0.38 instead of 0.50 us for a 100-byte digest.
const EVP_MD* Sha256Md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

}  // namespace

Sha256Hasher::Sha256Hasher() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  // An allocation failure here leaves no sane way to continue; OpenSSL does not fail otherwise.
  const EVP_MD* md = Sha256Md();
  if (impl_->ctx == nullptr || md == nullptr || EVP_DigestInit_ex2(impl_->ctx, md, nullptr) != 1) {
    abort();
  }
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256Hasher::Update(std::string_view data) {
  EVP_DigestUpdate(impl_->ctx, data.data(), data.size());
}

Sha256Digest Sha256Hasher::Finish() {
  Sha256Digest d{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, d.data(), &len);
  return d;
}

Sha256Digest Sha256(std::string_view data) {
  Sha256Hasher h;
  h.Update(data);
  return h.Finish();
}

std::string Sha256Hex(std::string_view data) { return ToHex(Sha256(data)); }

Result<std::string> Sha256HexOfFd(int fd, uint64_t* size) {
  Sha256Hasher hasher;
  std::vector<char> buf(1 << 20);
  off_t at = 0;
  for (;;) {
    ssize_t n = pread(fd, buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errno("read", errno);
    if (n == 0) break;
    hasher.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    at += n;
  }
  if (size != nullptr) *size = static_cast<uint64_t>(at);
  return hasher.FinishHex();
}

std::string ToHex(const uint8_t* data, size_t len) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

}  // namespace safex
