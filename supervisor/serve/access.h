// Who may use which policy through the daemon: the operator's `allow` rules (host config,
// service section) against the caller's credentials from SO_PEERCRED / SO_PEERGROUPS.
// Nothing is allowed unless a rule names the caller's uid, or one of its gids (primary or
// supplementary, as the kernel reported them when it connected), for that policy or for "*".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/host_config.h"

namespace safex::serve {

// The peer of one connection, as the kernel reported it.
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
  std::vector<uint32_t> groups;  // supplementary groups (SO_PEERGROUPS); may be empty
};

class AccessControl {
 public:
  // Resolves user and group names (getpwnam_r/getgrnam_r) once, now. An unknown name is an error:
  // a rule that silently matches nobody would hide a typo.
  static Result<AccessControl> Create(const std::vector<compiler::AllowRule>& rules);

  bool Allowed(const Caller& caller, const std::string& policy) const;
  // Whether a rule for `policy` (or "*") names the caller's uid in `auditors`: it may see,
  // follow and fetch the files of other callers' runs of that policy (docs/api.md).
  bool Audits(const Caller& caller, const std::string& policy) const;
  // Whether any rule names the caller (its uid or one of its gids), for any policy. Callers named
  // by no rule can never run anything: the service refuses them after the request head, without
  // reading a body, and holds only a small share of its connections for them.
  bool Named(const Caller& caller) const;
  size_t rule_count() const { return rules_.size(); }

 private:
  struct Rule {
    std::string policy;  // or "*"
    std::set<uint32_t> uids;
    std::set<uint32_t> gids;
    std::set<uint32_t> auditors;  // uids
  };
  std::vector<Rule> rules_;
};

// Looks a group up by name or decimal id. NotFound when there is no such group.
Result<uint32_t> ResolveGroup(const std::string& name_or_id);

}  // namespace safex::serve
