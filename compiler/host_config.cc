#include "compiler/host_config.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "compiler/compiler.h"
#include "compiler/host_config_oci.h"
#include "compiler/lower.h"
#include "compiler/values.h"
#include "dsl/parser.h"
#include "plan/address_class.h"
#include "plan/plan_json.h"
#include "plan/verify.h"

namespace safex::compiler {
namespace {

using dsl::Statement;

void Ceilings(const Statement& s, Diags& d, plan::Ceilings& c) {
  if (!ExpectBlock(s, d, "ceilings")) return;
  std::set<std::string> seen;
  for (const Statement& x : s.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    static const std::vector<std::string_view> kKeys = {"wall_time",  "cpu_time", "memory", "pids",
                                                        "open_files", "output",   "disk",   "cpus"};
    bool known = false;
    for (auto k : kKeys) known |= kw == k;
    if (!known) {
      std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", x.head[0].span, "unknown ceiling `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", x.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(x, d, kw)) continue;
    std::optional<uint64_t> v;
    if (kw == "wall_time" || kw == "cpu_time")
      v = ReadDuration(x.assigned, d, kw);
    else if (kw == "memory" || kw == "output" || kw == "disk")
      v = ReadSize(x.assigned, d, kw);
    else
      v = ReadInteger(x.assigned, d, kw, 1, kw == "cpus" ? 1024 : (1u << 22));
    if (!v) continue;
    if (*v == 0) {
      d.Error("E023", x.assigned.span, "a ceiling must be greater than zero");
      continue;
    }
    if (kw == "wall_time")
      c.max.wall_time_ns = *v;
    else if (kw == "cpu_time")
      c.max.cpu_time_ns = *v;
    else if (kw == "memory")
      c.max.memory_bytes = *v;
    else if (kw == "pids")
      c.max.pids = *v;
    else if (kw == "open_files")
      c.max.open_files = *v;
    else if (kw == "output")
      c.max.output_bytes = *v;
    else if (kw == "disk")
      c.max.disk_bytes = *v;
    else
      c.max.cpus = static_cast<uint32_t>(*v);
  }
}

// The settings of a block (`what` names it in messages): each statement is `key = value`, with a
// key of `keys`, at most once; `fn` reads the value of each. Unknown and repeated keys are
// errors (E020 with a did-you-mean, E025), as everywhere in the language.
void ForEachSetting(const Statement& block, Diags& d, const std::string& what,
                    const std::vector<std::string_view>& keys,
                    const std::function<void(const std::string& key, const dsl::Value& v)>& fn) {
  std::set<std::string> seen;
  for (const Statement& x : block.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    if (std::find(keys.begin(), keys.end(), kw) == keys.end()) {
      std::string near = dsl::ClosestMatch(kw, keys);
      d.Error("E020", x.head[0].span, "unknown " + what + " setting `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", x.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(x, d, kw)) continue;
    fn(kw, x.assigned);
  }
}

std::optional<std::string> ReadAbsolutePath(const dsl::Value& v, Diags& d, const std::string& kw) {
  auto text = ReadString(v, d, kw);
  if (!text) return std::nullopt;
  if (!plan::IsNormalAbsolutePath(*text) || *text == "/") {
    d.Error("E092", v.span, "\"" + *text + "\" is not an absolute, normalised path below /");
    return std::nullopt;
  }
  return text;
}

// `platforms = [systrap, ptrace]`: the gVisor platforms offered; at least one, each once.
void GvisorPlatforms(const dsl::Value& v, Diags& d, plan::GvisorBackendSettings& g) {
  const auto* items = ReadList(v, d, "platforms");
  if (!items) return;
  std::set<std::string> out;
  for (const auto& item : *items) {
    auto p = ReadChoice(item, d, "gvisor platform", {"systrap", "ptrace"});
    if (p && !out.insert(*p).second)
      d.Error("E025", item.span, "platform `" + *p + "` is listed twice");
  }
  if (out.empty() && d.errors() == 0) {
    d.Error("E023", v.span, "at least one gvisor platform must be offered");
    return;
  }
  g.platforms = out;
}

// `backends { gvisor { ... } microvm { ... } native { } }`: the backends offered, with settings.
void BackendBlocks(const Statement& s, Diags& d, plan::Ceilings& c, plan::BackendSettings& b) {
  std::set<plan::Backend> out;
  for (const Statement& x : s.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    auto backend = plan::BackendFromName(kw);
    if (!backend) {
      std::string near = dsl::ClosestMatch(kw, {"gvisor", "microvm", "native"});
      d.Error("E020", x.head[0].span, "unknown backend `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (!out.insert(*backend).second) {
      d.Error("E025", x.head[0].span, "backend `" + kw + "` is configured twice");
      continue;
    }
    if (!ExpectBlock(x, d, kw)) continue;
    if (*backend == plan::Backend::kGvisor) {
      ForEachSetting(x, d, "gvisor", {"runsc", "platforms"},
                     [&](const std::string& k, const dsl::Value& v) {
                       if (k == "platforms") return GvisorPlatforms(v, d, b.gvisor);
                       if (auto p = ReadAbsolutePath(v, d, k)) b.gvisor.runsc = *p;
                     });
    } else if (*backend == plan::Backend::kMicrovm) {
      plan::MicrovmBackendSettings& m = b.microvm;
      ForEachSetting(x, d, "microvm",
                     {"qemu", "kernel", "initramfs", "state_root", "kvm", "tcg_for_untrusted"},
                     [&](const std::string& k, const dsl::Value& v) {
                       if (k == "kvm") {
                         auto mode = ReadChoice(v, d, "kvm", {"auto", "require", "never"});
                         if (mode) {
                           m.kvm = *mode == "auto"      ? plan::KvmMode::kAuto
                                   : *mode == "require" ? plan::KvmMode::kRequire
                                                        : plan::KvmMode::kNever;
                         }
                       } else if (k == "tcg_for_untrusted") {
                         if (auto on = ReadBool(v, d, k)) m.tcg_for_untrusted = *on;
                       } else if (auto p = ReadAbsolutePath(v, d, k)) {
                         (k == "qemu"        ? m.qemu
                          : k == "kernel"    ? m.kernel
                          : k == "initramfs" ? m.initramfs
                                             : m.state_root) = *p;
                       }
                     });
    } else {
      plan::NativeBackendSettings& n = b.native;
      ForEachSetting(x, d, "native", {"first_id", "ids", "landlock"},
                     [&](const std::string& k, const dsl::Value& v) {
                       if (k == "landlock") {
                         auto mode = ReadChoice(v, d, "landlock", {"auto", "require"});
                         if (mode) n.require_landlock = *mode == "require";
                       } else if (k == "first_id") {
                         // Above the system and regular accounts; the range stays below 2^31.
                         if (auto f = ReadInteger(v, d, k, 65536, 0x7fff0000)) {
                           n.first_id = static_cast<uint32_t>(*f);
                         }
                       } else if (auto c = ReadInteger(v, d, k, 1, 1u << 20)) {
                         n.ids = static_cast<uint32_t>(*c);
                       }
                     });
      if (static_cast<uint64_t>(n.first_id) + n.ids > 0x7fffffffull) {
        d.Error("E094", x.span, "native ids: first_id + ids must stay below 2147483647");
      }
    }
  }
  if (out.empty() && d.errors() == 0) {
    d.Error("E023", s.block_span, "at least one backend must be configured");
    return;
  }
  c.allowed_backends = out;
}

// `cgroups { parent = "safex"  memory = 16GiB  pids = 8192  cpus = 2 }`: the delegated cgroup.
void Cgroups(const Statement& s, Diags& d, plan::CgroupSettings& c) {
  if (!ExpectBlock(s, d, "cgroups")) return;
  ForEachSetting(
      s, d, "cgroups", {"parent", "memory", "pids", "cpus"},
      [&](const std::string& k, const dsl::Value& v) {
        if (k == "parent") {
          auto text = ReadString(v, d, k);
          if (!text) return;
          // Relative, normalised, below each hierarchy's root: "safex", "a/b".
          if (text->empty() || (*text)[0] == '/' || !plan::IsNormalAbsolutePath("/" + *text)) {
            d.Error("E092", v.span,
                    "cgroup parent \"" + *text +
                        "\" must be a relative, normalised path such as \"safex\"");
            return;
          }
          c.parent = *text;
        } else if (k == "memory") {
          if (auto n = ReadSize(v, d, k)) c.memory_bytes = *n;
        } else if (auto n = ReadInteger(v, d, k, 1, k == "cpus" ? 4096 : (1u << 22))) {
          if (k == "pids") {
            c.pids = *n;
          } else {
            c.cpus = static_cast<uint32_t>(*n);
          }
        }
      });
}

void Backends(const Statement& s, Diags& d, plan::Ceilings& c, plan::BackendSettings& b) {
  if (s.has_block) return BackendBlocks(s, d, c, b);
  if (!ExpectAssignment(s, d, "backends")) return;
  const auto* items = ReadList(s.assigned, d, "backends");
  if (!items) return;
  std::set<plan::Backend> out;
  for (const auto& item : *items) {
    auto b = ReadChoice(item, d, "backend", {"gvisor", "microvm", "native"});
    if (b) out.insert(*plan::BackendFromName(*b));
  }
  if (out.empty() && d.errors() == 0) {
    d.Error("E023", s.assigned.span, "at least one backend must be allowed");
    return;
  }
  c.allowed_backends = out;
}

void EgressRanges(const Statement& s, Diags& d, plan::Ceilings& c) {
  if (!ExpectAssignment(s, d, "allow_egress_ranges")) return;
  const auto* items = ReadList(s.assigned, d, "allow_egress_ranges");
  if (!items) return;
  for (const auto& item : *items) {
    auto text = ReadString(item, d, "an egress range");
    if (!text) continue;
    auto cidr = plan::Cidr::Parse(*text);
    if (!cidr) {
      d.Error("E091", item.span, "invalid address range \"" + *text + "\"",
              "write a CIDR range with zero host bits, e.g. \"10.20.0.0/16\"");
      continue;
    }
    // Ranges admit private and CGNAT destinations only; say so when one cannot do anything else.
    auto cls = plan::Classify(cidr->base);
    if (cls == plan::AddressClass::kLoopback || cls == plan::AddressClass::kLinkLocal ||
        cls == plan::AddressClass::kMetadata) {
      d.Error("E091", item.span,
              std::string("\"") + *text + "\" is a " + plan::AddressClassName(cls) +
                  " range; loopback, link-local and metadata addresses are never reachable");
      continue;
    }
    c.allowed_egress_ranges.push_back(cidr->ToString());
  }
}

void ForbidMounts(const Statement& s, Diags& d, plan::Ceilings& c) {
  if (!ExpectAssignment(s, d, "forbid_mounts")) return;
  const auto* items = ReadList(s.assigned, d, "forbid_mounts");
  if (!items) return;
  for (const auto& item : *items) {
    auto text = ReadString(item, d, "a host path");
    if (!text) continue;
    if (!plan::IsNormalAbsolutePath(*text) || *text == "/") {
      d.Error("E092", item.span, "\"" + *text + "\" is not an absolute, normalised path below /");
      continue;
    }
    c.forbidden_mount_sources.push_back(*text);
  }
}

void Network(const Statement& s, Diags& d, NetworkSettings& n) {
  if (!ExpectBlock(s, d, "network")) return;
  std::set<std::string> seen;
  for (const Statement& x : s.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    static const std::vector<std::string_view> kKeys = {"pool", "uplink", "manage_ip_forward",
                                                        "lease_dir"};
    bool known = false;
    for (auto k : kKeys) known |= kw == k;
    if (!known) {
      std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", x.head[0].span, "unknown network setting `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", x.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(x, d, kw)) continue;
    if (kw == "manage_ip_forward") {
      if (auto b = ReadBool(x.assigned, d, kw)) n.manage_ip_forward = *b;
      continue;
    }
    auto text = ReadString(x.assigned, d, kw);
    if (!text) continue;
    if (kw == "pool") {
      auto cidr = plan::Cidr::Parse(*text);
      if (!cidr || cidr->base.family != AF_INET || cidr->prefix < 8 || cidr->prefix > 30) {
        d.Error("E091", x.assigned.span, "invalid address pool \"" + *text + "\"",
                "write an IPv4 CIDR range between /8 and /30, e.g. \"198.18.128.0/17\"");
        continue;
      }
      n.pool = cidr->ToString();
    } else if (kw == "lease_dir") {
      if (!plan::IsNormalAbsolutePath(*text)) {
        d.Error("E092", x.assigned.span, "\"" + *text + "\" is not an absolute, normalised path",
                "name the host-wide directory of address leases, e.g. \"/run/safex/net\"");
        continue;
      }
      n.lease_dir = *text;
    } else if (!text->empty() && !plan::IsNormalAbsolutePath(*text)) {
      d.Error("E092", x.assigned.span, "\"" + *text + "\" is not an absolute, normalised path",
              "name a network namespace file such as \"/run/netns/uplink\", or \"\" for the host");
    } else {
      n.uplink_netns = *text;
    }
  }
}

bool ValidServicePolicyName(const std::string& name) {
  if (name == "*") return true;
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// users = ["alice", 1001]: names resolved by the daemon at start, numbers taken as ids.
void Principals(const Statement& x, Diags& d, const std::string& kw, std::vector<Principal>& out) {
  if (!ExpectAssignment(x, d, kw)) return;
  const auto* items = ReadList(x.assigned, d, kw);
  if (!items) return;
  for (const auto& item : *items) {
    Principal p;
    if (item.kind == dsl::ValueKind::kInteger) {
      if (item.number > 0xfffffffeull) {
        d.Error("E023", item.span, "an id must be below 4294967295");
        continue;
      }
      p.id = static_cast<uint32_t>(item.number);
    } else {
      auto name = ReadString(item, d, kw == "users" ? "a user name or uid" : "a group name or gid");
      if (!name) continue;
      if (name->empty() || name->size() > 64 ||
          name->find_first_of(":/\n\t ") != std::string::npos) {
        d.Error("E023", item.span,
                "\"" + *name + "\" is not a valid " + (kw == "users" ? "user" : "group") + " name");
        continue;
      }
      p.name = *name;
    }
    out.push_back(std::move(p));
  }
}

void Allow(const Statement& x, Diags& d, ServiceSettings& svc) {
  if (x.head.size() != 2 || x.head[1].kind != dsl::ValueKind::kString || x.has_assignment ||
      !x.has_block) {
    d.Error(
        "E027", x.span, "`allow` names a policy and holds a block",
        "write `allow \"policy-name\" { users = [...]  groups = [...] }` (\"*\" = every policy)");
    return;
  }
  AllowRule rule;
  rule.policy = x.head[1].text;
  if (!ValidServicePolicyName(rule.policy)) {
    d.Error("E023", x.head[1].span, "\"" + rule.policy + "\" is not a policy name",
            "policy names are [a-z0-9-]+ (the file <policy_dir>/<name>.policy), or \"*\"");
    return;
  }
  std::set<std::string> seen;
  for (const Statement& y : x.block) {
    std::string kw = Keyword(y, d);
    if (kw.empty()) continue;
    if (kw != "users" && kw != "groups" && kw != "auditors") {
      std::string near = dsl::ClosestMatch(kw, {"users", "groups", "auditors"});
      d.Error("E020", y.head[0].span, "unknown allow setting `" + kw + "`",
              near.empty() ? "expected `users`, `groups` or `auditors`"
                           : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", y.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    Principals(y, d, kw, kw == "users" ? rule.users : kw == "groups" ? rule.groups : rule.auditors);
  }
  if (rule.users.empty() && rule.groups.empty() && rule.auditors.empty() && d.errors() == 0) {
    d.Error("E023", x.span, "this `allow` rule names no user or group",
            "write `users = [...]`, `groups = [...]` or `auditors = [...]` inside it");
  }
  svc.allow.push_back(std::move(rule));
}

// pool "policy" { size = 4  max_idle = 10m }
void Pool(const Statement& x, Diags& d, ServiceSettings& svc) {
  if (x.head.size() != 2 || x.head[1].kind != dsl::ValueKind::kString || x.has_assignment ||
      !x.has_block) {
    d.Error("E027", x.span, "`pool` names a policy and holds a block",
            "write `pool \"policy-name\" { size = 4  max_idle = 10m }`");
    return;
  }
  PoolRule rule;
  rule.policy = x.head[1].text;
  if (rule.policy == "*" || !ValidServicePolicyName(rule.policy)) {
    d.Error("E023", x.head[1].span, "\"" + rule.policy + "\" is not a policy name",
            "a pool is for one policy: [a-z0-9-]+ (the file <policy_dir>/<name>.policy)");
    return;
  }
  for (const PoolRule& other : svc.pools) {
    if (other.policy == rule.policy) {
      d.Error("E025", x.head[1].span, "policy \"" + rule.policy + "\" has two pools");
      return;
    }
  }
  std::set<std::string> seen;
  for (const Statement& y : x.block) {
    std::string kw = Keyword(y, d);
    if (kw.empty()) continue;
    if (kw != "size" && kw != "max_idle") {
      std::string near = dsl::ClosestMatch(kw, {"size", "max_idle"});
      d.Error("E020", y.head[0].span, "unknown pool setting `" + kw + "`",
              near.empty() ? "expected `size` or `max_idle`" : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", y.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(y, d, kw)) continue;
    if (kw == "size") {
      auto n = ReadInteger(y.assigned, d, kw, 1, 64);
      if (n) rule.size = static_cast<uint32_t>(*n);
    } else if (auto t = ReadDuration(y.assigned, d, kw)) {
      if (*t < 1'000'000'000ull || *t > 86400'000'000'000ull) {
        d.Error("E023", y.assigned.span, "`max_idle` must be between 1s and 24h");
        continue;
      }
      rule.max_idle_ns = *t;
    }
  }
  if (rule.size == 0 && d.errors() == 0) {
    d.Error("E023", x.span, "this pool has no `size`", "write `size = N` (1 to 64) inside it");
  }
  svc.pools.push_back(std::move(rule));
}

// audit_ship_to (the central database the service ships its audit log to, docs/audit.md
// "Fleet") and audit_ship_interval. The address is a libpq connection string or URI; a password
// in it is refused: the host config is no place for a secret (keep it in the service user's
// .pgpass, or use peer authentication over a Unix socket).
void AuditShip(std::string_view kw, const dsl::Value& v, Diags& d, ServiceSettings& svc) {
  if (kw == "audit_ship_interval") {
    auto t = ReadDuration(v, d, kw);
    if (!t) return;
    if (*t < 1'000'000'000ull || *t > 86400'000'000'000ull) {
      d.Error("E023", v.span, "`audit_ship_interval` must be between 1s and 24h");
      return;
    }
    svc.audit_ship_interval_ns = *t;
    return;
  }
  auto text = ReadString(v, d, kw);
  if (!text) return;
  const size_t scheme = text->find("://");
  const size_t at = text->find('@');
  const bool uri_password =
      scheme != std::string::npos && at != std::string::npos &&
      text->substr(scheme + 3, at - scheme - 3).find(':') != std::string::npos;
  if (text->empty() || text->find("password") != std::string::npos || uri_password) {
    d.Error("E023", v.span,
            text->empty() ? "`audit_ship_to` is empty" : "`audit_ship_to` must not hold a password",
            "name the database only, e.g. \"host=/run/postgresql dbname=audit user=node1\"; "
            "keep a password in the service user's .pgpass");
    return;
  }
  svc.audit_ship_to = *text;
}

void Service(const Statement& s, Diags& d, ServiceSettings& svc) {
  if (!ExpectBlock(s, d, "service")) return;
  static const std::vector<std::string_view> kKeys = {"policy_dir",
                                                      "socket",
                                                      "socket_group",
                                                      "socket_mode",
                                                      "state_dir",
                                                      "audit_db",
                                                      "max_concurrent",
                                                      "max_queue",
                                                      "max_connections",
                                                      "max_request",
                                                      "max_argv",
                                                      "max_argv_bytes",
                                                      "max_stdin",
                                                      "max_input_files",
                                                      "max_input_bytes",
                                                      "request_timeout",
                                                      "drain_timeout",
                                                      "allow",
                                                      "max_connections_per_uid",
                                                      "max_connections_unlisted",
                                                      "header_timeout",
                                                      "max_buffered",
                                                      "refusal_rate",
                                                      "refusal_burst",
                                                      "refusal_argv_bytes",
                                                      "audit_reserve",
                                                      "audit_check_interval",
                                                      "results_ttl",
                                                      "max_retained_runs",
                                                      "results_max_bytes",
                                                      "max_download",
                                                      "pool",
                                                      "pool_memory",
                                                      "max_sessions",
                                                      "max_sessions_per_uid",
                                                      "audit_ship_to",
                                                      "audit_ship_interval"};
  std::set<std::string> seen;
  for (const Statement& x : s.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    bool known = false;
    for (auto k : kKeys) known |= kw == k;
    if (!known) {
      std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", x.head[0].span, "unknown service setting `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (kw == "allow") {
      Allow(x, d, svc);
      continue;
    }
    if (kw == "pool") {
      Pool(x, d, svc);
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", x.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(x, d, kw)) continue;
    const dsl::Value& v = x.assigned;
    if (kw == "audit_ship_to" || kw == "audit_ship_interval") {
      AuditShip(kw, v, d, svc);
      continue;
    }
    if (kw == "policy_dir" || kw == "socket" || kw == "state_dir" || kw == "audit_db") {
      auto text = ReadString(v, d, kw);
      if (!text) continue;
      if (!plan::IsNormalAbsolutePath(*text) || *text == "/") {
        d.Error("E092", v.span, "\"" + *text + "\" is not an absolute, normalised path below /");
        continue;
      }
      if (kw == "socket" && text->size() >= 108) {
        d.Error("E023", v.span, "a Unix socket path must be shorter than 108 bytes");
        continue;
      }
      (kw == "policy_dir"  ? svc.policy_dir
       : kw == "socket"    ? svc.socket
       : kw == "state_dir" ? svc.state_dir
                           : svc.audit_db) = *text;
    } else if (kw == "socket_group") {
      if (v.kind == dsl::ValueKind::kInteger) {
        if (v.number > 0xfffffffeull) {
          d.Error("E023", v.span, "a gid must be below 4294967295");
          continue;
        }
        svc.socket_group = std::to_string(v.number);
      } else if (auto text = ReadString(v, d, kw)) {
        svc.socket_group = *text;
      }
    } else if (kw == "socket_mode") {
      auto text = ReadString(v, d, "socket_mode (an octal string such as \"0660\")");
      if (!text) continue;
      uint32_t mode = 0;
      bool ok = !text->empty() && text->size() <= 4;
      for (char c : *text) {
        ok = ok && c >= '0' && c <= '7';
        mode = mode * 8 + static_cast<uint32_t>(c - '0');
      }
      if (!ok || (mode & ~0666u) != 0 || (mode & 0600u) != 0600u) {
        d.Error("E023", v.span, "socket_mode \"" + *text + "\" is not a socket mode",
                "an octal mode with read and write for the owner and no execute bits, e.g. "
                "\"0660\"");
        continue;
      }
      svc.socket_mode = mode;
    } else if (kw == "pool_memory") {
      auto size = ReadSize(v, d, kw);
      if (!size) continue;
      if (*size > (1ull << 40)) {
        d.Error("E023", v.span, "`pool_memory` must be at most 1TiB");
        continue;
      }
      svc.pool_memory_bytes = *size;
    } else if (kw == "max_buffered" || kw == "audit_reserve") {
      auto size = ReadSize(v, d, kw);
      if (!size) continue;
      // audit_reserve = 0 turns the reserve off; max_buffered = 0 would refuse every body.
      if ((*size == 0 && kw == "max_buffered") || *size > (64ull << 30)) {
        d.Error(
            "E023", v.span,
            "`" + kw + "` must be between " + (kw == "max_buffered" ? "1B" : "0B") + " and 64GiB");
        continue;
      }
      (kw == "max_buffered" ? svc.max_buffered_bytes : svc.audit_reserve_bytes) = *size;
    } else if (kw == "refusal_argv_bytes") {
      auto size = ReadSize(v, d, kw);
      if (!size) continue;
      if (*size > (64ull << 10)) {
        d.Error("E023", v.span, "`refusal_argv_bytes` must be at most 64KiB");
        continue;
      }
      svc.refusal_argv_bytes = *size;
    } else if (kw == "header_timeout" || kw == "audit_check_interval") {
      auto t = ReadDuration(v, d, kw);
      if (!t) continue;
      const uint64_t min = kw == "header_timeout" ? 1'000'000ull : 1'000'000'000ull;
      if (*t < min || *t > 86400'000'000'000ull) {
        d.Error(
            "E023", v.span,
            "`" + kw + "` must be between " + (kw == "header_timeout" ? "1ms" : "1s") + " and 24h");
        continue;
      }
      (kw == "header_timeout" ? svc.header_timeout_ns : svc.audit_check_interval_ns) = *t;
    } else if (kw == "max_request" || kw == "max_argv_bytes" || kw == "max_stdin" ||
               kw == "max_input_bytes") {
      auto size = ReadSize(v, d, kw);
      if (!size) continue;
      // Bounded so that a request always fits in memory a few times over.
      if (*size == 0 || *size > (256ull << 20)) {
        d.Error("E023", v.span, "`" + kw + "` must be between 1B and 256MiB");
        continue;
      }
      (kw == "max_request"      ? svc.max_request_bytes
       : kw == "max_argv_bytes" ? svc.max_argv_bytes
       : kw == "max_stdin"      ? svc.max_stdin_bytes
                                : svc.max_input_bytes) = *size;
    } else if (kw == "results_ttl") {
      auto t = ReadDuration(v, d, kw);
      if (!t) continue;
      if (*t < 1'000'000'000ull || *t > 86400'000'000'000ull) {
        d.Error("E023", v.span, "`results_ttl` must be between 1s and 24h");
        continue;
      }
      svc.results_ttl_ns = *t;
    } else if (kw == "results_max_bytes" || kw == "max_download") {
      auto size = ReadSize(v, d, kw);
      if (!size) continue;
      if (*size > (64ull << 30) || (kw == "max_download" && *size == 0)) {
        d.Error(
            "E023", v.span,
            "`" + kw + "` must be between " + (kw == "max_download" ? "1B" : "0B") + " and 64GiB");
        continue;
      }
      (kw == "max_download" ? svc.max_download_bytes : svc.results_max_bytes) = *size;
    } else if (kw == "max_retained_runs") {
      auto n = ReadInteger(v, d, kw, 1, 100000);
      if (!n) continue;
      svc.max_retained_runs = static_cast<uint32_t>(*n);
    } else if (kw == "request_timeout" || kw == "drain_timeout") {
      auto t = ReadDuration(v, d, kw);
      if (!t) continue;
      if (*t < 1'000'000ull || *t > 3600'000'000'000ull) {
        d.Error("E023", v.span, "`" + kw + "` must be between 1ms and 1h");
        continue;
      }
      (kw == "request_timeout" ? svc.request_timeout_ns : svc.drain_timeout_ns) = *t;
    } else {
      uint64_t max = kw == "max_argv"          ? 65536
                     : kw == "max_input_files" ? 10000
                     : kw == "refusal_rate"    ? 60000
                                               : 4096;
      uint64_t min =
          kw == "max_queue" || kw == "max_input_files" || kw == "max_connections_unlisted" ? 0 : 1;
      auto n = ReadInteger(v, d, kw, min, max);
      if (!n) continue;
      (kw == "max_concurrent"             ? svc.max_concurrent
       : kw == "max_queue"                ? svc.max_queue
       : kw == "max_connections"          ? svc.max_connections
       : kw == "max_connections_per_uid"  ? svc.max_connections_per_uid
       : kw == "max_connections_unlisted" ? svc.max_connections_unlisted
       : kw == "refusal_rate"             ? svc.refusal_rate_per_minute
       : kw == "refusal_burst"            ? svc.refusal_burst
       : kw == "max_argv"                 ? svc.max_argv
       : kw == "max_sessions"             ? svc.max_sessions
       : kw == "max_sessions_per_uid"     ? svc.max_sessions_per_uid
                                          : svc.max_input_files) = static_cast<uint32_t>(*n);
    }
  }
}

using Section = std::function<void(const Statement&, Diags&, HostConfig&)>;

// The host block's keys. A new section (e.g. `service`) is one more entry.
const std::map<std::string, Section>& Sections() {
  static const std::map<std::string, Section> kSections = {
      {"ceilings", [](const Statement& s, Diags& d, HostConfig& h) { Ceilings(s, d, h.ceilings); }},
      {"backends",
       [](const Statement& s, Diags& d, HostConfig& h) { Backends(s, d, h.ceilings, h.backends); }},
      {"cgroups", [](const Statement& s, Diags& d, HostConfig& h) { Cgroups(s, d, h.cgroups); }},
      {"allow_egress_ranges",
       [](const Statement& s, Diags& d, HostConfig& h) { EgressRanges(s, d, h.ceilings); }},
      {"forbid_mounts",
       [](const Statement& s, Diags& d, HostConfig& h) { ForbidMounts(s, d, h.ceilings); }},
      {"network", [](const Statement& s, Diags& d, HostConfig& h) { Network(s, d, h.network); }},
      {"service", [](const Statement& s, Diags& d, HostConfig& h) { Service(s, d, h.service); }},
      {"oci", [](const Statement& s, Diags& d, HostConfig& h) { OciSection(s, d, h.oci); }},
  };
  return kSections;
}

}  // namespace

bool ParseHostConfig(const std::string& path, const std::string& text, HostConfig* out,
                     std::vector<dsl::Diagnostic>* diagnostics) {
  auto parsed = dsl::Parse(path, text);
  for (auto& dg : parsed.diagnostics) diagnostics->push_back(dg);
  if (!parsed.ok()) return false;
  Diags d(path, diagnostics);
  HostConfig h;
  const Statement* host = nullptr;
  for (const Statement& s : parsed.file.statements) {
    std::string kw = Keyword(s, d);
    if (kw.empty()) continue;
    if (kw != "host") {
      d.Error("E028", s.head[0].span, "a host config holds one `host { ... }` block",
              kw == "hosts" ? "did you mean `host`?" : "");
      continue;
    }
    if (host) {
      d.Error("E025", s.head[0].span, "`host` is set twice");
      continue;
    }
    host = &s;
    if (!ExpectBlock(s, d, "host")) continue;
    std::set<std::string> seen;
    for (const Statement& x : s.block) {
      std::string key = Keyword(x, d);
      if (key.empty()) continue;
      auto it = Sections().find(key);
      if (it == Sections().end()) {
        std::vector<std::string_view> names;
        for (const auto& [k, v] : Sections()) names.push_back(k);
        std::string near = dsl::ClosestMatch(key, names);
        d.Error("E020", x.head[0].span, "unknown host config section `" + key + "`",
                near.empty() ? "" : "did you mean `" + near + "`?");
        continue;
      }
      if (!seen.insert(key).second) {
        d.Error("E025", x.head[0].span, "`" + key + "` is set twice");
        continue;
      }
      it->second(x, d, h);
    }
  }
  if (!host && d.errors() == 0) d.Error("E028", dsl::Span{}, "no `host { ... }` block");
  if (d.errors()) return false;
  *out = std::move(h);
  return true;
}

Result<plan::Ceilings> LoadHostConfig(const std::string& path) {
  auto h = LoadHostConfigFile(path);
  if (!h.ok()) return h.status();
  return h->ceilings;
}

Result<HostConfig> LoadHostConfigFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 && errno == ENOENT) return HostConfig{};
  std::string err;
  auto text = ReadSourceFile(path, &err);
  if (!text) return Status::InvalidArgument("host config " + path + ": " + err);
  std::vector<dsl::Diagnostic> diags;
  HostConfig h;
  if (!ParseHostConfig(path, *text, &h, &diags)) {
    std::string rendered;
    for (const auto& d : diags) rendered += dsl::RenderDiagnostic(d, *text);
    return Status::InvalidArgument("host config " + path + " has errors:\n" + rendered);
  }
  return h;
}

}  // namespace safex::compiler
