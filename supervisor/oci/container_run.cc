#include "supervisor/oci/container_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "audit/audit_log.h"
#include "supervisor/oci/container_state.h"
#include "supervisor/oci/policy_choice.h"
#include "supervisor/oci/spec_check.h"

namespace safex::supervisor::oci {
namespace {

// The pod's identity as the run's recorded purpose: what an auditor filters runs of a pod by.
// In a pod, it also says that the pod's sandbox (pause) container was not safex's: runc ran it
// unchanged (oci_runtime.cc, HandToRunc).
std::string Purpose(const MonitorArgs& a) {
  PodIdentity p = PodIdentityOf(a.spec);
  std::string s = "oci container " + a.id;
  if (!p.kube_namespace.empty()) {
    s += " pod " + p.kube_namespace + "/" + p.pod + " container " + p.container;
  }
  if (!p.image.empty()) s += " image " + p.image;
  if (!p.sandbox_id.empty()) {
    s += "; the pod's sandbox container " + p.sandbox_id + " ran under runc unchanged";
  }
  return s;
}

}  // namespace

// The sandbox booted at create, handed to the run's Runner once (its plan's digest must match).
class ContainerRun::OneSandbox : public SandboxSource {
 public:
  explicit OneSandbox(std::unique_ptr<drivers::PreparedSandbox> sb) : sb_(std::move(sb)) {}
  std::unique_ptr<drivers::PreparedSandbox> Take(const std::string&, const std::string& digest,
                                                 bool with_input) override {
    if (sb_ == nullptr || with_input || sb_->plan_digest() != digest) return nullptr;
    return std::move(sb_);
  }
  bool HasReady(const std::string&, const std::string& digest, bool with_input) const override {
    return sb_ != nullptr && !with_input && sb_->plan_digest() == digest;
  }
  void Put(std::unique_ptr<drivers::PreparedSandbox> sb) { sb_ = std::move(sb); }
  drivers::PreparedSandbox* waiting() const { return sb_.get(); }
  std::unique_ptr<drivers::PreparedSandbox> Release() { return std::move(sb_); }

 private:
  std::unique_ptr<drivers::PreparedSandbox> sb_;
};

ContainerRun::ContainerRun(const MonitorArgs& a) : a_(a) {
  flags_.host_config = a.host_config_path;
  flags_.audit_db = a.host.oci.audit_db;
  flags_.audit_key = a.host.oci.audit_key;
  flags_.state_root = a.host.oci.state_dir;
  run_.argv = a.spec.args;
  run_.requester.uid = getuid();
  run_.requester.gid = getgid();
  run_.requester.pid = getpid();
  run_.purpose = Purpose(a);
  refusal_.run_id = audit::NewRunId();
}

ContainerRun::~ContainerRun() {
  if (sandbox_ && sandbox_->waiting() != nullptr)
    EvictSandbox("the container's run did not use it");
  // The container's cgroup (the spec's cgroupsPath, made for it) goes with its run's.
  if (Status st = RemoveContainerCgroup(cgroup_parent_); !st.ok()) {
    a_.log.Warning(a_.id + ": " + st.message());
  }
}

// In this order: the audit log first (nothing is refused or run without a record), the node's
// choice of policy, the cgroup below the pod's, the run's setup, the plan, the spec's check.
void ContainerRun::Prepare(const std::atomic<int>* cancel) {
  cancel_ = cancel;
  auto log = OpenAuditLogForRuns(flags_);
  if (!log.ok()) {
    refuse_reason_ = log.status().message();
    record_refusal_ = false;
    return;
  }
  setup_.log = std::move(*log);
  auto policy = ChoosePolicy(a_.host.oci, a_.spec);
  if (!policy.ok()) {
    refuse_reason_ = policy.status().message();
    return;
  }
  refusal_.policy_name = *policy;
  auto parent = CgroupParentOf(a_.spec.cgroups_path);
  if (!parent.ok()) {
    refuse_reason_ = parent.status().message();
    return;
  }
  cgroup_parent_ = flags_.cgroup_parent = *parent;
  if (Status st = Compile(*policy); !st.ok()) {
    refuse_reason_ = st.message();
    return;
  }
  BootSandbox();
}

Status ContainerRun::Compile(const std::string& policy) {
  sandbox_ = std::make_unique<OneSandbox>(nullptr);
  flags_.sandboxes = sandbox_.get();
  SAFEX_RETURN_IF_ERROR(PrepareRunSetup(flags_, &setup_));
  // Compiled under this host's ceilings, on gVisor only: native is for trusted tools and never
  // reachable from a pod.
  const std::string path = a_.host.oci.policy_dir + "/" + policy + ".policy";
  auto prepared = PreparePlan(path, {a_.host.oci.policy_dir}, setup_.host.ceilings, &refusal_);
  if (!prepared.ok()) return Status::InvalidArgument(refusal_.reason);
  prepared_ = std::move(*prepared);
  if (prepared_->plan.backend != plan::Backend::kGvisor) {
    return Status::PermissionDenied("policy \"" + policy + "\" runs on " +
                                    plan::BackendName(prepared_->plan.backend) +
                                    "; safex-oci runs containers under gVisor only");
  }
  SpecCheck check = CheckSpec(a_.spec, prepared_->plan);
  termination_log_ = check.termination_log;
  if (!check.refusals.empty())
    return Status::PermissionDenied(fmt::format("{}", fmt::join(check.refusals, "; ")));
  for (const std::string& note : check.notes) a_.log.Info(a_.id + ": " + note);
  if (!check.env_not_passed.empty()) {
    a_.log.Info(a_.id + ": environment not passed (the policy does not let a caller set it): " +
                fmt::format("{}", fmt::join(check.env_not_passed, ", ")));
  }
  run_.env = check.env;
  run_.cwd = check.cwd;
  return Status::Ok();
}

// The plan's sandbox, booted now so that start only hands it the program (a run with choices of
// its own derives another plan: it boots its own at start). A sandbox that cannot be made or
// recorded here is no refusal: the run makes its own at start, and fails there if it must.
void ContainerRun::BootSandbox() {
  if (!run_.env.empty() || !run_.cwd.empty()) return;
  auto driver = setup_.backends->Get(prepared_->plan.backend);
  if (!driver.ok()) return;
  drivers::PrepareRequest request;
  request.sandbox_id = audit::NewRunId();
  request.cancel = cancel_;
  auto sb = (*driver)->Prepare(prepared_->plan, request);
  if (!sb.ok()) {
    a_.log.Warning(a_.id + ": no sandbox booted before start: " + sb.status().message());
    return;
  }
  audit::SandboxEvent ev;
  ev.sandbox_id = (*sb)->id();
  ev.requester.pid = getpid();
  ev.policy_name = prepared_->plan.policy_name;
  ev.plan_digest = (*sb)->plan_digest();
  ev.backend = plan::BackendName(prepared_->plan.backend);
  ev.backend_mode = prepared_->plan.gvisor.platform;
  ev.enforcement = EnforcementToJson((*sb)->enforcement()).dump();
  if (Status st = setup_.log->RecordSandbox(ev); !st.ok()) {
    a_.log.Warning(
        a_.id + ": the booted sandbox could not be recorded, so it is not used: " + st.message());
    return;  // destroyed here, never used
  }
  sandbox_->Put(std::move(*sb));
}

void ContainerRun::EvictSandbox(const std::string& why) {
  std::unique_ptr<drivers::PreparedSandbox> sb = sandbox_->Release();
  audit::SandboxEvent ev;
  ev.sandbox_id = sb->id();
  ev.what = audit::SandboxEvent::What::kEvicted;
  ev.requester.pid = getpid();
  ev.policy_name = prepared_->plan.policy_name;
  ev.plan_digest = sb->plan_digest();
  ev.reason = why;
  if (Status st = setup_.log->RecordSandbox(ev); !st.ok()) {
    a_.log.Warning(a_.id + ": the end of sandbox " + ev.sandbox_id +
                   " could not be recorded: " + st.message());
  }
  sb.reset();  // torn down
}

RunReport ContainerRun::Refusal() {
  refusal_.reason = refuse_reason_;
  if (record_refusal_) Runner::RecordRefusal(*setup_.log, run_, &refusal_).ok();  // said in reason
  return refusal_;
}

RunReport ContainerRun::Run(const std::atomic<int>* cancel,
                            const drivers::OutputObserver& on_output) {
  if (!refuse_reason_.empty()) return Refusal();
  run_.cancel = cancel;
  run_.on_output = on_output;
  return setup_.runner->Execute(*prepared_, std::move(run_), *setup_.log);
}

void ContainerRun::Abandon(const std::string& why) {
  if (sandbox_ && sandbox_->waiting() != nullptr) EvictSandbox(why);
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
