// What a sandbox shows of itself from inside, just before the program's exec: the raw
// /proc/self/status, /proc/self/limits and /proc/self/mountinfo of the process that is about to
// become the program, read under everything the sandbox applies (uid, capabilities, seccomp,
// rlimits, mount namespace). gVisor's launcher (gvisor/launch_report.h) and the microVM guest
// agent's workload child send it in this framing; the host parses it and compares each field
// with the plan (drivers/enforcement.h) before it lets the program start.
//
// Framing: "SAFEX-LAUNCH 1\n", then for each of status, limits, mountinfo "NAME LENGTH\n" and
// LENGTH bytes (at most 64 KiB each; 0 when unreadable), then "end\n".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "drivers/enforcement.h"
#include "plan/plan.h"

namespace safex::drivers {

struct SandboxReport {
  std::string status;     // /proc/self/status
  std::string limits;     // /proc/self/limits
  std::string mountinfo;  // /proc/self/mountinfo
};

// kUnavailable while `bytes` is an incomplete report (read more), kDataLoss when it is not one.
Result<SandboxReport> ParseSandboxReport(std::string_view bytes);

// What a backend sets up besides the plan's mounts, and what it applies.
struct ReportExpectations {
  // "TARGET ro|rw[ noexec]" of each mount the backend adds (its /proc, /dev, the root, ...).
  std::vector<std::string> infrastructure_mounts;
  bool filtered = true;  // a seccomp filter is installed
  // The rlimits the backend set, soft and hard alike, by their /proc/self/limits names
  // ("Max open files"); compared in this order.
  std::vector<std::pair<std::string, uint64_t>> rlimits;
  std::string source;  // who read it: "launcher inside the sandbox, before the program's exec"
};

// "TARGET ro|rw[ noexec]", the form mounts are compared in.
std::string MountLine(const std::string& target, bool read_only, bool noexec);

// Adds the fields the report shows, each compared with what the plan implies: process.identity,
// process.capabilities, seccomp.mode, rlimits (core, file size, open files, processes), mounts
// (target, ro/rw, noexec of every mount), and mounts.sha256.
void AddSandboxReportEvidence(const plan::Plan& plan, const ReportExpectations& x,
                              const SandboxReport& report, Enforcement* e);

}  // namespace safex::drivers
