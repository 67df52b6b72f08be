#include "plan/address_class.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>

namespace safex::plan {
namespace {

bool HasOnly(std::string_view s, std::string_view allowed) {
  return s.find_first_not_of(allowed) == std::string_view::npos;
}

// Embedded IPv4 address of a v6 address, when it is v4-mapped or NAT64 well-known prefix.
std::optional<IpAddress> EmbeddedV4(const IpAddress& a) {
  if (a.family != AF_INET6) return std::nullopt;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(a.bytes.data(), kMapped, 12) == 0 ||
      std::memcmp(a.bytes.data(), kNat64, 12) == 0) {
    IpAddress v4;
    v4.family = AF_INET;
    std::memcpy(v4.bytes.data(), a.bytes.data() + 12, 4);
    return v4;
  }
  return std::nullopt;
}

bool PrefixMatch(const uint8_t* a, const uint8_t* b, int prefix) {
  int full = prefix / 8;
  if (std::memcmp(a, b, full) != 0) return false;
  int rem = prefix % 8;
  if (rem == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rem));
  return (a[full] & mask) == (b[full] & mask);
}

struct Range4 {
  uint8_t b[4];
  int prefix;
  AddressClass cls;
};

AddressClass ClassifyV4(const uint8_t* b) {
  // Order matters: the most specific ranges come first.
  static constexpr Range4 kRanges[] = {
      {{169, 254, 169, 254}, 32, AddressClass::kMetadata},
      {{169, 254, 170, 2}, 32, AddressClass::kMetadata},    // AWS ECS task metadata
      {{100, 100, 100, 200}, 32, AddressClass::kMetadata},  // Alibaba Cloud
      {{255, 255, 255, 255}, 32, AddressClass::kBroadcast},
      {{0, 0, 0, 0}, 8, AddressClass::kUnspecified},
      {{127, 0, 0, 0}, 8, AddressClass::kLoopback},
      {{169, 254, 0, 0}, 16, AddressClass::kLinkLocal},
      {{10, 0, 0, 0}, 8, AddressClass::kPrivate},
      {{172, 16, 0, 0}, 12, AddressClass::kPrivate},
      {{192, 168, 0, 0}, 16, AddressClass::kPrivate},
      {{100, 64, 0, 0}, 10, AddressClass::kCgnat},
      {{224, 0, 0, 0}, 4, AddressClass::kMulticast},
      {{198, 18, 0, 0}, 15, AddressClass::kBenchmarking},
      {{192, 0, 2, 0}, 24, AddressClass::kDocumentation},
      {{198, 51, 100, 0}, 24, AddressClass::kDocumentation},
      {{203, 0, 113, 0}, 24, AddressClass::kDocumentation},
      {{192, 0, 0, 0}, 24, AddressClass::kReserved},    // IETF protocol assignments
      {{192, 88, 99, 0}, 24, AddressClass::kReserved},  // deprecated 6to4 relay anycast
      {{240, 0, 0, 0}, 4, AddressClass::kReserved},
  };
  for (const auto& r : kRanges) {
    if (PrefixMatch(b, r.b, r.prefix)) return r.cls;
  }
  return AddressClass::kPublic;
}

AddressClass ClassifyV6(const IpAddress& a) {
  if (auto v4 = EmbeddedV4(a)) return ClassifyV4(v4->bytes.data());
  const uint8_t* b = a.bytes.data();
  static constexpr uint8_t kMetadata[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0,    0,
                                            0,    0,    0,    0,    0, 0, 0x02, 0x54};
  static constexpr uint8_t kZero[16] = {};
  static constexpr uint8_t kLoop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (std::memcmp(b, kMetadata, 16) == 0) return AddressClass::kMetadata;
  if (std::memcmp(b, kZero, 16) == 0) return AddressClass::kUnspecified;
  if (std::memcmp(b, kLoop, 16) == 0) return AddressClass::kLoopback;
  if (b[0] == 0xff) return AddressClass::kMulticast;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return AddressClass::kPrivate;  // site-local
  if ((b[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;                  // ULA
  static constexpr uint8_t kNat64Local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
  if (PrefixMatch(b, kNat64Local, 48)) return AddressClass::kPrivate;
  static constexpr uint8_t kBench[6] = {0x20, 0x01, 0x00, 0x02, 0, 0};
  if (PrefixMatch(b, kBench, 48)) return AddressClass::kBenchmarking;
  static constexpr uint8_t kDoc[4] = {0x20, 0x01, 0x0d, 0xb8};
  if (PrefixMatch(b, kDoc, 32)) return AddressClass::kDocumentation;
  static constexpr uint8_t kDoc2[16] = {0x3f, 0xff};
  if (PrefixMatch(b, kDoc2, 20)) return AddressClass::kDocumentation;
  static constexpr uint8_t kTeredo[4] = {0x20, 0x01, 0, 0};
  if (PrefixMatch(b, kTeredo, 32)) return AddressClass::kReserved;
  static constexpr uint8_t kOrchid[16] = {0x20, 0x01, 0x00, 0x10};
  if (PrefixMatch(b, kOrchid, 28)) return AddressClass::kReserved;
  static constexpr uint8_t kIetf[16] = {0x20, 0x01};
  if (PrefixMatch(b, kIetf, 23)) return AddressClass::kReserved;  // 2001::/23 special purpose
  if (b[0] == 0x20 && b[1] == 0x02) {
    // 6to4 carries an IPv4 address in bytes 2..5: judge by it when it is not public.
    AddressClass inner = ClassifyV4(b + 2);
    return inner == AddressClass::kPublic ? AddressClass::kPublic : inner;
  }
  if ((b[0] & 0xe0) == 0x20) return AddressClass::kPublic;  // 2000::/3 global unicast
  return AddressClass::kReserved;  // ::/96 compat, 100::/64 discard, unassigned space
}

}  // namespace

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  if (text.empty() || text.size() > 45) return std::nullopt;
  std::string s(text);
  if (s.find('\0') != std::string::npos) return std::nullopt;
  IpAddress a;
  if (HasOnly(text, "0123456789.")) {
    a.family = AF_INET;
    if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) != 1) return std::nullopt;
    return a;
  }
  if (!HasOnly(text, "0123456789abcdefABCDEF:.")) return std::nullopt;
  a.family = AF_INET6;
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) != 1) return std::nullopt;
  return a;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET) {
    if (inet_ntop(AF_INET, bytes.data(), buf, sizeof buf) == nullptr) return "";
  } else if (family == AF_INET6) {
    if (inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf) == nullptr) return "";
  } else {
    return "";
  }
  return buf;
}

std::optional<Cidr> Cidr::Parse(std::string_view text) {
  Cidr c;
  size_t slash = text.find('/');
  auto addr = IpAddress::Parse(text.substr(0, slash));
  if (!addr) return std::nullopt;
  c.base = *addr;
  int max = addr->family == AF_INET ? 32 : 128;
  if (slash == std::string_view::npos) {
    c.prefix = max;
    return c;
  }
  std::string_view p = text.substr(slash + 1);
  if (p.empty() || p.size() > 3 || !HasOnly(p, "0123456789")) return std::nullopt;
  if (p.size() > 1 && p[0] == '0') return std::nullopt;
  int n = 0;
  for (char ch : p) n = n * 10 + (ch - '0');
  if (n > max) return std::nullopt;
  c.prefix = n;
  // Host bits must be zero: "10.0.0.1/8" is almost always a typo for something narrower.
  for (int bit = n; bit < max; ++bit) {
    if (c.base.bytes[bit / 8] & (0x80 >> (bit % 8))) return std::nullopt;
  }
  return c;
}

bool Cidr::Contains(const IpAddress& addr) const {
  if (addr.family == base.family) {
    return PrefixMatch(addr.bytes.data(), base.bytes.data(), prefix);
  }
  if (base.family == AF_INET && addr.family == AF_INET6) {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(addr.bytes.data(), kMapped, 12) != 0) return false;
    return PrefixMatch(addr.bytes.data() + 12, base.bytes.data(), prefix);
  }
  return false;
}

std::string Cidr::ToString() const { return base.ToString() + "/" + std::to_string(prefix); }

AddressClass Classify(const IpAddress& addr) {
  if (addr.family == AF_INET) return ClassifyV4(addr.bytes.data());
  if (addr.family == AF_INET6) return ClassifyV6(addr);
  return AddressClass::kReserved;
}

const char* AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kMetadata:
      return "metadata";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kCgnat:
      return "cgnat";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kBroadcast:
      return "broadcast";
    case AddressClass::kBenchmarking:
      return "benchmarking";
    case AddressClass::kDocumentation:
      return "documentation";
    case AddressClass::kReserved:
      return "reserved";
  }
  return "unknown";
}

bool EgressAllowed(const IpAddress& addr, const Ceilings& ceilings) {
  switch (Classify(addr)) {
    case AddressClass::kPublic:
    case AddressClass::kBenchmarking:
    case AddressClass::kDocumentation:
      return true;
    case AddressClass::kPrivate:
    case AddressClass::kCgnat:
      for (const auto& r : ceilings.allowed_egress_ranges) {
        auto cidr = Cidr::Parse(r);
        if (cidr && cidr->Contains(addr)) return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace safex::plan
