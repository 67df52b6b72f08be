// The canonical encoding of an event, and the hash chain over it (docs/audit.md, "Canonical
// encoding").
//
//   encoding := "safex-audit-event" 0x00  version:u8(=1)  count:u16be  field{count}
//   field    := name_len:u8 name  value
//   value    := 'N'                         (SQL NULL)
//             | 'I' int64:8 bytes big-endian (two's complement)
//             | 'T' len:u32be bytes         (TEXT, byte for byte)
//
// Every field of EventRow (all columns but `hash`) appears once, in EventColumn order, named.
// Each value is either fixed-size or length-prefixed, so a decoder reads exactly one row back:
// DecodeEvent(EncodeEvent(row)) == row for every row, hence two different rows never share an
// encoding. DecodeEvent also rejects everything EncodeEvent cannot produce, so each valid
// encoding has exactly one row (tests/audit and tests/fuzz/audit check both directions).
//
//   hash(0) = SHA-256("safex-audit genesis" 0x00 log_id)
//   hash(n) = SHA-256(hash(n-1) as 32 raw bytes || encoding(event n))
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "audit/event_row.h"
#include "common/sha256.h"
#include "common/status.h"

namespace safex::audit {

inline constexpr uint8_t kEncodingVersion = 1;

std::string EncodeEvent(const EventRow& row);
// The row (hash empty), or InvalidArgument naming what is wrong with the bytes.
Result<EventRow> DecodeEvent(std::string_view bytes);

Sha256Digest GenesisHash(std::string_view log_id);
Sha256Digest ChainHash(const Sha256Digest& prev, std::string_view encoding);

// Lowercase hex <-> digest; nullopt unless exactly 64 lowercase hex digits.
std::optional<Sha256Digest> DigestFromHex(std::string_view hex);

}  // namespace safex::audit
