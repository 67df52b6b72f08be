#include "audit/checkpoint.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "audit/time_format.h"
#include "common/sha256.h"
#include "common/strict_json.h"
#include "common/unique_fd.h"

namespace safex::audit {
namespace {

using nlohmann::json;

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

void PutField(std::string* out, std::string_view v) {
  auto n = static_cast<uint32_t>(v.size());
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(n >> shift));
  out->append(v);
}

std::optional<std::vector<uint8_t>> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int v = 0;
    for (size_t k = 0; k < 2; ++k) {
      char c = hex[i + k];
      if (c >= '0' && c <= '9') {
        v = v * 16 + (c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v = v * 16 + (c - 'a' + 10);
      } else {
        return std::nullopt;
      }
    }
    out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Status::Errno("open", path, errno);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 65536) return Status::InvalidArgument(path + ": too large for a key");
  }
  return out;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Writes `data` to a fresh temp file beside `path` with `mode`, fsyncs it and returns its name.
Result<std::string> WriteTemp(const std::string& path, std::string_view data, mode_t mode) {
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return Status::Errno("mkostemp", tmp, errno);
  Status st = Status::Ok();
  if (fchmod(fd.get(), mode) != 0) st = Status::Errno("fchmod", tmp, errno);
  if (st.ok()) st = WriteAll(fd.get(), data, tmp);
  if (st.ok() && fsync(fd.get()) != 0) st = Status::Errno("fsync", tmp, errno);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  return tmp;
}

Result<std::string> RawPublicHex(EVP_PKEY* key) {
  uint8_t pub[32];
  size_t len = sizeof pub;
  if (EVP_PKEY_get_raw_public_key(key, pub, &len) != 1 || len != sizeof pub) {
    return Status::Internal("cannot read the Ed25519 public key");
  }
  return ToHex(pub, len);
}

Result<PkeyPtr> ParsePrivateKey(const std::string& pem, const std::string& path) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Status::Internal("BIO_new_mem_buf failed");
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return Status::InvalidArgument(path + ": not a PEM private key");
  }
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return Status::InvalidArgument(path + ": not an Ed25519 key");
  }
  return key;
}

}  // namespace

struct SigningKey::Impl {
  PkeyPtr key;
};

SigningKey::~SigningKey() = default;

std::string Checkpoint::SignedBytes() const {
  std::string out("safex-audit-checkpoint\0\x01", 24);
  PutField(&out, log_id);
  PutField(&out, std::to_string(event_count));
  PutField(&out, head_hash);
  PutField(&out, std::to_string(time_ns));
  return out;
}

std::string Checkpoint::ToJson() const {
  json j = {{"format", "safex-audit-checkpoint/1"},
            {"log_id", log_id},
            {"event_count", event_count},
            {"head_hash", head_hash},
            {"time_ns", time_ns},
            {"time", FormatIso8601(time_ns)},
            {"public_key", public_key},
            {"signature", signature}};
  return j.dump(2) + "\n";
}

Result<Checkpoint> Checkpoint::FromJson(std::string_view text) {
  // A checkpoint file travels (tickets, other hosts): read it as strictly as a request, so that
  // a duplicated "event_count" cannot mean one thing here and another to a different reader.
  auto parsed = ParseStrictJson(text);
  if (!parsed.ok()) {
    return Status::InvalidArgument("checkpoint file is not strict JSON: " +
                                   parsed.status().message());
  }
  const json& j = *parsed;
  if (!j.is_object()) return Status::InvalidArgument("checkpoint file is not a JSON object");
  auto str = [&](const char* k) -> const json* {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? &*it : nullptr;
  };
  const json* format = str("format");
  if (format == nullptr || *format != "safex-audit-checkpoint/1") {
    return Status::InvalidArgument("checkpoint file: format is not safex-audit-checkpoint/1");
  }
  Checkpoint c;
  for (auto [key, dest] : {std::pair{"log_id", &c.log_id},
                           {"head_hash", &c.head_hash},
                           {"public_key", &c.public_key},
                           {"signature", &c.signature}}) {
    const json* v = str(key);
    if (v == nullptr) return Status::InvalidArgument(std::string("checkpoint file: no ") + key);
    *dest = v->get<std::string>();
  }
  auto count = j.find("event_count");
  auto time = j.find("time_ns");
  if (count == j.end() || !count->is_number_unsigned() || time == j.end() ||
      !time->is_number_integer()) {
    return Status::InvalidArgument("checkpoint file: event_count/time_ns missing or not integers");
  }
  c.event_count = count->get<uint64_t>();
  c.time_ns = time->get<int64_t>();
  return c;
}

Result<std::unique_ptr<SigningKey>> SigningKey::LoadOrCreate(const std::string& path, bool create) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) {
      return Status::Errno("checkpoint key: lstat", path, errno);
    }
    // Generate, then publish with link(): it fails if another process got there first, in
    // which case its key is the one to use.
    PkeyPtr key;
    {
      std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(
          EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
      EVP_PKEY* raw = nullptr;
      if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
        return Status::Internal("Ed25519 key generation failed");
      }
      key.reset(raw);
    }
    BioPtr bio(BIO_new(BIO_s_mem()));
    if (!bio || PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr,
                                         nullptr) != 1) {
      return Status::Internal("cannot encode the Ed25519 private key");
    }
    char* data = nullptr;
    long len = BIO_get_mem_data(bio.get(), &data);
    SAFEX_ASSIGN_OR_RETURN(std::string tmp,
                           WriteTemp(path, std::string_view(data, static_cast<size_t>(len)), 0600));
    int rc = link(tmp.c_str(), path.c_str());
    int err = errno;
    unlink(tmp.c_str());
    if (rc != 0) {
      if (err == EEXIST) return LoadOrCreate(path, false);
      return Status::Errno("link", path, err);
    }
    BioPtr pub(BIO_new(BIO_s_mem()));
    if (!pub || PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
      return Status::Internal("cannot encode the Ed25519 public key");
    }
    len = BIO_get_mem_data(pub.get(), &data);
    std::string pub_path = path + ".pub";
    SAFEX_ASSIGN_OR_RETURN(
        std::string pub_tmp,
        WriteTemp(pub_path, std::string_view(data, static_cast<size_t>(len)), 0644));
    if (rename(pub_tmp.c_str(), pub_path.c_str()) != 0) {
      err = errno;
      unlink(pub_tmp.c_str());
      return Status::Errno("rename", pub_path, err);
    }
    std::unique_ptr<SigningKey> out(new SigningKey());
    out->impl_ = std::make_unique<Impl>();
    SAFEX_ASSIGN_OR_RETURN(out->public_hex_, RawPublicHex(key.get()));
    out->impl_->key = std::move(key);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::FailedPrecondition("checkpoint key " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied("checkpoint key " + path +
                                    " is accessible by group or others; chmod 600 it");
  }
  if (st.st_uid != geteuid()) {
    return Status::PermissionDenied("checkpoint key " + path + " belongs to uid " +
                                    std::to_string(st.st_uid) + ", not to this user");
  }
  SAFEX_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(path));
  SAFEX_ASSIGN_OR_RETURN(PkeyPtr key, ParsePrivateKey(pem, path));
  std::unique_ptr<SigningKey> out(new SigningKey());
  out->impl_ = std::make_unique<Impl>();
  SAFEX_ASSIGN_OR_RETURN(out->public_hex_, RawPublicHex(key.get()));
  out->impl_->key = std::move(key);
  return out;
}

Status SigningKey::Sign(Checkpoint* c) const {
  c->public_key = public_hex_;
  std::string msg = c->SignedBytes();
  MdCtxPtr ctx(EVP_MD_CTX_new());
  uint8_t sig[64];
  size_t sig_len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, impl_->key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &sig_len, reinterpret_cast<const uint8_t*>(msg.data()),
                     msg.size()) != 1) {
    return Status::Internal("Ed25519 signing failed");
  }
  c->signature = ToHex(sig, sig_len);
  return Status::Ok();
}

Result<std::string> LoadPublicKeyHex(const std::string& pub_path) {
  SAFEX_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(pub_path));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Status::Internal("BIO_new_mem_buf failed");
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key || EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    ERR_clear_error();
    return Status::InvalidArgument(pub_path + ": not a PEM Ed25519 public key");
  }
  return RawPublicHex(key.get());
}

Status VerifyCheckpointSignature(const Checkpoint& c) {
  auto pub = FromHex(c.public_key);
  auto sig = FromHex(c.signature);
  if (!pub || pub->size() != 32) return Status::DataLoss("checkpoint public key is malformed");
  if (!sig || sig->size() != 64) return Status::DataLoss("checkpoint signature is malformed");
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, pub->data(), pub->size()));
  if (!key) return Status::DataLoss("checkpoint public key is not an Ed25519 key");
  MdCtxPtr ctx(EVP_MD_CTX_new());
  std::string msg = c.SignedBytes();
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return Status::Internal("Ed25519 verification setup failed");
  }
  if (EVP_DigestVerify(ctx.get(), sig->data(), sig->size(),
                       reinterpret_cast<const uint8_t*>(msg.data()), msg.size()) != 1) {
    ERR_clear_error();  // leave no failure behind in OpenSSL's per-thread queue
    return Status::DataLoss("checkpoint signature does not verify");
  }
  return Status::Ok();
}

}  // namespace safex::audit
