// The execution plan: the contract between the compiler (which produces it from policy text), the
// supervisor (which verifies it again before every run) and the drivers (which enforce it).
// A plain value type. Units are base units: bytes and nanoseconds. Drivers never see policy text.
//
// Serialisation (canonical JSON, digest) and verification live in plan_json.h and verify.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/policy_test.h"

namespace safex::plan {

inline constexpr int kPlanFormatVersion = 1;

enum class Trust { kUntrusted, kTrusted };
// gvisor and microvm are the strong boundaries; native (namespaces + seccomp + cgroups + Landlock)
// is admitted only for trust = trusted and only where the operator's ceilings allow it.
enum class Backend { kGvisor, kMicrovm, kNative };

struct GvisorOptions {
  std::string platform = "systrap";  // systrap | ptrace (kvm hangs under nested virtualisation)
};

enum class KvmMode { kAuto, kRequire, kNever };
struct MicrovmOptions {
  uint32_t vcpus = 1;
  KvmMode kvm = KvmMode::kAuto;
};

// Every limit is required, finite and > 0 (see verify.h).
struct Limits {
  uint64_t wall_time_ns = 0;  // the supervisor kills the sandbox at this deadline (exit 124)
  uint64_t cpu_time_ns = 0;   // total CPU time of the run (all threads), enforced from outside
  uint64_t memory_bytes = 0;  // memory of the sandbox (cgroup); exceeding it kills (exit 137)
  uint64_t pids = 0;  // processes/threads the code may create (RLIMIT_NPROC + cgroup backstop)
  uint64_t open_files = 0;  // RLIMIT_NOFILE
  uint64_t output_bytes =
      0;                    // stdout + stderr captured; more than this stops the run (output-limit)
  uint64_t disk_bytes = 0;  // largest file (RLIMIT_FSIZE) and default size cap of writable mounts
  uint32_t cpus = 0;        // CPU rate: at most this many CPUs' worth (cgroup quota)
};

enum class MountKind {
  kBind,    // a host path, read-only unless the policy says otherwise (trusted only)
  kTmpfs,   // fresh, size-capped, empty at start
  kInput,   // the run request's input directory, read-only
  kOutput,  // a fresh, size-capped directory whose contents the supervisor collects afterwards
};

struct Mount {
  MountKind kind = MountKind::kBind;
  std::string target;  // absolute, normalised path inside the sandbox
  std::string source;  // kBind: absolute host path; empty for the others
  bool read_only = true;
  uint64_t size_bytes = 0;  // kTmpfs and kOutput: size cap; 0 for kBind and kInput
  bool nosuid = true;
  bool nodev = true;
  bool noexec = false;  // writable mounts for untrusted code must be noexec
};

enum class Protocol { kTcp, kUdp };
struct EgressRule {
  std::string host;  // a DNS name or a literal IPv4/IPv6 address (no ranges, no wildcards)
  uint16_t port = 0;
  Protocol protocol = Protocol::kTcp;
};

struct Network {
  // Empty means no network at all (gVisor --network=none, no device in a microVM).
  std::vector<EgressRule> egress;
};

struct Process {
  uint32_t uid = 65534;  // non-root inside unless the policy says otherwise
  uint32_t gid = 65534;
  std::string cwd = "/";
};

enum class SyscallAction { kAllow, kErrno, kKill, kLog };
struct SyscallRule {
  std::string name;  // a syscall name known to libseccomp for x86_64
  SyscallAction action = SyscallAction::kErrno;
  int errno_value = 1;  // EPERM; used when action == kErrno
};
struct Seccomp {
  SyscallAction default_action = SyscallAction::kAllow;
  int default_errno = 1;
  std::vector<SyscallRule> rules;  // sorted by name, one rule per name
};

enum class ValidatorTarget { kStdout, kStderr, kFile };
enum class OverflowAction { kTruncate, kReject };
enum class ControlChars { kAllow, kStrip, kReject };
enum class RegexAction { kReject, kRedact };

struct RegexRule {
  std::string pattern;  // RE2 syntax (linear time)
  RegexAction action = RegexAction::kReject;
  std::string replacement = "[REDACTED]";  // used when action == kRedact
};

struct JsonRule {
  uint64_t max_depth = 64;
  // Required top-level keys and their JSON types: string|number|integer|boolean|object|array|null.
  std::map<std::string, std::string> required;
};

struct Validator {
  ValidatorTarget target = ValidatorTarget::kStdout;
  std::string path;  // kFile: a path or glob under an output mount; empty otherwise
  uint64_t max_bytes = 0;
  OverflowAction on_overflow = OverflowAction::kReject;
  bool utf8 = false;
  ControlChars control = ControlChars::kAllow;
  uint64_t max_lines = 0;  // 0: no line cap
  std::vector<RegexRule> regex;
  std::optional<JsonRule> json;
};

struct CallerChoices {
  std::vector<std::string> env;  // variable names, sorted
  std::vector<std::string> cwd;  // absolute, normalised directories, sorted
  bool empty() const { return env.empty() && cwd.empty(); }
};

// Whether the service may keep one sandbox of this plan for several commands of one caller's
// task (a session, docs/policy-language.md `session`), and for how long. Not allowed: every
// request starts from nothing. In the JSON only when allowed, so plans without it keep their
// digests.
// What `safex-oci` (docs/kubernetes.md) lets a container of this policy be: the images it may
// come from, by name as containerd passes it (io.kubernetes.cri.image-name; a digest never
// reaches the runtime). Each entry is a name, or a prefix ending in `*`. Empty: any image. In
// the JSON only when non-empty, so plans without it keep their digests.
struct ContainerRules {
  std::vector<std::string> images;  // sorted, unique
  bool empty() const { return images.empty(); }
};
// Whether `image` is one of `rules.images` (exact, or after a `*` entry's prefix).
bool ImageAllowed(const ContainerRules& rules, const std::string& image);

struct SessionLimits {
  bool allowed = false;
  uint32_t max_execs = 0;         // commands one session may run
  uint64_t idle_timeout_ns = 0;   // a session without a command for this long is destroyed
  uint64_t max_lifetime_ns = 0;   // and every session at this age
};

// Caps on what the supervisor collects from output mounts after the run.
struct OutputCollection {
  uint64_t max_files = 0;
  uint64_t max_total_bytes = 0;
};

// An explicit, reasoned loosening of an inherited value; review tools flag every one.
struct Override {
  std::string field;  // plan field path, e.g. "limits.memory_bytes"
  std::string reason;
  std::string location;  // "file:line:col"
};

struct SourceFile {
  std::string path;    // as resolved on the compiling host
  std::string sha256;  // of the file's bytes
};

struct Plan {
  int format_version = kPlanFormatVersion;
  std::string policy_name;
  std::vector<SourceFile> sources;  // the policy first, then each ancestor it extends
  std::string source_digest;        // SHA-256 over the sources' digests, in order

  Trust trust = Trust::kUntrusted;
  Backend backend = Backend::kGvisor;
  GvisorOptions gvisor;
  MicrovmOptions microvm;

  Limits limits;
  Process process;
  std::vector<Mount> mounts;  // ordered as they are applied
  Network network;
  std::map<std::string, std::string> env;  // exactly the environment of the sandboxed process
  // What a caller of the service may choose per run (docs/api.md), nothing else: the names of
  // environment variables it may set (added to env, or replacing the policy's value) and the
  // directories its working directory may be (or be below). In the JSON only when non-empty, so
  // plans without them keep their digests.
  CallerChoices caller;
  ContainerRules container;
  SessionLimits session;
  Seccomp seccomp;
  std::vector<Validator> validators;
  OutputCollection outputs;

  std::vector<Override> overrides;
  // The policy's tests, inherited ones first (plan/policy_test.h). In the JSON only when there
  // are some, so a plan without tests keeps the digest it had before tests existed.
  std::vector<PolicyTest> tests;
  // Which file:line:col set each field, keyed by field path ("limits.memory_bytes", "mounts[2]").
  std::map<std::string, std::string> provenance;
};

// Names used in JSON, diagnostics and the audit log.
const char* TrustName(Trust t);
const char* BackendName(Backend b);
const char* MountKindName(MountKind k);
const char* ProtocolName(Protocol p);
const char* SyscallActionName(SyscallAction a);
const char* ValidatorTargetName(ValidatorTarget t);
const char* KvmModeName(KvmMode m);

}  // namespace safex::plan
