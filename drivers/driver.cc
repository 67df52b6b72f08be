#include "drivers/driver.h"

#include <sys/stat.h>
#include <time.h>

#include <string>

#include "common/run_id.h"
#include "plan/plan_json.h"

namespace safex::drivers {

// What every backend needs: execve(2) takes NUL-terminated strings, so a NUL byte inside an
// argument would silently cut it. Any other byte is legal on Linux and carried as it is (a
// backend whose runtime cannot carry some bytes says so in its own CheckRequest).
Status Driver::CheckRequest(const plan::Plan& /*plan*/, const RunRequest& request) const {
  if (request.argv.empty() || request.argv[0].empty()) {
    return Status::InvalidArgument("argv is empty");
  }
  for (size_t i = 0; i < request.argv.size(); ++i) {
    if (request.argv[i].find('\0') != std::string::npos) {
      return Status::InvalidArgument("argv[" + std::to_string(i) +
                                     "] contains a NUL byte, which execve cannot carry");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<PreparedSandbox>> Driver::Prepare(const plan::Plan& /*plan*/,
                                                         const PrepareRequest& /*request*/) {
  return Status::FailedPrecondition(std::string(name()) + ": this backend has no warm pool");
}

Result<RunResult> Driver::RunPrepared(std::unique_ptr<PreparedSandbox> /*sandbox*/,
                                      const plan::Plan& /*plan*/, const RunRequest& /*request*/) {
  return Status::FailedPrecondition(std::string(name()) + ": this backend has no warm pool");
}

Result<std::unique_ptr<SessionSandbox>> Driver::OpenSession(const plan::Plan& /*plan*/,
                                                            const PrepareRequest& /*request*/) {
  return Status::FailedPrecondition(std::string(name()) + ": this backend has no sessions");
}

Result<std::unique_ptr<SessionSandbox>> Driver::OpenPreparedSession(
    std::unique_ptr<PreparedSandbox> /*sandbox*/, const plan::Plan& /*plan*/) {
  return Status::FailedPrecondition(std::string(name()) + ": this backend has no sessions");
}

std::string Driver::SandboxGeneration(const plan::Plan& /*plan*/) { return ""; }

Status CheckRunnable(const plan::Plan& plan, const RunRequest& req, plan::Backend backend,
                     bool has_network_provider) {
  const std::string name = plan::BackendName(backend);
  if (plan.backend != backend) {
    return Status::InvalidArgument(name + " driver given a plan for backend " +
                                   plan::BackendName(plan.backend));
  }
  if (!IsValidRunId(req.run_id)) {
    return Status::InvalidArgument(
        "run id must be 1-64 of [a-z0-9-] starting with a letter or digit: '" + req.run_id + "'");
  }
  const plan::Limits& lim = plan.limits;
  if (lim.wall_time_ns == 0 || lim.cpu_time_ns == 0 || lim.memory_bytes == 0 || lim.pids == 0 ||
      lim.open_files == 0 || lim.output_bytes == 0 || lim.disk_bytes == 0 || lim.cpus == 0) {
    return Status::InvalidArgument("every limit must be set (is the plan verified?)");
  }
  if (!plan.network.egress.empty() && !has_network_provider) {
    return Status::Unavailable(name +
                               ": the plan grants egress but no network provider is configured; "
                               "refusing rather than running without the egress rules");
  }
  return Status::Ok();
}

const char* LimitHitName(LimitHit l) {
  switch (l) {
    case LimitHit::kNone:
      return "none";
    case LimitHit::kWallTime:
      return "wall_time";
    case LimitHit::kCpuTime:
      return "cpu_time";
    case LimitHit::kMemory:
      return "memory";
    case LimitHit::kPids:
      return "pids";
    case LimitHit::kOutput:
      return "output";
    case LimitHit::kDisk:
      return "disk";
    case LimitHit::kOpenFiles:
      return "open_files";
  }
  return "unknown";
}

int64_t RealtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::string PlanDigestOf(const plan::Plan& plan, const std::string& given) {
  return given.empty() ? plan::PlanDigest(plan) : given;
}

std::string PathIdentity(const std::string& path, bool with_size) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return path + " missing; ";
  std::string id = path + " " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " +
                   std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  if (with_size) id += " " + std::to_string(st.st_size);
  return id + "; ";
}

}  // namespace safex::drivers
