#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace safex {

struct Sha256Hasher::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256Hasher::Sha256Hasher() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  // An allocation failure here leaves no sane way to continue; OpenSSL does not fail otherwise.
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) abort();
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
