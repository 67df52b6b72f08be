#include "drivers/microvm/wire.h"

#include <cstring>

namespace safex::microvm {
namespace {

void PutU32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

void AppendFrame(FrameType type, std::string_view payload, std::string* out) {
  char header[kFrameHeaderSize];
  PutU32(static_cast<uint32_t>(type), header);
  PutU32(static_cast<uint32_t>(payload.size()), header + 4);
  out->append(header, sizeof header);
  out->append(payload);
}

std::string EncodeFrame(FrameType type, std::string_view payload) {
  std::string out;
  out.reserve(kFrameHeaderSize + payload.size());
  AppendFrame(type, payload, &out);
  return out;
}

std::optional<Frame> FrameReader::Next() {
  if (failed()) return std::nullopt;
  // Compact once the consumed prefix dominates, so the buffer stays about one frame long.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  if (buf_.size() - pos_ < kFrameHeaderSize) return std::nullopt;
  const char* h = buf_.data() + pos_;
  uint32_t type = GetU32(h);
  uint32_t len = GetU32(h + 4);
  if (len > max_payload_) {
    error_ = "frame of type " + std::to_string(type) + " announces " + std::to_string(len) +
             " bytes (limit " + std::to_string(max_payload_) + ")";
    return std::nullopt;
  }
  if (buf_.size() - pos_ - kFrameHeaderSize < len) return std::nullopt;
  Frame f{static_cast<FrameType>(type), buf_.substr(pos_ + kFrameHeaderSize, len)};
  pos_ += kFrameHeaderSize + len;
  return f;
}

void Encoder::U32(uint32_t v) {
  char b[4];
  PutU32(v, b);
  out_.append(b, 4);
}

void Encoder::U64(uint64_t v) {
  U32(static_cast<uint32_t>(v & 0xffffffffu));
  U32(static_cast<uint32_t>(v >> 32));
}

void Encoder::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_.append(s);
}

void Encoder::StrList(const std::vector<std::string>& v) {
  U32(static_cast<uint32_t>(v.size()));
  for (const std::string& s : v) Str(s);
}

bool Decoder::Need(size_t n) {
  if (!ok_ || in_.size() - pos_ < n) {
    ok_ = false;
    return false;
  }
  return true;
}

bool Decoder::U8(uint8_t* v) {
  if (!Need(1)) return false;
  *v = static_cast<uint8_t>(in_[pos_++]);
  return true;
}

bool Decoder::U32(uint32_t* v) {
  if (!Need(4)) return false;
  *v = GetU32(in_.data() + pos_);
  pos_ += 4;
  return true;
}

bool Decoder::U64(uint64_t* v) {
  uint32_t lo = 0, hi = 0;
  if (!U32(&lo) || !U32(&hi)) return false;
  *v = (static_cast<uint64_t>(hi) << 32) | lo;
  return true;
}

bool Decoder::I32(int32_t* v) {
  uint32_t u = 0;
  if (!U32(&u)) return false;
  *v = static_cast<int32_t>(u);
  return true;
}

bool Decoder::Str(std::string* s) {
  uint32_t len = 0;
  if (!U32(&len)) return false;
  if (len > max_string_ || !Need(len)) {
    ok_ = false;
    return false;
  }
  s->assign(in_.data() + pos_, len);
  pos_ += len;
  return true;
}

bool Decoder::StrList(std::vector<std::string>* v, size_t max_items) {
  uint32_t n = 0;
  if (!U32(&n)) return false;
  // Each item needs at least its 4-byte length: a count the input cannot hold is refused before
  // anything is reserved.
  if (n > max_items || n > (in_.size() - pos_) / 4) {
    ok_ = false;
    return false;
  }
  v->clear();
  v->reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::string s;
    if (!Str(&s)) return false;
    v->push_back(std::move(s));
  }
  return true;
}

}  // namespace safex::microvm
