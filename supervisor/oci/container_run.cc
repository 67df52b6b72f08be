#include "supervisor/oci/container_run.h"

#include <unistd.h>

#include "audit/audit_log.h"
#include "supervisor/oci/container_state.h"
#include "supervisor/oci/policy_choice.h"
#include "supervisor/oci/spec_check.h"
#include "supervisor/run_setup.h"

namespace safex::supervisor::oci {
namespace {

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The pod's identity as the run's recorded purpose: what an auditor filters runs of a pod by.
std::string Purpose(const MonitorArgs& a) {
  PodIdentity p = PodIdentityOf(a.spec);
  std::string s = "oci container " + a.id;
  if (!p.kube_namespace.empty()) {
    s += " pod " + p.kube_namespace + "/" + p.pod + " container " + p.container;
  }
  if (!p.image.empty()) s += " image " + p.image;
  return s;
}

}  // namespace

RunReport RunContainer(const MonitorArgs& a, const std::atomic<int>* cancel,
                       const drivers::OutputObserver& on_output, std::string* termination_log) {
  const compiler::OciSettings& oci = a.host.oci;
  RunSetupFlags flags;
  flags.host_config = a.host_config_path;
  flags.audit_db = oci.audit_db;
  flags.audit_key = oci.audit_key;
  flags.state_root = oci.state_dir;

  // Fail closed on the audit log first: nothing runs, or is refused, without a record.
  RunReport refusal;
  auto log = OpenAuditLogForRuns(flags);
  if (!log.ok()) {
    refusal.reason = log.status().message();
    return refusal;
  }
  RunSetup setup;
  setup.log = std::move(*log);

  RunSpec run;
  run.argv = a.spec.args;
  run.requester.uid = getuid();
  run.requester.gid = getgid();
  run.requester.pid = getpid();
  run.cancel = cancel;
  run.on_output = on_output;
  run.purpose = Purpose(a);
  refusal.run_id = audit::NewRunId();
  auto refuse = [&](const std::string& why) {
    refusal.reason = why;
    Runner::RecordRefusal(*setup.log, run, &refusal).ok();  // said in the reason
    return refusal;
  };

  // The node's choice of policy, then the run's cgroup below the pod's.
  auto policy = ChoosePolicy(oci, a.spec);
  if (!policy.ok()) return refuse(policy.status().message());
  refusal.policy_name = *policy;
  auto parent = CgroupParentOf(a.spec.cgroups_path);
  if (!parent.ok()) return refuse(parent.status().message());
  flags.cgroup_parent = *parent;
  if (Status st = PrepareRunSetup(flags, &setup); !st.ok()) return refuse(st.message());

  // The policy compiled under this host's ceilings, on gVisor only (native is for trusted
  // tools, never reachable from a pod), and the spec checked against its plan.
  auto prepared = PreparePlan(oci.policy_dir + "/" + *policy + ".policy", {oci.policy_dir},
                              setup.host.ceilings, &refusal);
  if (!prepared.ok()) {
    Runner::RecordRefusal(*setup.log, run, &refusal).ok();
    return refusal;
  }
  if (prepared->plan.backend != plan::Backend::kGvisor) {
    return refuse("policy \"" + *policy + "\" runs on " +
                  plan::BackendName(prepared->plan.backend) +
                  "; safex-oci runs containers under gVisor only");
  }
  SpecCheck check = CheckSpec(a.spec, prepared->plan);
  *termination_log = check.termination_log;
  if (!check.refusals.empty()) return refuse(Join(check.refusals, "; "));
  for (const std::string& note : check.notes) a.log.Info(a.id + ": " + note);
  if (!check.env_not_passed.empty()) {
    a.log.Info(a.id + ": environment not passed (the policy does not let a caller set it): " +
               Join(check.env_not_passed, ", "));
  }
  run.env = check.env;
  run.cwd = check.cwd;
  RunReport report = setup.runner->Execute(*prepared, std::move(run), *setup.log);
  // The run's own cgroup is gone; the container's (the spec's cgroupsPath, made for it) goes too.
  if (Status st = RemoveContainerCgroup(*parent); !st.ok()) {
    a.log.Warning(a.id + ": " + st.message());
  }
  return report;
}

std::string TerminationMessage(const RunReport& r) {
  nlohmann::json j = {{"run_id", r.run_id},
                      {"verdict", VerdictName(r.verdict)},
                      {"exit_status", r.exit_status},
                      {"policy", r.policy_name},
                      {"limits_fired", r.limits_fired},
                      {"reason", r.reason.substr(0, 2048)}};
  std::string text =
      nlohmann::json{{"safex", j}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() <= 4096 ? text : text.substr(0, 4096);
}

}  // namespace safex::supervisor::oci
