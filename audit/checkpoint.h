// Signed checkpoints: an Ed25519 signature over (log id, event count, head hash, time). An auditor
// who keeps a checkpoint outside the database can later prove the log still holds exactly that
// prefix: truncation, deletion and rewriting all change the hash at that count.
//
// Keys: an Ed25519 private key in PKCS#8 PEM, mode 0600, owned by the user who runs safex;
// generated on first use. The public key is written beside it as PATH.pub (PEM, 0644) and into
// every checkpoint, as 64 lowercase hex digits of the raw key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace safex::audit {

struct Checkpoint {
  std::string log_id;  // meta.log_id of the database it belongs to
  uint64_t event_count = 0;
  std::string head_hash;  // hash of event `event_count` (hex); the genesis hash when 0
  int64_t time_ns = 0;
  std::string public_key;  // hex, raw Ed25519 public key (32 bytes)
  std::string signature;   // hex, Ed25519 signature (64 bytes) over SignedBytes()

  bool operator==(const Checkpoint&) const = default;

  // The exact bytes signed: "safex-audit-checkpoint" 0x00 0x01 then log_id, event_count,
  // head_hash and time_ns, each length-prefixed (u32be) as decimal/hex text.
  std::string SignedBytes() const;
  // The file format of `safex audit checkpoint --out`: one JSON object (see docs/audit.md).
  std::string ToJson() const;
  static Result<Checkpoint> FromJson(std::string_view text);
};

// An Ed25519 key pair loaded from (or generated at) a path.
class SigningKey {
 public:
  ~SigningKey();
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  // Loads PATH; when it does not exist and `create` is set, generates a key, writes it 0600
  // (atomically: a concurrent creator's key wins and is loaded) and PATH.pub. Refuses a key
  // file that is not a regular file, is readable or writable by group/others, or is owned by
  // another user.
  static Result<std::unique_ptr<SigningKey>> LoadOrCreate(const std::string& path, bool create);

  const std::string& public_key_hex() const { return public_hex_; }
  // Fills public_key and signature.
  Status Sign(Checkpoint* c) const;

 private:
  SigningKey() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string public_hex_;
};

// The raw public key (hex) from a PEM public key file such as PATH.pub.
Result<std::string> LoadPublicKeyHex(const std::string& pub_path);

// OK when c.signature is a valid signature by c.public_key over c.SignedBytes().
Status VerifyCheckpointSignature(const Checkpoint& c);

}  // namespace safex::audit
