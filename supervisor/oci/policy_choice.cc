#include "supervisor/oci/policy_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace safex::supervisor::oci {
namespace {

const compiler::OciNamespaceRule* RuleFor(const compiler::OciSettings& oci, const std::string& ns) {
  const compiler::OciNamespaceRule* any = nullptr;
  for (const auto& rule : oci.namespaces) {
    if (!ns.empty() && rule.name == ns) return &rule;
    if (rule.name == "*") any = &rule;
  }
  return any;
}

// "a, b, c": the policies a namespace may use, as a refusal names them.
std::string List(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ", "));
}

}  // namespace

Result<std::string> ChoosePolicy(const compiler::OciSettings& oci, const ContainerSpec& spec) {
  if (!oci.present) {
    return Status::PermissionDenied(
        "this node's host config has no `oci` section: no container may run under safex-oci");
  }
  const std::string ns = PodIdentityOf(spec).kube_namespace;
  const std::string where = ns.empty() ? "a container outside Kubernetes" : "namespace " + ns;
  const compiler::OciNamespaceRule* rule = RuleFor(oci, ns);
  if (rule == nullptr) {
    return Status::PermissionDenied("no policy is allowed for " + where +
                                    " (the host config's oci section has no rule for it)");
  }
  auto asked = spec.annotations.find(kPolicyAnnotation);
  if (asked == spec.annotations.end() || asked->second.empty()) {
    if (rule->default_policy.empty()) {
      return Status::PermissionDenied("the pod names no policy (annotation " +
                                      std::string(kPolicyAnnotation) + ") and " + where +
                                      " has no default; it may use: " + List(rule->policies));
    }
    return rule->default_policy;
  }
  if (std::find(rule->policies.begin(), rule->policies.end(), asked->second) ==
      rule->policies.end()) {
    return Status::PermissionDenied("policy \"" + asked->second + "\" is not allowed for " + where +
                                    "; it may use: " + List(rule->policies));
  }
  return asked->second;
}

}  // namespace safex::supervisor::oci
