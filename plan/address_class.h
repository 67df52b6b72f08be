// IP address literals, CIDR ranges and the address classes egress is judged by.
// Used by plan::Verify (literal egress hosts) and by the network code at run time (resolved
// addresses): one classification, so the compiler and the enforcer cannot disagree.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "plan/ceilings.h"

namespace safex::plan {

struct IpAddress {
  int family = 0;                   // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // AF_INET: the first 4 bytes, the rest zero
  // Strict literals only: dotted-quad IPv4 without leading zeros, RFC 4291 IPv6 text (v4-mapped
  // tail allowed). No brackets, no zone ids, no ports, no surrounding whitespace.
  static std::optional<IpAddress> Parse(std::string_view text);
  // IPv4 dotted quad; IPv6 in RFC 5952 form.
  std::string ToString() const;
  bool operator==(const IpAddress& o) const { return family == o.family && bytes == o.bytes; }
};

struct Cidr {
  IpAddress base;  // host bits are zero (Parse refuses "10.0.0.1/8")
  int prefix = 0;
  // "a.b.c.d/n" (0..32) or "v6/n" (0..128); a bare address is a /32 or /128.
  static std::optional<Cidr> Parse(std::string_view text);
  // Same family only, except that an IPv4 range also contains the IPv4-mapped IPv6 (::ffff:a.b.c.d)
  // form of its addresses.
  bool Contains(const IpAddress& addr) const;
  std::string ToString() const;
};

enum class AddressClass {
  kPublic,
  kLoopback,       // 127/8, ::1
  kLinkLocal,      // 169.254/16, fe80::/10
  kMetadata,       // cloud metadata endpoints: 169.254.169.254, 169.254.170.2, 100.100.100.200,
                   // fd00:ec2::254
  kPrivate,        // 10/8, 172.16/12, 192.168/16, fc00::/7 (ULA), fec0::/10, 64:ff9b:1::/48
  kCgnat,          // 100.64/10
  kMulticast,      // 224/4, ff00::/8
  kUnspecified,    // 0/8, ::
  kBroadcast,      // 255.255.255.255
  kBenchmarking,   // 198.18/15, 2001:2::/48 (our tests' own namespaces use 198.18/15)
  kDocumentation,  // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
  kReserved,       // 240/4, 192.0.0/24, IPv6 outside 2000::/3, Teredo, discard-only, ...
};

// IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are
// classified by the IPv4 address they carry (6to4: when that address is not public).
AddressClass Classify(const IpAddress& addr);
const char* AddressClassName(AddressClass c);

// May a sandbox connect to `addr`? Public, benchmarking and documentation addresses: yes.
// Private and CGNAT: only inside one of ceilings.allowed_egress_ranges. Loopback, link-local,
// metadata, multicast, unspecified, broadcast and reserved: never, whatever the ranges say.
bool EgressAllowed(const IpAddress& addr, const Ceilings& ceilings);

}  // namespace safex::plan
