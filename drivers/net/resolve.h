// Name resolution for egress: every granted host is resolved once, when the run starts, by the
// supervisor (never by the sandbox, which has no DNS server it can reach); every answer is judged
// by plan::EgressAllowed, and one forbidden answer refuses the whole run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "plan/address_class.h"
#include "plan/ceilings.h"
#include "plan/plan.h"

namespace safex::drivers::net {

// One egress rule of the plan with the addresses its host stands for.
struct ResolvedEgress {
  plan::EgressRule rule;
  std::vector<plan::IpAddress> addresses;  // every answer, deduplicated, in resolver order
  bool literal = false;                    // rule.host was an address literal (not resolved)
};

// Looks a host name up; returns every address (IPv4 and IPv6). NotFound for a name that does not
// exist. Injectable so that tests do not depend on a DNS server.
using Resolver = std::function<Result<std::vector<plan::IpAddress>>(const std::string& host)>;

// getaddrinfo(3) with AF_UNSPEC: the host's own resolver configuration (/etc/hosts, DNS).
Resolver SystemResolver();

// Resolves the plan's egress rules. Literal addresses are used as written. Refuses
// (PermissionDenied) when any address of any rule is not allowed by plan::EgressAllowed under
// `ceilings`, naming the rule, the address and its class; refuses (InvalidArgument) a host that
// is not a valid DNS name or literal, and (NotFound/Unavailable) a name that does not resolve.
Result<std::vector<ResolvedEgress>> ResolveEgress(const std::vector<plan::EgressRule>& egress,
                                                  const plan::Ceilings& ceilings,
                                                  const Resolver& resolver);

// True for a syntactically valid DNS host name (labels of [A-Za-z0-9-], no leading/trailing '-',
// 1..63 each, 253 total, at least one letter somewhere so it cannot pass for an address).
bool IsValidHostName(const std::string& name);

}  // namespace safex::drivers::net
