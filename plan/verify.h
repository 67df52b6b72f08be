// The plan verifier: every invariant of the execution plan (docs/policy-language.md, "Plan
// invariants"). The compiler runs it on what it produces; the supervisor runs it again on the plan
// it is about to enforce. An empty result means the plan may run on a host with these ceilings.
//
// Codes (stable; E060-E089):
//   E060 format_version is not the one this build understands
//   E061 untrusted code on a backend that is not a strong boundary (native)
//   E062 backend not permitted by the operator's ceilings
//   E063 a limit is missing (zero)
//   E064 a limit exceeds the operator's ceiling
//   E065 mount target not absolute/normalised, "/" itself, or in /proc, /sys or /dev
//   E066 mount targets overlap (equal, or one inside another)
//   E067 bind source not absolute/normalised, a protected host path (or under or above one), an
//        operator-forbidden path, a socket, or a symlink to any of these
//   E068 mount flags: writable mount without nosuid+nodev, untrusted writable mount without noexec,
//        writable bind mount for untrusted code, source given for a non-bind mount
//   E069 tmpfs/output mount without a size cap, or a cap above the disk ceiling
//   E070 more than one input mount, or a writable one
//   E071 file validator path not absolute/normalised or not under an output mount
//   E072 egress entry malformed: bad host name or literal, port 0, a local-only name, duplicate
//   E073 egress literal address in a forbidden class (loopback, metadata, private, ...)
//   E074 environment: dynamic-loader variables (LD_*, GLIBC_TUNABLES)
//   E075 environment: invalid name or value
//   E076 seccomp rule names a syscall unknown to libseccomp on x86_64
//   E077 seccomp rules duplicated or not sorted by name
//   E078 seccomp errno value out of range (1..4095)
//   E079 output stream or validator without a size cap, or a cap above the stream's limit
//   E080 validator of unbounded cost (too many rules, pattern too long, json depth too large)
//   E081 validator regex does not compile under RE2
//   E082 validator json rule malformed (unknown type name, bad key)
//   E083 process: root inside for untrusted code, or a cwd that is not absolute/normalised
//   E084 backend options invalid (gVisor platform, microVM vcpus)
//   E085 output collection caps missing or above the disk ceiling
//   E086 policy name, sources or source digest malformed or inconsistent
//   E087 a string is not valid UTF-8 or contains NUL
//   E088 override record malformed (no field or no reason)
//   E089 too many entries (mounts, egress rules, env vars, syscall rules, validators)
#pragma once

#include <string>
#include <vector>

#include "plan/ceilings.h"
#include "plan/plan.h"

namespace safex::plan {

struct Violation {
  std::string code;     // "E064"
  std::string field;    // plan field path: "limits.memory_bytes", "mounts[2].target"
  std::string message;  // lower case, no trailing period
};

// Size bounds on a plan's lists and validators (part of the invariants).
inline constexpr size_t kMaxMounts = 64;
inline constexpr size_t kMaxEgress = 256;
inline constexpr size_t kMaxEnv = 256;
inline constexpr size_t kMaxEnvValueBytes = 32 * 1024;
inline constexpr uint32_t kMaxSessionExecs = 10000;
inline constexpr size_t kMaxSyscallRules = 512;
inline constexpr size_t kMaxValidators = 64;
inline constexpr size_t kMaxRegexPerValidator = 32;
inline constexpr size_t kMaxRegexBytes = 1024;
inline constexpr size_t kMaxReplacementBytes = 256;
inline constexpr uint64_t kMaxJsonDepth = 256;
inline constexpr size_t kMaxJsonRequired = 64;

// All violations, in plan field order. Reads the file system only to check that bind sources are
// not sockets or symlinks into protected paths (the supervisor re-runs this on the run host).
std::vector<Violation> Verify(const Plan& plan, const Ceilings& ceilings);

// Helpers shared with the compiler.
// True for "/a/b": absolute, no empty, "." or ".." components, no trailing slash (except "/").
bool IsNormalAbsolutePath(const std::string& p);
// True when `p` equals `dir` or is inside it (both normalised absolute paths).
bool PathWithin(const std::string& p, const std::string& dir);
// A DNS host name (RFC 1123 labels, at most 253 bytes, not all-numeric last label).
bool IsValidDnsName(const std::string& host);
// Known to libseccomp as an x86_64 syscall.
bool IsKnownSyscall(const std::string& name);
// Every x86_64 syscall name libseccomp knows, sorted (for "did you mean" help).
const std::vector<std::string>& KnownSyscalls();
// Host paths no plan may bind (besides the operator's list).
const std::vector<std::string>& ProtectedHostPaths();

}  // namespace safex::plan
