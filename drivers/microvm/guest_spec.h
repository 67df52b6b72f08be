// The messages of the host <-> guest protocol, as value types with their encodings (wire.h).
// Shared by the host driver and the guest agent; standard library only.
//
// GuestSpec is the part of a plan the guest needs, in the guest's own terms (which disk holds what,
// which path inside the rootfs image backs each bind mount). The host builds it from a verified
// plan (guest_spec_builder.h); the guest never sees policy text or the plan's JSON, and the
// encoding is deliberately compact and closed: an unknown field is a decode error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace safex::microvm {

// virtio-blk serial numbers by which the guest finds its disks (/sys/block/vd*/serial), so that
// nothing depends on the order in which the kernel probes the devices. Rootfs disks are numbered:
// "safex-rootfs-0", "safex-rootfs-1", ... (one image per bind root, see rootfs_image.h).
inline constexpr const char* kRootfsDiskSerialPrefix = "safex-rootfs-";
inline constexpr const char* kInputDiskSerial = "safex-input";
// At most this many rootfs disks (QEMU microvm has 24 virtio-mmio transports; the channel, the
// input disk and a network device take three).
inline constexpr uint32_t kMaxRootfsDisks = 16;

enum class GuestMountKind : uint8_t { kBind = 0, kTmpfs = 1, kInput = 2, kOutput = 3 };

struct GuestMount {
  GuestMountKind kind = GuestMountKind::kBind;
  std::string target;      // absolute, normalised path inside the workload's root
  uint32_t disk = 0;       // kBind: which rootfs disk ("safex-rootfs-<disk>")
  std::string image_path;  // kBind: absolute path inside that disk's image; "" otherwise
  bool is_file = false;    // kBind: the source is a regular file (the mount point is a file)
  bool read_only = true;
  bool nosuid = true;
  bool nodev = true;
  bool noexec = false;
  uint64_t size_bytes = 0;  // kTmpfs, kOutput
};

// Mirrors plan::SyscallAction (values are part of the protocol).
enum class GuestSyscallAction : uint8_t { kAllow = 0, kErrno = 1, kKill = 2, kLog = 3 };

struct GuestSyscallRule {
  std::string name;
  GuestSyscallAction action = GuestSyscallAction::kErrno;
  int32_t errno_value = 1;
};

struct GuestNetwork {
  std::string address;  // dotted IPv4 of the guest's eth0
  std::string gateway;  // dotted IPv4 of the default route
  uint32_t prefix = 30;
};

struct GuestSpec {
  std::vector<std::string>
      argv;  // verbatim; argv[0] is resolved with `path_search` if it has no '/'
  std::vector<std::string> env;  // "NAME=value", exactly the program's environment
  std::string path_search;       // colon-separated directories for argv[0] without '/'
  uint32_t uid = 65534;
  uint32_t gid = 65534;
  std::string cwd = "/";
  std::string hostname = "sandbox";

  uint64_t cpu_time_ns = 0;
  uint64_t memory_bytes = 0;
  uint64_t pids = 0;
  uint64_t open_files = 0;
  uint64_t output_bytes = 0;  // stdout + stderr
  uint64_t disk_bytes = 0;    // RLIMIT_FSIZE
  uint32_t cpus = 0;          // cpu.max quota in whole CPUs; 0: no quota

  std::vector<GuestMount> mounts;  // in the order they are applied

  GuestSyscallAction seccomp_default = GuestSyscallAction::kAllow;
  int32_t seccomp_default_errno = 1;
  std::vector<GuestSyscallRule> seccomp_rules;

  // Caps on what the guest sends back from output mounts (0: only the mount's size bounds it).
  uint64_t max_output_files = 0;
  uint64_t max_output_bytes = 0;

  // Files written into the workload root's /etc (name without '/', content), e.g. passwd.
  std::vector<std::pair<std::string, std::string>> etc_files;

  bool has_stdin = false;  // kStdinData frames follow the spec, then kStdinEnd
  std::optional<GuestNetwork> network;
  // A pooled VM's spec, sent before any request exists: argv is empty and has_stdin false. The
  // agent sets up everything else (its root, network, cgroup, the workload's root and seccomp
  // program), says kSetUp and waits for the kRequest that brings argv and stdin.
  bool request_later = false;
};

std::string EncodeSpec(const GuestSpec& spec);
// Strict: trailing bytes, out-of-range enums and over-long lists are errors.
std::optional<GuestSpec> DecodeSpec(std::string_view payload);

// What a request adds to a spec sent with request_later: the program's argv (verbatim, as
// GuestSpec::argv) and whether kStdinData frames follow, then kStdinEnd.
struct GuestRequest {
  std::vector<std::string> argv;
  bool has_stdin = false;
};

std::string EncodeRequest(const GuestRequest& request);
// Strict as DecodeSpec; an empty argv is an error.
std::optional<GuestRequest> DecodeRequest(std::string_view payload);

// Which in-guest limit stopped or constrained the program (mapped to drivers::LimitHit by the
// host).
enum class GuestLimit : uint32_t { kNone = 0, kCpuTime = 1, kMemory = 2, kPids = 3, kOutput = 4 };

struct ExitReport {
  int32_t exit_code = -1;   // the program's exit status, or -1 when a signal ended it
  int32_t term_signal = 0;  // the signal that ended it, 0 otherwise
  GuestLimit limit = GuestLimit::kNone;
  uint64_t cpu_ns = 0;             // the workload cgroup's cpu.stat usage
  uint64_t peak_memory_bytes = 0;  // the workload cgroup's memory.peak
  uint64_t oom_kills = 0;
  uint64_t fork_failures = 0;  // pids.events "max"
  uint64_t stdout_total = 0;   // bytes the program wrote, captured or not
  uint64_t stderr_total = 0;
  std::string
      detail;  // why the program did not run (exec failure) or which limit, for the operator
};

std::string EncodeExit(const ExitReport& r);
std::optional<ExitReport> DecodeExit(std::string_view payload);

// What the agent sees while the program runs, sent about once a second of guest time until the
// exit report. Diagnostics only: once the program has started the guest is untrusted, so nothing
// here decides a verdict. It lets a wall-time kill say whether the program was running (its CPU
// time grew, its state), sleeping (where in the kernel), or whether the guest itself stalled
// (the heartbeats stopped, or the guest clock fell behind the host's).
struct Heartbeat {
  uint64_t guest_ns = 0;        // guest CLOCK_BOOTTIME when it was sent
  uint64_t cpu_ns = 0;          // the workload cgroup's CPU time so far
  bool program_exited = false;  // the agent reaped the program and is draining its output
  // The program's process: its state letter and the kernel function it waits in ("S do_wait"),
  // or "exited". At most kMaxHeartbeatState bytes.
  std::string program_state;
};
inline constexpr size_t kMaxHeartbeatState = 256;

std::string EncodeHeartbeat(const Heartbeat& h);
std::optional<Heartbeat> DecodeHeartbeat(std::string_view payload);

enum class FileKind : uint8_t { kDirectory = 1, kRegular = 2, kSymlink = 3, kFifo = 4 };

// One entry of an output mount, in a pre-order walk (a directory before its contents).
struct FileHeader {
  uint32_t mount_index = 0;  // index into GuestSpec::mounts (a kOutput mount)
  FileKind kind = FileKind::kRegular;
  uint32_t mode = 0;        // permission bits only
  uint64_t size = 0;        // kRegular: the file's size in the guest (its data may be cut short)
  std::string path;         // relative to the mount root, '/'-separated, no "." or ".." components
  std::string link_target;  // kSymlink
};

std::string EncodeFileHeader(const FileHeader& h);
std::optional<FileHeader> DecodeFileHeader(std::string_view payload);

struct Hello {
  uint32_t protocol_version = 0;
  std::string kernel_release;
  // Guest clock (CLOCK_BOOTTIME): when the agent started (= the kernel's boot time) and how long
  // loading modules and finding the channel took. For the boot benchmark and the audit detail.
  uint64_t agent_start_ns = 0;
  uint64_t modules_ns = 0;
};

std::string EncodeHello(const Hello& h);
std::optional<Hello> DecodeHello(std::string_view payload);

}  // namespace safex::microvm
