#include "audit/canonical.h"

#include <optional>

namespace safex::audit {
namespace {

constexpr std::string_view kMagic{"safex-audit-event\0", 18};

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void PutI64(std::string* out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(u >> shift));
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool Take(size_t n, std::string_view* out) {
    if (b_.size() - pos_ < n) return false;
    *out = b_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Byte(uint8_t* v) {
    std::string_view s;
    if (!Take(1, &s)) return false;
    *v = static_cast<uint8_t>(s[0]);
    return true;
  }
  bool BigEndian(size_t n, uint64_t* v) {
    std::string_view s;
    if (!Take(n, &s)) return false;
    *v = 0;
    for (char c : s) *v = (*v << 8) | static_cast<uint8_t>(c);
    return true;
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

// How many columns a row is encoded with: the version 1 set when every later column is NULL
// (event_row.h), all of them otherwise. The count is part of the encoding, so it is never
// ambiguous which set a hash covers.
size_t EncodedColumns(const EventRow& row) {
  for (size_t i = kNumV1EventColumns; i < kNumEventColumns; ++i) {
    if (!std::holds_alternative<std::monostate>(row.values[i])) return kNumEventColumns;
  }
  return kNumV1EventColumns;
}

std::string EncodeEvent(const EventRow& row) {
  std::string out(kMagic);
  const size_t columns = EncodedColumns(row);
  out.push_back(static_cast<char>(kEncodingVersion));
  out.push_back(static_cast<char>((columns >> 8) & 0xff));
  out.push_back(static_cast<char>(columns & 0xff));
  const auto names = EventColumnNames();
  for (size_t i = 0; i < columns; ++i) {
    out.push_back(static_cast<char>(names[i].size()));
    out.append(names[i]);
    const SqlValue& v = row.values[i];
    if (std::holds_alternative<std::monostate>(v)) {
      out.push_back('N');
    } else if (const auto* n = std::get_if<int64_t>(&v)) {
      out.push_back('I');
      PutI64(&out, *n);
    } else {
      const auto& s = std::get<std::string>(v);
      out.push_back('T');
      // Texts beyond 4 GiB cannot reach here: SQLite's own limit is 1 GB per value.
      PutU32(&out, static_cast<uint32_t>(s.size()));
      out.append(s);
    }
  }
  return out;
}

Result<EventRow> DecodeEvent(std::string_view bytes) {
  Reader r(bytes);
  std::string_view magic;
  if (!r.Take(kMagic.size(), &magic) || magic != kMagic) {
    return Status::InvalidArgument("event encoding: bad magic");
  }
  uint8_t version = 0;
  if (!r.Byte(&version) || version != kEncodingVersion) {
    return Status::InvalidArgument("event encoding: unknown version");
  }
  uint64_t count = 0;
  if (!r.BigEndian(2, &count) || (count != kNumEventColumns && count != kNumV1EventColumns)) {
    return Status::InvalidArgument("event encoding: wrong field count");
  }
  EventRow row;
  const auto names = EventColumnNames();
  for (size_t i = 0; i < count; ++i) {
    uint8_t name_len = 0;
    std::string_view name;
    if (!r.Byte(&name_len) || !r.Take(name_len, &name) || name != names[i]) {
      return Status::InvalidArgument("event encoding: field " + std::to_string(i) + " is not " +
                                     std::string(names[i]));
    }
    uint8_t tag = 0;
    if (!r.Byte(&tag)) return Status::InvalidArgument("event encoding: truncated");
    if (tag == 'N') {
      row.values[i] = std::monostate{};
    } else if (tag == 'I') {
      uint64_t u = 0;
      if (!r.BigEndian(8, &u)) return Status::InvalidArgument("event encoding: truncated");
      row.values[i] = static_cast<int64_t>(u);
    } else if (tag == 'T') {
      uint64_t len = 0;
      std::string_view s;
      if (!r.BigEndian(4, &len) || !r.Take(len, &s)) {
        return Status::InvalidArgument("event encoding: truncated");
      }
      row.values[i] = std::string(s);
    } else {
      return Status::InvalidArgument("event encoding: unknown value tag");
    }
  }
  if (!r.AtEnd()) return Status::InvalidArgument("event encoding: trailing bytes");
  // Only NULLs may be left out: a full encoding whose later columns are all NULL is not the
  // canonical encoding of its row.
  if (count == kNumEventColumns && EncodedColumns(row) != kNumEventColumns) {
    return Status::InvalidArgument("event encoding: not canonical (empty version 2 columns)");
  }
  return row;
}

Sha256Digest GenesisHash(std::string_view log_id) {
  Sha256Hasher h;
  h.Update(std::string_view("safex-audit genesis\0", 20));
  h.Update(log_id);
  return h.Finish();
}

Sha256Digest ChainHash(const Sha256Digest& prev, std::string_view encoding) {
  Sha256Hasher h;
  h.Update(std::string_view(reinterpret_cast<const char*>(prev.data()), prev.size()));
  h.Update(encoding);
  return h.Finish();
}

std::optional<Sha256Digest> DigestFromHex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Sha256Digest d{};
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (size_t k = 0; k < 2; ++k) {
      char c = hex[2 * i + k];
      int x;
      if (c >= '0' && c <= '9') {
        x = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        x = c - 'a' + 10;
      } else {
        return std::nullopt;
      }
      v = v * 16 + x;
    }
    d[i] = static_cast<uint8_t>(v);
  }
  return d;
}

}  // namespace safex::audit
