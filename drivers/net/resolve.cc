#include "drivers/net/resolve.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace safex::drivers::net {
namespace {

std::string RuleText(const plan::EgressRule& r) {
  const bool v6 = r.host.find(':') != std::string::npos;
  return (v6 ? "[" + r.host + "]" : r.host) + ":" + std::to_string(r.port) +
         (r.protocol == plan::Protocol::kUdp ? "/udp" : "");
}

}  // namespace

bool IsValidHostName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  bool letter = false;
  size_t label = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !digit && c != '-') return false;
    if (c == '-' && label == 0) return false;
    letter |= alpha;
    if (++label > 63) return false;
  }
  if (name.back() == '-') return false;
  return letter;
}

Resolver SystemResolver() {
  return [](const std::string& host) -> Result<std::vector<plan::IpAddress>> {
    struct addrinfo hints;
    std::memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one answer per address, not one per socket type
    struct addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
      if (rc == EAI_NONAME || rc == EAI_NODATA) {
        return Status::NotFound("cannot resolve \"" + host + "\": " + why);
      }
      return Status::Unavailable("cannot resolve \"" + host + "\": " + why);
    }
    std::vector<plan::IpAddress> out;
    for (struct addrinfo* ai = res; ai; ai = ai->ai_next) {
      plan::IpAddress a;
      if (ai->ai_family == AF_INET) {
        a.family = AF_INET;
        const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
        std::memcpy(a.bytes.data(), &sin->sin_addr, 4);
      } else if (ai->ai_family == AF_INET6) {
        a.family = AF_INET6;
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
        std::memcpy(a.bytes.data(), &sin6->sin6_addr, 16);
      } else {
        continue;
      }
      out.push_back(a);
    }
    ::freeaddrinfo(res);
    return out;
  };
}

Result<std::vector<ResolvedEgress>> ResolveEgress(const std::vector<plan::EgressRule>& egress,
                                                  const plan::Ceilings& ceilings,
                                                  const Resolver& resolver) {
  std::vector<ResolvedEgress> out;
  out.reserve(egress.size());
  for (const plan::EgressRule& rule : egress) {
    const std::string where = "egress \"" + RuleText(rule) + "\"";
    if (rule.port == 0) return Status::InvalidArgument(where + ": port 0 is not a destination");
    ResolvedEgress r;
    r.rule = rule;
    if (auto lit = plan::IpAddress::Parse(rule.host)) {
      r.literal = true;
      r.addresses.push_back(*lit);
    } else {
      if (!IsValidHostName(rule.host)) {
        return Status::InvalidArgument(where + ": \"" + rule.host +
                                       "\" is neither an IP address nor a valid host name");
      }
      auto answers = resolver(rule.host);
      if (!answers.ok()) return answers.status().With(where);
      for (const plan::IpAddress& a : *answers) {
        if (std::find(r.addresses.begin(), r.addresses.end(), a) == r.addresses.end()) {
          r.addresses.push_back(a);
        }
      }
      if (r.addresses.empty()) {
        return Status::NotFound(where + ": \"" + rule.host + "\" resolved to no address");
      }
    }
    for (const plan::IpAddress& a : r.addresses) {
      if (!plan::EgressAllowed(a, ceilings)) {
        const plan::AddressClass c = plan::Classify(a);
        std::string msg = where + ": ";
        msg += r.literal ? "address " : "\"" + rule.host + "\" resolves to ";
        msg += a.ToString() + " (address class: " + plan::AddressClassName(c) + "), ";
        if (c == plan::AddressClass::kPrivate || c == plan::AddressClass::kCgnat) {
          msg += "forbidden unless the operator's ceilings list its range in allowed_egress_ranges";
        } else {
          msg += "which no run may reach";
        }
        msg += "; the run is refused";
        return Status::PermissionDenied(msg);
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace safex::drivers::net
