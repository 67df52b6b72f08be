// The operator's host config: the ceilings no policy may exceed on this host, written in the policy
// language. Default location /etc/safex/host.policy; when the file is absent the built-in
// plan::DefaultCeilings() apply.
//
//   host {
//     ceilings {                       # each optional; an absent one keeps its built-in default
//       wall_time = 1h  cpu_time = 1h  memory = 8GiB  pids = 4096
//       open_files = 65536  output = 1GiB  disk = 16GiB  cpus = 64
//     }
//     backends = [gvisor, microvm]     # add `native` to let trusted policies use it; or, with
//                                      # settings (a block per backend offered, all optional):
//     backends {
//       gvisor  { runsc = "/usr/local/bin/runsc"  platforms = [systrap, ptrace] }
//       microvm { qemu = "/usr/bin/qemu-system-x86_64"  kernel = "..."  initramfs = "..."
//                 state_root = "/var/lib/safex/microvm"  kvm = auto   # auto | require | never
//                 tcg_for_untrusted = false }  # TCG is no boundary: true only on test hosts
//       native  { }
//     }
//     cgroups { parent = "safex"  memory = 16GiB  pids = 8192  cpus = 2 }   # all sandboxes
//     together allow_egress_ranges = ["10.20.0.0/16"]   # private/CGNAT ranges policies may reach
//     forbid_mounts = ["/srv/secrets"]         # host paths no policy may bind
//   }
//
// Sections are dispatched through one table (kSections in host_config.cc): a later `service { }`
// section (allowed users per policy, policy dir, address pool, concurrency) adds one entry there
// and one field to HostConfig. Unknown sections and keys are errors (E020), as in policies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "dsl/diagnostics.h"
#include "plan/backend_settings.h"
#include "plan/ceilings.h"

namespace safex::compiler {

inline constexpr const char* kDefaultHostConfigPath = "/etc/safex/host.policy";

// Per-run networks for plans that grant egress (drivers/net; docs/network.md).
//   network {
//     pool = "198.18.128.0/17"       # IPv4 range for the runs' links, one /30 per run
//     uplink = "/run/netns/uplink"   # namespace that carries permitted traffic on ("" = the
//     host's) manage_ip_forward = true       # turn forwarding on in the uplink when a run needs it
//     lease_dir = "/run/safex/net"   # the host's address leases: one place for every instance
//   }
struct NetworkSettings {
  std::string pool = "198.18.128.0/17";
  // Host-wide, never per instance: `safex run` and every `safex serve` (whatever its state dir)
  // lease addresses from the same directory, so no two runs on the host get the same address.
  std::string lease_dir = "/run/safex/net";
  std::string uplink_netns;
  bool manage_ip_forward = true;
};

// The daemon (`safex serve`; docs/operating.md). Every key is optional:
//   service {
//     policy_dir = "/etc/safex/policies"   # request "name" -> <policy_dir>/<name>.policy
//     socket = "/run/safex/safex.sock"
//     socket_group = "safex"               # group owning the socket (name or number); "" = root's
//     socket_mode = "0660"                 # octal; no execute bits
//     state_dir = "/run/safex"             # sandbox state of the runs (as `safex run
//     --state-root`) audit_db = "/var/lib/safex/audit.db" max_concurrent = 4                   #
//     runs at once (worker threads) max_queue = 16                       # accepted requests
//     waiting for a worker; full -> 503 max_connections = 64                 # open client
//     connections; more are closed at once max_request = 8MiB                   # request body
//     (Content-Length) cap max_argv = 256   max_argv_bytes = 64KiB max_stdin = 1MiB # decoded
//     max_input_files = 64   max_input_bytes = 4MiB   # decoded, all files together
//     request_timeout = 10s                # a request must arrive whole within this (slowloris)
//     header_timeout = 2s                  # ... and its head (request line + headers) within this
//     max_connections_per_uid = 8          # open connections of any one uid
//     max_connections_unlisted = 4         # of all callers that no allow rule names, together
//     max_buffered = 64MiB                 # request bodies held in memory, all connections
//     refusal_rate = 60   refusal_burst = 20   # refusals recorded one by one per uid (per minute);
//                                          # more are counted and recorded as one summary
//     refusal_argv_bytes = 4KiB            # argv kept in a refusal's record (digest of the rest)
//     audit_reserve = 256MiB               # below this much free space refusals are only counted
//     audit_check_interval = 10m           # full integrity check of the audit log
//     drain_timeout = 30s                  # SIGTERM: runs may finish this long, then are killed
//     pool "python-untrusted" { size = 4  max_idle = 10m }   # warm pool (docs/operating.md)
//     pool_memory = 4GiB                   # pooled sandboxes' memory limits, all together
//     max_sessions = 16   max_sessions_per_uid = 4   # live agent sessions (docs/api.md)
//     audit_ship_to = "host=/run/postgresql dbname=audit user=node1"   # fleet audit; no password
//     audit_ship_interval = 60s            # how often the audit log is shipped (docs/audit.md)
//     allow "python-untrusted" { users = ["alice", 1001]  groups = ["ci"] }
//     allow "*" { users = ["root"] }       # "*": every policy in policy_dir
//   }
// Nothing is allowed unless an `allow` rule says so (root included).
struct Principal {
  std::string name;            // a user or group name, resolved when the daemon starts
  std::optional<uint32_t> id;  // set when written as a number
};

struct AllowRule {
  std::string policy;  // a policy name ([a-z0-9-]+) or "*"
  std::vector<Principal> users;
  std::vector<Principal> groups;
  // Users who may see, follow and fetch the files of other callers' runs of this policy through
  // the runs API (docs/api.md), without running anything themselves.
  std::vector<Principal> auditors;
};

// A warm pool of single-use sandboxes for one policy (supervisor/serve/sandbox_pool.h).
struct PoolRule {
  std::string policy;                         // a policy name ([a-z0-9-]+), never "*"
  uint32_t size = 0;                          // sandboxes kept ready
  uint64_t max_idle_ns = 600'000'000'000ull;  // a ready sandbox older than this is replaced
};

struct ServiceSettings {
  std::string policy_dir = "/etc/safex/policies";
  std::string socket = "/run/safex/safex.sock";
  std::string socket_group;
  uint32_t socket_mode = 0660;
  std::string state_dir = "/run/safex";
  std::string audit_db = "/var/lib/safex/audit.db";
  uint32_t max_concurrent = 4;
  uint32_t max_queue = 16;
  uint32_t max_connections = 64;
  uint64_t max_request_bytes = 8ull << 20;
  uint32_t max_argv = 256;
  uint64_t max_argv_bytes = 64ull << 10;
  uint64_t max_stdin_bytes = 1ull << 20;
  uint32_t max_input_files = 64;
  uint64_t max_input_bytes = 4ull << 20;
  uint64_t request_timeout_ns = 10'000'000'000ull;
  uint64_t header_timeout_ns = 2'000'000'000ull;
  uint32_t max_connections_per_uid = 8;
  uint32_t max_connections_unlisted = 4;
  uint64_t max_buffered_bytes = 64ull << 20;
  uint32_t refusal_rate_per_minute = 60;
  uint32_t refusal_burst = 20;
  uint64_t refusal_argv_bytes = 4096;
  uint64_t audit_reserve_bytes = 256ull << 20;
  uint64_t audit_check_interval_ns = 600'000'000'000ull;
  uint64_t drain_timeout_ns = 30'000'000'000ull;
  // The runs API (docs/api.md): how long a finished run's result, events and output files stay
  // with the service, how many runs it holds, how many bytes of output files all of them keep,
  // and the largest file one download may return.
  uint64_t results_ttl_ns = 600'000'000'000ull;
  uint32_t max_retained_runs = 1000;
  uint64_t results_max_bytes = 256ull << 20;
  uint64_t max_download_bytes = 64ull << 20;
  std::vector<AllowRule> allow;
  std::vector<PoolRule> pools;
  // The memory limits of every pooled sandbox together (ready or booting): a pool that would
  // pass it is kept smaller (and says so in the service log).
  uint64_t pool_memory_bytes = 4ull << 30;
  // Agent sessions (docs/api.md "Sessions"): live sessions of every caller, and of one uid.
  uint32_t max_sessions = 16;
  uint32_t max_sessions_per_uid = 4;
  // The fleet audit (docs/audit.md "Fleet"): the central database this host's audit log is
  // shipped to ("" = not shipped), and how often.
  std::string audit_ship_to;
  uint64_t audit_ship_interval_ns = 60'000'000'000ull;
};

// The node's OCI runtime (`safex-oci`, driven by containerd's runc shim; docs/kubernetes.md).
// Which policies a container may run under is the node operator's choice, made here per
// Kubernetes namespace (read from containerd's io.kubernetes.cri.sandbox-namespace annotation,
// never from a pod annotation); a pod's `safex.dev/policy` annotation only picks within the set.
//   oci {
//     policy_dir = "/etc/safex/policies"     # policy "name" -> <policy_dir>/<name>.policy
//     audit_db = "/var/lib/safex/audit.db"
//     audit_key = "/var/lib/safex/audit.key"
//     state_dir = "/run/safex/oci"           # the containers' sandbox state (as --state-root)
//     runc = "/usr/sbin/runc"                # a pod's sandbox (pause) container is handed to it
//     namespace "agents" { policies = ["python-untrusted"]  default = "python-untrusted" }
//     namespace "*" { policies = ["shell-untrusted"] }   # any other (and none: plain `ctr`)
//   }
// Without an `oci` section every container is refused.
struct OciNamespaceRule {
  std::string name;                   // a Kubernetes namespace ([a-z0-9-], at most 63) or "*"
  std::vector<std::string> policies;  // policy names ([a-z0-9-]+), at least one
  std::string default_policy;         // one of policies; "" : a pod must name one
};

struct OciSettings {
  bool present = false;  // the host config has an `oci` section
  std::string policy_dir = "/etc/safex/policies";
  std::string audit_db = "/var/lib/safex/audit.db";
  std::string audit_key = "/var/lib/safex/audit.key";
  std::string state_dir = "/run/safex/oci";
  std::string runc = "/usr/sbin/runc";
  std::vector<OciNamespaceRule> namespaces;
};

struct HostConfig {
  plan::Ceilings ceilings = plan::DefaultCeilings();  // allowed_backends: the backends offered
  plan::BackendSettings backends;
  plan::CgroupSettings cgroups;
  NetworkSettings network;
  ServiceSettings service;
  OciSettings oci;
};

// Parses host config text. Returns false and appends diagnostics (all of them) on error.
bool ParseHostConfig(const std::string& path, const std::string& text, HostConfig* out,
                     std::vector<dsl::Diagnostic>* diagnostics);

// Reads the host config at `path`. Absent file -> DefaultCeilings(). Any other problem is an
// InvalidArgument whose message holds the rendered diagnostics.
Result<plan::Ceilings> LoadHostConfig(const std::string& path = kDefaultHostConfigPath);
// The whole host config (ceilings and every other section); absent file -> defaults.
Result<HostConfig> LoadHostConfigFile(const std::string& path = kDefaultHostConfigPath);

}  // namespace safex::compiler
