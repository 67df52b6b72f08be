#include "compiler/host_config.h"

#include <sys/socket.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <set>

#include "compiler/compiler.h"
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

void Backends(const Statement& s, Diags& d, plan::Ceilings& c) {
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
    static const std::vector<std::string_view> kKeys = {"pool", "uplink", "manage_ip_forward"};
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
    } else if (!text->empty() && !plan::IsNormalAbsolutePath(*text)) {
      d.Error("E092", x.assigned.span, "\"" + *text + "\" is not an absolute, normalised path",
              "name a network namespace file such as \"/run/netns/uplink\", or \"\" for the host");
    } else {
      n.uplink_netns = *text;
    }
  }
}

using Section = std::function<void(const Statement&, Diags&, HostConfig&)>;

// The host block's keys. A new section (e.g. `service`) is one more entry.
const std::map<std::string, Section>& Sections() {
  static const std::map<std::string, Section> kSections = {
      {"ceilings", [](const Statement& s, Diags& d, HostConfig& h) { Ceilings(s, d, h.ceilings); }},
      {"backends", [](const Statement& s, Diags& d, HostConfig& h) { Backends(s, d, h.ceilings); }},
      {"allow_egress_ranges",
       [](const Statement& s, Diags& d, HostConfig& h) { EgressRanges(s, d, h.ceilings); }},
      {"forbid_mounts",
       [](const Statement& s, Diags& d, HostConfig& h) { ForbidMounts(s, d, h.ceilings); }},
      {"network", [](const Statement& s, Diags& d, HostConfig& h) { Network(s, d, h.network); }},
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
