#include "drivers/gvisor/gvisor_driver.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "common/fs_tree.h"
#include "common/owner_lock.h"
#include "common/persistent_state.h"
#include "common/run_id.h"
#include "common/utf8.h"
#include "drivers/gvisor/launch_report.h"
#include "drivers/gvisor/oci_spec.h"
#include "drivers/gvisor/outcome.h"
#include "drivers/gvisor/pooled_sandbox.h"
#include "drivers/gvisor/program_lookup.h"
#include "drivers/gvisor/run_state.h"
#include "drivers/gvisor/run_steps.h"
#include "drivers/gvisor/runsc.h"
#include "drivers/gvisor/runsc_version_cache.h"
#include "drivers/gvisor/session_sandbox.h"
#include "drivers/run_dir.h"
#include "plan/plan_json.h"

namespace safex::drivers {
namespace {

using Clock = std::chrono::steady_clock;
using drivers::PrivateDir;
using gvisor::LastLine;

// Whether every entry of `dir` is one that Run() makes in a run's private directory.
bool LooksLikeRunDir(const std::string& dir) {
  static const std::set<std::string> kRunEntries = {"owner.lock", "bundle",      "state",
                                                    "out",        "input-empty", "stdio"};
  for (const std::string& n : ListDirectoryOrEmpty(dir)) {
    if (kRunEntries.count(n) == 0) return false;
  }
  return true;
}

// A program that is certainly not in the sandbox's root view is 127 without running anything:
// the answer does not need a sandbox, and a start would be most of the run's cost.
bool MissingProgram(const plan::Plan& plan, const RunRequest& req, RunResult* result) {
  auto missing = gvisor::CertainlyMissingProgram(plan, req.argv[0], req.input_dir);
  if (!missing) return false;
  result->exit_code = 127;
  result->backend_error = *missing;
  return true;
}

// What the runs record of the runtime (its version, its binary's SHA-256), asked of the binary
// `st` describes: on a miss of the cache only (runsc_version_cache.h).
Result<gvisor::RunscFacts> AskRunsc(const std::string& runsc, const struct stat& st) {
  auto ver = RunTool({runsc, "--version"}, std::chrono::milliseconds(10000));
  if (!ver.ok()) {
    return Status::Unavailable("gvisor: cannot run " + runsc + ": " + ver.status().message());
  }
  if (ver->timed_out || !ver->status.exited || ver->status.code != 0) {
    return Status::Unavailable("gvisor: `" + runsc +
                               " --version` failed: " + LastLine(ver->output));
  }
  SAFEX_ASSIGN_OR_RETURN(std::string sha256, gvisor::HashRunsc(runsc, st));
  return gvisor::RunscFacts{std::move(sha256), ver->output};
}

std::string BackendMode(const plan::Plan& plan) {
  return "gvisor/" + plan.gvisor.platform +
         (plan.network.egress.empty() ? "/network=none" : "/network=netns");
}

}  // namespace

GvisorDriver::GvisorDriver(GvisorOptions options) : options_(std::move(options)) {}
GvisorDriver::~GvisorDriver() = default;

std::string GvisorDriver::runsc_version() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_ ? ready_->runsc_version : "";
}

std::optional<cgroup::Version> GvisorDriver::cgroup_version() const {
  std::lock_guard<std::mutex> l(mu_);
  if (!ready_) return std::nullopt;
  return ready_->cgroups.version();
}

// A full probe (EnsureReady) makes and removes a cgroup with every limit and a directory in the
// state root: the same work as a run's own first steps, which the service paid twice per run.
// Within kProbeFresh of a full probe that passed, while runsc is the same file and the launcher
// is there, the answer stands. What else could change in that window (cgroups, the state root)
// fails the run's own first steps instead, before anything of the program exists (fail closed),
// with their own message rather than "backend unavailable". A boot that got as far as its
// launcher's report did the same work, so it renews the answer too (ProbedByBoot): in a service
// whose pool refills after each run, a run taking a pooled sandbox seldom pays a full probe
// (about 3 ms of cgroup and directory churn before its start event).
constexpr auto kProbeFresh = std::chrono::seconds(2);

Status GvisorDriver::Probe() { return ProbeUnlessStanding(kProbeFresh); }

// A run in a pooled sandbox or a session makes no cgroup and no state directory, and its runsc
// is already running: the answer of the last full probe stands for it whatever its age, while
// runsc is the same file and the launcher is there (a sandbox of a replaced runsc is the pool's
// to retire). After an idle pause, so, a run taking a pooled sandbox (an agent's loop with a
// model's think time between runs) does not pay the full probe's cgroup and directory churn.
Status GvisorDriver::ProbeForMadeSandbox() { return ProbeUnlessStanding(Clock::duration::max()); }

Status GvisorDriver::ProbeUnlessStanding(Clock::duration stands_for) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ready_ && Clock::now() - ready_->probed_at < stands_for &&
        PathIdentity(options_.runsc_path, true) == ready_->runsc_identity &&
        access(options_.runsc_path.c_str(), X_OK) == 0 &&
        gvisor::FindLauncherDir(options_.launcher_dir).ok()) {
      return Status::Ok();
    }
    ready_.reset();  // probe again from scratch
  }
  return EnsureReady().status();
}

Result<GvisorDriver::Ready> GvisorDriver::EnsureReady() {
  std::lock_guard<std::mutex> l(mu_);
  if (ready_) return *ready_;

  const std::string& runsc = options_.runsc_path;
  struct stat st;
  if (runsc.empty() || runsc[0] != '/') {
    return Status::Unavailable("gvisor: runsc path must be absolute: '" + runsc + "'");
  }
  if (stat(runsc.c_str(), &st) != 0) {
    return Status::Unavailable("gvisor: runsc not found at " + runsc + " (" + strerror(errno) +
                               "); install it with scripts/install-deps.sh");
  }
  if (!S_ISREG(st.st_mode) || access(runsc.c_str(), X_OK) != 0) {
    return Status::Unavailable("gvisor: " + runsc + " is not an executable file");
  }
  // `runsc --version` is a Go process start per run, and the hash a read of the whole binary:
  // both are cached per binary identity.
  const std::string version_cache = options_.state_root + "/runsc-version";
  std::optional<gvisor::RunscFacts> facts = gvisor::ReadRunscVersionCache(version_cache, st);
  const bool facts_fresh = !facts.has_value();
  if (facts_fresh) {
    SAFEX_ASSIGN_OR_RETURN(facts, AskRunsc(runsc, st));
  }
  std::string version = gvisor::RunscVersionString(facts->version_output);
  std::optional<int> date = gvisor::RunscReleaseDate(version);
  if (!date) {
    return Status::Unavailable("gvisor: cannot tell the version of " + runsc + " from '" +
                               LastLine(facts->version_output) + "'");
  }
  if (*date < options_.min_runsc_date) {
    return Status::Unavailable("gvisor: runsc " + version + " is too old (need a release " +
                               "from " + std::to_string(options_.min_runsc_date) +
                               " or later; older ones fail statx on this kernel)");
  }

  Result<std::string> launcher = gvisor::FindLauncherDir(options_.launcher_dir);
  if (!launcher.ok()) return launcher.status();

  auto host = cgroup::CgroupHost::Detect(options_.cgroup_root);
  if (!host.ok()) return Status::Unavailable("gvisor: " + host.status().message());
  Status usable = host->CheckUsable(options_.cgroup_parent);
  if (!usable.ok()) return Status::Unavailable("gvisor: " + usable.message());
  Ready r{version, facts->sha256, *date, *launcher, *host, PathIdentity(runsc, true), Clock::now()};

  auto probe_dir = PrivateDir::Create(options_.state_root,
                                      "probe-" + std::to_string(getpid()) + "-" +
                                          std::to_string(Clock::now().time_since_epoch().count()));
  if (!probe_dir.ok()) {
    return Status::Unavailable("gvisor: state root " + options_.state_root +
                               " is not usable: " + probe_dir.status().message());
  }
  Status rm = probe_dir->Remove();
  if (!rm.ok()) return Status::Unavailable("gvisor: state root: " + rm.message());
  // Only a version that passed every check above is cached (the state root now exists).
  if (facts_fresh) gvisor::WriteRunscVersionCache(version_cache, st, *facts);

  ready_ = r;
  return r;
}

// Nothing is renewed after a probe that failed meanwhile (no answer stands), nor when runsc is
// another file than the one the boot ran.
void GvisorDriver::ProbedByBoot(const Ready& ready) {
  std::lock_guard<std::mutex> l(mu_);
  if (ready_ && ready_->runsc_identity == ready.runsc_identity) ready_->probed_at = Clock::now();
}

Status GvisorDriver::CheckPlan(const plan::Plan& plan) const {
  const std::string& platform = plan.gvisor.platform;
  if (platform != "systrap" && platform != "ptrace") {
    return Status::InvalidArgument("gvisor platform must be systrap or ptrace, not '" + platform +
                                   "'");
  }
  if (options_.platforms.count(platform) == 0) {
    return Status::Unavailable("gvisor: this host does not offer the " + platform +
                               " platform the plan names (host config: backends { gvisor { "
                               "platforms } }); refused, nothing ran");
  }
  for (const auto& [name, value] : plan.env) {
    if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
      return Status::InvalidArgument("environment variable " + name +
                                     " is not valid UTF-8 (the gvisor backend cannot carry it)");
    }
  }
  return Status::Ok();
}

Status GvisorDriver::CheckRequest(const plan::Plan& plan, const RunRequest& req) const {
  SAFEX_RETURN_IF_ERROR(Driver::CheckRequest(plan, req));
  SAFEX_RETURN_IF_ERROR(CheckPlan(plan));
  for (size_t i = 0; i < req.argv.size(); ++i) {
    if (!IsValidUtf8(req.argv[i])) {
      return Status::InvalidArgument(
          "argv[" + std::to_string(i) +
          "] is not valid UTF-8; the gvisor backend passes argv through runsc's JSON "
          "configuration, which cannot carry those bytes faithfully (the microvm backend can)");
    }
  }
  return Status::Ok();
}

// The evidence differed from the plan (or never came): nothing of the program ran; what was set
// up goes now, and the run ends refused with the difference named.
RunResult GvisorDriver::RefusedByEvidence(RunResult result, gvisor::RunState& s) const {
  result.refused_by_enforcement = true;
  result.backend_error = "the host does not enforce the plan: " + result.enforcement.Differences();
  s.Teardown(options_.kill_grace);
  result.teardown_error = s.errors;
  return result;
}

// Steps 1-6b, in the order they must happen (run_steps.h has the steps; RunState's destructor
// tears down whatever exists on every way out). nullopt: the evidence differed before runsc
// started (nothing of the program exists; RefusedByEvidence is the caller's).
Result<std::optional<gvisor::LaunchOutcome>> GvisorDriver::Boot(
    const gvisor::RunContext& c, const Ready& ready, const gvisor::SeccompOptions& seccomp,
    bool filtered, gvisor::RunState& s, gvisor::RunIo& io, RunResult* result) {
  // 1-2. Its private directory first (everything below lives in it), then the host side of the
  //      mounts (output tmpfs), which the bundle's config names.
  SAFEX_RETURN_IF_ERROR(gvisor::CreateRunDirectory(c, s));
  SAFEX_RETURN_IF_ERROR(gvisor::PrepareMountSources(c, s));
  // 3. The cgroup before runsc exists: runsc joins it, so every process it starts is inside.
  SAFEX_RETURN_IF_ERROR(gvisor::CreateCgroup(c, ready.cgroups, s));
  // 4. The network before the bundle: the sandbox's /etc/hosts names the granted destinations.
  SAFEX_ASSIGN_OR_RETURN(std::string hosts, gvisor::CreateNetwork(c, s));
  // 4b. The evidence, before anything of the program exists: a host that does not enforce the
  //     plan refuses the run rather than run it under something else.
  gvisor::ReadBackEnforcement(ready.runsc_version, ready.runsc_sha256, s, &result->enforcement);
  if (result->enforcement.Differs()) return std::optional<gvisor::LaunchOutcome>();
  // 5-6. The bundle, then runsc with the program's stdio.
  SAFEX_RETURN_IF_ERROR(gvisor::WriteBundle(c, hosts, seccomp, ready.launcher_dir, s));
  SAFEX_ASSIGN_OR_RETURN(io, gvisor::StartRunsc(c, s));
  // 6b. The launcher's report from inside, before the program: the go-ahead only if it holds
  //     (a pooled sandbox's launcher waits for the hand-over instead).
  return std::optional(gvisor::AwaitLauncher(c, filtered, io, s, &result->enforcement));
}

// Steps 7-10: supervision until every process is gone, what happened, the outputs, teardown.
Result<RunResult> GvisorDriver::Finish(const gvisor::RunContext& c, gvisor::LaunchOutcome launched,
                                       gvisor::RunIo& io, gvisor::RunState& s, RunResult result) {
  // 7. Supervision until every process of the run is gone.
  gvisor::Observation seen = gvisor::Supervise(c, io, s, &result);
  // 8. What happened: the counters (after the end, so they are final), then the classifier.
  gvisor::ReadAccounting(c, s, &seen, &result);
  auto outcome = gvisor::Classify(seen, c.plan.limits);
  if (!outcome.ok()) {
    s.Teardown(options_.kill_grace);
    if (s.errors.empty()) return outcome.status();
    return Status::Internal(outcome.status().message() + "\n[teardown: " + s.errors + "]");
  }
  if (launched != gvisor::LaunchOutcome::kStarted && !outcome->interrupted) {
    // The launcher exited without the go-ahead: nothing of the program ran.
    return RefusedByEvidence(std::move(result), s);
  }
  result.exit_code = outcome->exit_code;
  result.term_signal = outcome->term_signal;
  result.limit = outcome->limit;
  result.limit_detail = outcome->limit_detail;
  result.backend_error = outcome->backend_error;
  result.interrupted = outcome->interrupted;
  // 9. Outputs, collected after every process is gone and before their storage goes away.
  gvisor::CollectOutputs(c, s);
  // 10. Teardown; what could not be removed is the operator's to see.
  s.Teardown(options_.kill_grace);
  result.teardown_error = s.errors;
  return result;
}

// The script of one cold run: refusals before anything exists, Boot (1-6b), Finish (7-10).
Result<RunResult> GvisorDriver::Run(const plan::Plan& plan, const RunRequest& req) {
  // 0. Refuse what cannot be run faithfully, before anything exists.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  SAFEX_RETURN_IF_ERROR(CheckRunnable(plan, req, plan::Backend::kGvisor,
                                      static_cast<bool>(options_.network_provider)));
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  gvisor::SeccompOptions seccomp;  // errnoRet is not honoured by runsc 20240729
  SAFEX_ASSIGN_OR_RETURN(std::optional<nlohmann::json> filter,
                         gvisor::BuildSeccomp(plan.seccomp, seccomp));
  RunResult result;
  result.backend_mode = BackendMode(plan);
  if (MissingProgram(plan, req, &result)) return result;
  const gvisor::RunContext c{plan, req, options_};
  SigpipeBlock sigpipe_block;
  gvisor::RunState s;
  gvisor::RunIo io;
  SAFEX_ASSIGN_OR_RETURN(std::optional<gvisor::LaunchOutcome> launched,
                         Boot(c, ready, seccomp, filter.has_value(), s, io, &result));
  if (!launched) return RefusedByEvidence(std::move(result), s);
  if (*launched == gvisor::LaunchOutcome::kStarted) ProbedByBoot(ready);
  return Finish(c, *launched, io, s, std::move(result));
}

// Steps 0-6b for a sandbox made before its program is known (a pooled sandbox, a session's): a
// cold run's refusals, then Boot with the launcher left waiting (for its hand-over, or for
// commands when `session`). Unavailable, naming `what`, unless it reported and waits.
Status GvisorDriver::BootAhead(const plan::Plan& plan, const PrepareRequest& preq, bool session,
                               const char* what, gvisor::RunState& s, gvisor::RunIo& io,
                               RunResult* boot, bool* filtered) {
  // The request it is booted for: its id, no program yet, no input.
  RunRequest req;
  req.run_id = preq.sandbox_id;
  req.cancel = preq.cancel;
  SAFEX_RETURN_IF_ERROR(CheckPlan(plan));
  SAFEX_RETURN_IF_ERROR(CheckRunnable(plan, req, plan::Backend::kGvisor,
                                      static_cast<bool>(options_.network_provider)));
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  gvisor::SeccompOptions seccomp;
  SAFEX_ASSIGN_OR_RETURN(std::optional<nlohmann::json> filter,
                         gvisor::BuildSeccomp(plan.seccomp, seccomp));
  *filtered = filter.has_value();
  gvisor::RunContext c{plan, req, options_};
  c.pooled = !session;
  c.session = session;
  SigpipeBlock sigpipe_block;
  SAFEX_ASSIGN_OR_RETURN(std::optional<gvisor::LaunchOutcome> launched,
                         Boot(c, ready, seccomp, *filtered, s, io, boot));
  if (launched == gvisor::LaunchOutcome::kReady) {
    ProbedByBoot(ready);
    return Status::Ok();
  }
  // The same evidence a cold run would have been refused on; nothing of any request existed.
  const std::string why =
      boot->enforcement.Differs() ? boot->enforcement.Differences() : "its launcher did not report";
  return Status::Unavailable(std::string("gvisor: ") + what + " could not be made: " + why);
}

Result<std::unique_ptr<PreparedSandbox>> GvisorDriver::Prepare(const plan::Plan& plan,
                                                               const PrepareRequest& preq) {
  // Taken before the boot: a change during it makes the sandbox stale at once, never current.
  const std::string generation = SandboxGeneration(plan);
  auto s = std::make_unique<gvisor::RunState>();
  gvisor::RunIo io;
  RunResult boot;
  bool filtered = false;
  SAFEX_RETURN_IF_ERROR(
      BootAhead(plan, preq, /*session=*/false, "a pooled sandbox", *s, io, &boot, &filtered));
  s->Park();
  return std::unique_ptr<PreparedSandbox>(std::make_unique<gvisor::PooledSandbox>(
      preq.sandbox_id, PlanDigestOf(plan, preq.plan_digest), generation, RealtimeNs(), filtered,
      std::move(s), std::move(io), std::move(boot.enforcement)));
}

Result<std::unique_ptr<SessionSandbox>> GvisorDriver::OpenSession(const plan::Plan& plan,
                                                                  const PrepareRequest& preq) {
  auto parts = std::make_unique<gvisor::SessionParts>();
  parts->plan = plan;
  parts->options = &options_;
  parts->backend_mode = BackendMode(plan);
  parts->state = std::make_unique<gvisor::RunState>();
  RunResult boot;
  bool filtered = false;
  SAFEX_RETURN_IF_ERROR(BootAhead(plan, preq, /*session=*/true, "the session's sandbox",
                                  *parts->state, parts->io, &boot, &filtered));
  SAFEX_RETURN_IF_ERROR(gvisor::SetNonBlocking(parts->io.go.write.get()));
  parts->wire =
      gvisor::SessionWire(std::move(parts->io.go.write), std::move(parts->io.report.read));
  return std::unique_ptr<SessionSandbox>(std::make_unique<gvisor::GvisorSession>(
      preq.sandbox_id, PlanDigestOf(plan, preq.plan_digest), RealtimeNs(),
      std::move(boot.enforcement), std::move(parts)));
}

Result<std::unique_ptr<SessionSandbox>> GvisorDriver::OpenPreparedSession(
    std::unique_ptr<PreparedSandbox> prepared, const plan::Plan& plan) {
  auto* sandbox = dynamic_cast<gvisor::PooledSandbox*>(prepared.get());
  if (sandbox == nullptr) return Status::InvalidArgument("gvisor: not a gVisor pooled sandbox");
  if (plan::PlanDigest(plan) != sandbox->plan_digest()) {
    return Status::FailedPrecondition("gvisor: pooled sandbox " + sandbox->id() +
                                      " was made from another plan; not used");
  }
  SigpipeBlock sigpipe_block;
  if (!sandbox->Healthy() || !sandbox->io().report.read.valid()) {
    return Status::Unavailable("gvisor: pooled sandbox " + sandbox->id() +
                               " stopped while it waited");
  }
  auto parts = std::make_unique<gvisor::SessionParts>();
  parts->plan = plan;
  parts->options = &options_;
  parts->backend_mode = BackendMode(plan);
  parts->state = sandbox->TakeState();
  parts->io = sandbox->TakeIo();
  gvisor::RunState& s = *parts->state;
  // As a pooled run's hand-over (run_steps.h 6c): thawed, its CPU share back; what the boot and
  // the wait used is no command's.
  SAFEX_RETURN_IF_ERROR(s.Unpark());
  SAFEX_RETURN_IF_ERROR(s.cg.SetCpuPriority(/*low=*/false));
  SAFEX_RETURN_IF_ERROR(gvisor::SetNonBlocking(parts->io.go.write.get()));
  const char become = 's';
  if (write(parts->io.go.write.get(), &become, 1) != 1) {
    return Status::Unavailable("gvisor: pooled sandbox " + sandbox->id() +
                               " did not take the session's hand-over");
  }
  parts->wire =
      gvisor::SessionWire(std::move(parts->io.go.write), std::move(parts->io.report.read));
  Enforcement evidence = sandbox->enforcement();
  return std::unique_ptr<SessionSandbox>(std::make_unique<gvisor::GvisorSession>(
      sandbox->id(), sandbox->plan_digest(), sandbox->created_ns(), std::move(evidence),
      std::move(parts)));
}

std::string GvisorDriver::SandboxGeneration(const plan::Plan& plan) {
  std::string generation = PathIdentity(options_.runsc_path, true);
  for (const plan::Mount& m : plan.mounts) {
    if (m.kind == plan::MountKind::kBind) generation += PathIdentity(m.source, false);
  }
  return generation;
}

Result<RunResult> GvisorDriver::RunPrepared(std::unique_ptr<PreparedSandbox> prepared,
                                            const plan::Plan& plan, const RunRequest& req) {
  auto* sandbox = dynamic_cast<gvisor::PooledSandbox*>(prepared.get());
  if (sandbox == nullptr) return Status::InvalidArgument("gvisor: not a gVisor pooled sandbox");
  // 0. What a cold run refuses, and what only a pooled sandbox cannot take.
  SAFEX_RETURN_IF_ERROR(CheckRequest(plan, req));
  SAFEX_RETURN_IF_ERROR(CheckRunnable(plan, req, plan::Backend::kGvisor,
                                      static_cast<bool>(options_.network_provider)));
  if (PlanDigestOf(plan, req.plan_digest) != sandbox->plan_digest()) {
    return Status::FailedPrecondition("gvisor: pooled sandbox " + sandbox->id() +
                                      " was made from another plan; not used");
  }
  RunResult result;
  result.backend_mode = BackendMode(plan);
  result.enforcement = sandbox->enforcement();
  if (MissingProgram(plan, req, &result)) return result;
  const gvisor::RunContext c{plan, req, options_};
  SigpipeBlock sigpipe_block;
  if (!sandbox->Healthy()) {
    return Status::Unavailable("gvisor: pooled sandbox " + sandbox->id() +
                               " stopped while it waited");
  }
  // 6b'. The request's input snapshot into the stand-in the sandbox has bound since its boot
  //      (the gofer serves bind mounts uncached, so the program sees the files at once).
  SAFEX_RETURN_IF_ERROR(gvisor::PlaceInput(c, sandbox->state()));
  // 6c. The hand-over; from here on it is a cold run's 7-10 (the wall clock starts now).
  SAFEX_RETURN_IF_ERROR(gvisor::HandOver(c, sandbox->io(), sandbox->state()));
  return Finish(c, gvisor::LaunchOutcome::kStarted, sandbox->io(), sandbox->state(),
                std::move(result));
}

// Removes one stale run directory's contents: the runsc container, the run's cgroup (and any
// process still in it), the tmpfs mounts the driver made below it, then the directory.
// REQUIRES: the run's owner is dead (its lock taken by the caller, or known from a run record).
Status GvisorDriver::CleanRunDir(const Ready& ready, const std::string& name,
                                 const std::string& dir) {
  std::string errors;
  auto note = [&](const std::string& what, const Status& st) {
    if (st.ok()) return;
    errors += (errors.empty() ? "" : "; ") + what + ": " + st.ToString();
  };
  if (!name.starts_with("probe-")) {
    const std::string state = dir + "/state";
    bool has_state = false;
    for (const std::string& n : ListDirectoryOrEmpty(state))
      has_state = has_state || n.ends_with(".state");
    // A pooled sandbox waited frozen (run_steps.h, Park): thawed first, or runsc could not
    // reach it and its processes could not act on their kill.
    auto cg = ready.cgroups.Adopt(options_.cgroup_parent, name);
    if (cg.ok()) cg->SetFrozen(false).ok();
    if (has_state) {
      auto d = RunTool({options_.runsc_path, "--root=" + state, "delete", "--force", name},
                       std::chrono::milliseconds(10000));
      if (!d.ok()) note("runsc delete " + name, d.status());
    }
    if (cg.ok()) {
      note("cgroup " + name, cg->Destroy());
    } else if (cg.status().code() != Status::Code::kNotFound) {
      note("cgroup " + name, cg.status());
    }
    std::vector<std::string> mounts;
    for (const std::string& n : ListDirectoryOrEmpty(dir + "/out"))
      mounts.push_back(dir + "/out/" + n);
    mounts.push_back(dir + "/stdio");
    mounts.push_back(dir + "/bundle");
    for (const std::string& m : mounts) {
      // Security: only mounts the driver made below its own state root are unmounted here.
      if (umount2(m.c_str(), UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT) {
        if (umount2(m.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL) {
          note("umount " + m, Status::Errno("umount2", m, errno));
        }
      }
    }
  }
  note("remove " + dir, safex::RemoveTree(dir));
  if (!errors.empty()) return Status::Internal(errors);
  return Status::Ok();
}

Status GvisorDriver::CleanupStale(int* cleaned) {
  if (cleaned != nullptr) *cleaned = 0;
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  std::string errors;
  for (const std::string& name : ListDirectoryOrEmpty(options_.state_root)) {
    const std::string dir = options_.state_root + "/" + name;
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool probe = name.starts_with("probe-");
    if (!probe && !IsValidRunId(name)) continue;  // not ours
    if (IsPersistentEntry(name)) continue;        // kept on purpose (common/persistent_state.h)
    // Other components keep their own directories under the same root (e.g. drivers/net's
    // "net", whose slot records must outlive this cleanup): only a directory holding nothing but
    // what Run() creates there is a run directory.
    if (!probe && !LooksLikeRunDir(dir)) continue;
    UniqueFd lock;
    OwnerState owner = ProbeOwner(dir, &lock);
    if (owner == OwnerState::kAlive) continue;  // a live run owns it
    if (owner == OwnerState::kNoLock) {
      // No lock file: a crash between mkdir and creating the (already locked) lock file. Only
      // old directories are taken for stale.
      if (time(nullptr) - st.st_mtime < 60) continue;
    }
    Status st_clean = CleanRunDir(ready, name, dir);
    if (!st_clean.ok()) {
      errors += (errors.empty() ? "" : "; ") + name + ": " + st_clean.message();
    } else if (cleaned != nullptr) {
      ++*cleaned;
    }
  }
  if (!errors.empty()) return Status::Internal("gvisor cleanup: " + errors);
  return Status::Ok();
}

Status GvisorDriver::CleanupStaleRun(const std::string& run_id, bool* cleaned) {
  if (cleaned != nullptr) *cleaned = false;
  if (!IsValidRunId(run_id)) return Status::Ok();  // no run can have that id: nothing of ours
  SAFEX_ASSIGN_OR_RETURN(Ready ready, EnsureReady());
  const std::string dir = options_.state_root + "/" + run_id;
  struct stat st;
  if (lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    UniqueFd lock;
    if (ProbeOwner(dir, &lock) == OwnerState::kAlive) return Status::Ok();
    SAFEX_RETURN_IF_ERROR(CleanRunDir(ready, run_id, dir).With("gvisor cleanup of " + run_id));
    if (cleaned != nullptr) *cleaned = true;
    return Status::Ok();
  }
  // No directory: a cgroup can still be left when a removal stopped half-way.
  auto cg = ready.cgroups.Adopt(options_.cgroup_parent, run_id);
  if (cg.ok()) {
    SAFEX_RETURN_IF_ERROR(cg->Destroy().With("gvisor cleanup of cgroup " + run_id));
    if (cleaned != nullptr) *cleaned = true;
  } else if (cg.status().code() != Status::Code::kNotFound) {
    return cg.status().With("gvisor cleanup of cgroup " + run_id);
  }
  return Status::Ok();
}

}  // namespace safex::drivers
