#include "supervisor/serve/access.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace safex::serve {
namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Result<uint32_t> ResolveUser(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* out = nullptr;
  int e = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &out);
  if (e != 0) return Status::Errno("getpwnam_r", name, e);
  if (out == nullptr) return Status::NotFound("no user named '" + name + "'");
  return static_cast<uint32_t>(out->pw_uid);
}

}  // namespace

Result<uint32_t> ResolveGroup(const std::string& name) {
  if (AllDigits(name)) {
    uint64_t v = std::stoull(name);
    if (v > 0xfffffffeull) return Status::InvalidArgument("gid out of range: " + name);
    return static_cast<uint32_t>(v);
  }
  std::vector<char> buf(16384);
  group gr{};
  group* out = nullptr;
  int e = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &out);
  if (e != 0) return Status::Errno("getgrnam_r", name, e);
  if (out == nullptr) return Status::NotFound("no group named '" + name + "'");
  return static_cast<uint32_t>(out->gr_gid);
}

Result<AccessControl> AccessControl::Create(const std::vector<compiler::AllowRule>& rules) {
  AccessControl ac;
  for (const compiler::AllowRule& r : rules) {
    Rule rule;
    rule.policy = r.policy;
    for (const compiler::Principal& p : r.users) {
      if (p.id) {
        rule.uids.insert(*p.id);
        continue;
      }
      auto uid = ResolveUser(p.name);
      if (!uid.ok()) return uid.status().With("allow \"" + r.policy + "\"");
      rule.uids.insert(*uid);
    }
    for (const compiler::Principal& p : r.groups) {
      if (p.id) {
        rule.gids.insert(*p.id);
        continue;
      }
      auto gid = ResolveGroup(p.name);
      if (!gid.ok()) return gid.status().With("allow \"" + r.policy + "\"");
      rule.gids.insert(*gid);
    }
    for (const compiler::Principal& p : r.auditors) {
      if (p.id) {
        rule.auditors.insert(*p.id);
        continue;
      }
      auto uid = ResolveUser(p.name);
      if (!uid.ok()) return uid.status().With("allow \"" + r.policy + "\" auditors");
      rule.auditors.insert(*uid);
    }
    ac.rules_.push_back(std::move(rule));
  }
  return ac;
}

namespace {

bool RuleNames(const std::set<uint32_t>& uids, const std::set<uint32_t>& gids,
               const Caller& caller) {
  if (uids.count(caller.uid) > 0 || gids.count(caller.gid) > 0) return true;
  for (uint32_t g : caller.groups) {
    if (gids.count(g) > 0) return true;
  }
  return false;
}

}  // namespace

bool AccessControl::Allowed(const Caller& caller, const std::string& policy) const {
  for (const Rule& r : rules_) {
    if (r.policy != "*" && r.policy != policy) continue;
    if (RuleNames(r.uids, r.gids, caller)) return true;
  }
  return false;
}

bool AccessControl::Audits(const Caller& caller, const std::string& policy) const {
  for (const Rule& r : rules_) {
    if (r.policy != "*" && r.policy != policy) continue;
    if (r.auditors.count(caller.uid) > 0) return true;
  }
  return false;
}

bool AccessControl::Named(const Caller& caller) const {
  for (const Rule& r : rules_) {
    if (RuleNames(r.uids, r.gids, caller) || r.auditors.count(caller.uid) > 0) return true;
  }
  return false;
}

}  // namespace safex::serve
