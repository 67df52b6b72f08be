#include "compiler/host_config_oci.h"

#include <algorithm>
#include <set>

#include "compiler/lower.h"
#include "dsl/diagnostics.h"
#include "plan/verify.h"

namespace safex::compiler {
namespace {

using dsl::Statement;

bool IsPolicyName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// A Kubernetes namespace is a DNS label: [a-z0-9-], at most 63 characters.
bool IsNamespaceName(const std::string& name) {
  return name == "*" || (name.size() <= 63 && IsPolicyName(name));
}

// policies = ["a", "b"]: at least one, each a policy name, each once.
void Policies(const dsl::Value& v, Diags& d, OciNamespaceRule& rule) {
  const auto* items = ReadList(v, d, "policies");
  if (!items) return;
  for (const auto& item : *items) {
    auto name = ReadString(item, d, "policy name");
    if (!name) continue;
    if (!IsPolicyName(*name)) {
      d.Error("E023", item.span, "\"" + *name + "\" is not a policy name",
              "a policy name is [a-z0-9-]+ (the file <policy_dir>/<name>.policy)");
    } else if (std::find(rule.policies.begin(), rule.policies.end(), *name) !=
               rule.policies.end()) {
      d.Error("E025", item.span, "policy \"" + *name + "\" is listed twice");
    } else {
      rule.policies.push_back(*name);
    }
  }
  if (items->empty()) d.Error("E023", v.span, "`policies` lists no policy");
}

// namespace "name" { policies = [...]  default = "..." }
void Namespace(const Statement& x, Diags& d, OciSettings& oci) {
  if (x.head.size() != 2 || x.head[1].kind != dsl::ValueKind::kString || x.has_assignment ||
      !x.has_block) {
    d.Error("E027", x.span, "`namespace` names a Kubernetes namespace and holds a block",
            "write `namespace \"agents\" { policies = [\"python-untrusted\"] }`");
    return;
  }
  OciNamespaceRule rule;
  rule.name = x.head[1].text;
  if (!IsNamespaceName(rule.name)) {
    d.Error("E023", x.head[1].span, "\"" + rule.name + "\" is not a Kubernetes namespace",
            "a namespace is [a-z0-9-], at most 63 characters; \"*\" is every other one");
    return;
  }
  for (const OciNamespaceRule& other : oci.namespaces) {
    if (other.name == rule.name) {
      d.Error("E025", x.head[1].span, "namespace \"" + rule.name + "\" has two rules");
      return;
    }
  }
  std::set<std::string> seen;
  for (const Statement& y : x.block) {
    std::string kw = Keyword(y, d);
    if (kw.empty()) continue;
    if (kw != "policies" && kw != "default") {
      std::string near = dsl::ClosestMatch(kw, {"policies", "default"});
      d.Error("E020", y.head[0].span, "unknown namespace setting `" + kw + "`",
              near.empty() ? "expected `policies` or `default`" : "did you mean `" + near + "`?");
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", y.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    if (!ExpectAssignment(y, d, kw)) continue;
    if (kw == "policies") {
      Policies(y.assigned, d, rule);
    } else if (auto name = ReadString(y.assigned, d, kw)) {
      rule.default_policy = *name;
    }
  }
  if (rule.policies.empty() && !seen.count("policies")) {
    d.Error("E023", x.span, "this namespace rule lists no policies",
            "write `policies = [\"name\", ...]` inside it");
  }
  if (!rule.default_policy.empty() && std::find(rule.policies.begin(), rule.policies.end(),
                                                rule.default_policy) == rule.policies.end()) {
    d.Error("E023", x.span,
            "the default policy \"" + rule.default_policy + "\" is not one of its `policies`");
  }
  oci.namespaces.push_back(std::move(rule));
}

void Path(const Statement& x, Diags& d, const std::string& kw, std::string& out) {
  if (!ExpectAssignment(x, d, kw)) return;
  auto text = ReadString(x.assigned, d, kw);
  if (!text) return;
  if (!plan::IsNormalAbsolutePath(*text) || *text == "/") {
    d.Error("E092", x.assigned.span, "\"" + *text + "\" is not an absolute, normalised path");
    return;
  }
  out = *text;
}

}  // namespace

void OciSection(const Statement& s, Diags& d, OciSettings& oci) {
  if (!ExpectBlock(s, d, "oci")) return;
  oci.present = true;
  static const std::vector<std::string_view> kKeys = {"policy_dir", "audit_db", "audit_key",
                                                      "state_dir",  "runc",     "namespace"};
  std::set<std::string> seen;
  for (const Statement& x : s.block) {
    std::string kw = Keyword(x, d);
    if (kw.empty()) continue;
    if (std::find(kKeys.begin(), kKeys.end(), kw) == kKeys.end()) {
      std::string near = dsl::ClosestMatch(kw, kKeys);
      d.Error("E020", x.head[0].span, "unknown oci setting `" + kw + "`",
              near.empty() ? "" : "did you mean `" + near + "`?");
      continue;
    }
    if (kw == "namespace") {
      Namespace(x, d, oci);
      continue;
    }
    if (!seen.insert(kw).second) {
      d.Error("E025", x.head[0].span, "`" + kw + "` is set twice");
      continue;
    }
    std::string& out = kw == "policy_dir"  ? oci.policy_dir
                       : kw == "audit_db"  ? oci.audit_db
                       : kw == "audit_key" ? oci.audit_key
                       : kw == "state_dir" ? oci.state_dir
                                           : oci.runc;
    Path(x, d, kw, out);
  }
}

}  // namespace safex::compiler
