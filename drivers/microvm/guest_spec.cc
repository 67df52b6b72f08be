#include "drivers/microvm/guest_spec.h"

#include "drivers/microvm/wire.h"

namespace safex::microvm {
namespace {

// Upper bounds on list lengths accepted by the decoders (far above what a verified plan holds).
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxEnv = 4096;
constexpr size_t kMaxMounts = 256;
constexpr size_t kMaxRules = 1024;
constexpr size_t kMaxEtcFiles = 16;
constexpr uint32_t kSpecMagic = 0x53465853;     // "SXFS"
constexpr uint32_t kRequestMagic = 0x51525853;  // "SXRQ"

bool Bool(Decoder& d, bool* b) {
  uint8_t v = 0;
  if (!d.U8(&v)) return false;
  if (v > 1) {
    d.Fail();
    return false;
  }
  *b = v == 1;
  return true;
}

bool Action(Decoder& d, GuestSyscallAction* a) {
  uint8_t v = 0;
  if (!d.U8(&v)) return false;
  if (v > static_cast<uint8_t>(GuestSyscallAction::kLog)) {
    d.Fail();
    return false;
  }
  *a = static_cast<GuestSyscallAction>(v);
  return true;
}

// The message's first u32, which says what it is: a spec is never read as a request.
bool Magic(Decoder& d, uint32_t want) {
  uint32_t magic = 0;
  return d.U32(&magic) && magic == want;
}

}  // namespace

std::string EncodeSpec(const GuestSpec& s) {
  Encoder e;
  e.U32(kSpecMagic);
  e.StrList(s.argv);
  e.StrList(s.env);
  e.Str(s.path_search);
  e.U32(s.uid);
  e.U32(s.gid);
  e.Str(s.cwd);
  e.Str(s.hostname);
  e.U64(s.cpu_time_ns);
  e.U64(s.memory_bytes);
  e.U64(s.pids);
  e.U64(s.open_files);
  e.U64(s.output_bytes);
  e.U64(s.disk_bytes);
  e.U32(s.cpus);
  e.U32(static_cast<uint32_t>(s.mounts.size()));
  for (const GuestMount& m : s.mounts) {
    e.U8(static_cast<uint8_t>(m.kind));
    e.Str(m.target);
    e.U32(m.disk);
    e.Str(m.image_path);
    e.U8(m.is_file);
    e.U8(m.read_only);
    e.U8(m.nosuid);
    e.U8(m.nodev);
    e.U8(m.noexec);
    e.U64(m.size_bytes);
  }
  e.U8(static_cast<uint8_t>(s.seccomp_default));
  e.I32(s.seccomp_default_errno);
  e.U32(static_cast<uint32_t>(s.seccomp_rules.size()));
  for (const GuestSyscallRule& r : s.seccomp_rules) {
    e.Str(r.name);
    e.U8(static_cast<uint8_t>(r.action));
    e.I32(r.errno_value);
  }
  e.U64(s.max_output_files);
  e.U64(s.max_output_bytes);
  e.U32(static_cast<uint32_t>(s.etc_files.size()));
  for (const auto& [name, content] : s.etc_files) {
    e.Str(name);
    e.Str(content);
  }
  e.U8(s.has_stdin);
  e.U8(s.network.has_value());
  if (s.network) {
    e.Str(s.network->address);
    e.Str(s.network->gateway);
    e.U32(s.network->prefix);
  }
  e.U8(s.request_later);
  return e.Take();
}

std::optional<GuestSpec> DecodeSpec(std::string_view payload) {
  Decoder d(payload);
  GuestSpec s;
  if (!Magic(d, kSpecMagic)) return std::nullopt;
  d.StrList(&s.argv, kMaxArgs);
  d.StrList(&s.env, kMaxEnv);
  d.Str(&s.path_search);
  d.U32(&s.uid);
  d.U32(&s.gid);
  d.Str(&s.cwd);
  d.Str(&s.hostname);
  d.U64(&s.cpu_time_ns);
  d.U64(&s.memory_bytes);
  d.U64(&s.pids);
  d.U64(&s.open_files);
  d.U64(&s.output_bytes);
  d.U64(&s.disk_bytes);
  d.U32(&s.cpus);
  uint32_t n = 0;
  if (!d.U32(&n) || n > kMaxMounts) return std::nullopt;
  for (uint32_t i = 0; i < n; ++i) {
    GuestMount m;
    uint8_t kind = 0;
    if (!d.U8(&kind) || kind > static_cast<uint8_t>(GuestMountKind::kOutput)) return std::nullopt;
    m.kind = static_cast<GuestMountKind>(kind);
    d.Str(&m.target);
    d.U32(&m.disk);
    if (m.disk >= kMaxRootfsDisks) return std::nullopt;
    d.Str(&m.image_path);
    Bool(d, &m.is_file);
    Bool(d, &m.read_only);
    Bool(d, &m.nosuid);
    Bool(d, &m.nodev);
    Bool(d, &m.noexec);
    d.U64(&m.size_bytes);
    if (!d.ok()) return std::nullopt;
    s.mounts.push_back(std::move(m));
  }
  Action(d, &s.seccomp_default);
  d.I32(&s.seccomp_default_errno);
  if (!d.U32(&n) || n > kMaxRules) return std::nullopt;
  for (uint32_t i = 0; i < n; ++i) {
    GuestSyscallRule r;
    d.Str(&r.name);
    Action(d, &r.action);
    d.I32(&r.errno_value);
    if (!d.ok()) return std::nullopt;
    s.seccomp_rules.push_back(std::move(r));
  }
  d.U64(&s.max_output_files);
  d.U64(&s.max_output_bytes);
  if (!d.U32(&n) || n > kMaxEtcFiles) return std::nullopt;
  for (uint32_t i = 0; i < n; ++i) {
    std::string name, content;
    d.Str(&name);
    d.Str(&content);
    if (!d.ok()) return std::nullopt;
    s.etc_files.emplace_back(std::move(name), std::move(content));
  }
  Bool(d, &s.has_stdin);
  bool has_net = false;
  Bool(d, &has_net);
  if (has_net) {
    GuestNetwork net;
    d.Str(&net.address);
    d.Str(&net.gateway);
    d.U32(&net.prefix);
    s.network = std::move(net);
  }
  Bool(d, &s.request_later);
  if (!d.AtEnd()) return std::nullopt;
  // A spec ahead of its request has no program and no stdin yet.
  if (s.request_later && (!s.argv.empty() || s.has_stdin)) return std::nullopt;
  return s;
}

std::string EncodeRequest(const GuestRequest& r) {
  Encoder e;
  e.U32(kRequestMagic);
  e.StrList(r.argv);
  e.U8(r.has_stdin);
  return e.Take();
}

std::optional<GuestRequest> DecodeRequest(std::string_view payload) {
  Decoder d(payload);
  GuestRequest r;
  if (!Magic(d, kRequestMagic)) return std::nullopt;
  d.StrList(&r.argv, kMaxArgs);
  Bool(d, &r.has_stdin);
  if (!d.AtEnd() || r.argv.empty()) return std::nullopt;
  return r;
}

std::string EncodeExit(const ExitReport& r) {
  Encoder e;
  e.I32(r.exit_code);
  e.I32(r.term_signal);
  e.U32(static_cast<uint32_t>(r.limit));
  e.U64(r.cpu_ns);
  e.U64(r.peak_memory_bytes);
  e.U64(r.oom_kills);
  e.U64(r.fork_failures);
  e.U64(r.stdout_total);
  e.U64(r.stderr_total);
  e.Str(r.detail);
  return e.Take();
}

std::optional<ExitReport> DecodeExit(std::string_view payload) {
  Decoder d(payload, 4096);
  ExitReport r;
  uint32_t limit = 0;
  d.I32(&r.exit_code);
  d.I32(&r.term_signal);
  d.U32(&limit);
  d.U64(&r.cpu_ns);
  d.U64(&r.peak_memory_bytes);
  d.U64(&r.oom_kills);
  d.U64(&r.fork_failures);
  d.U64(&r.stdout_total);
  d.U64(&r.stderr_total);
  d.Str(&r.detail);
  if (!d.AtEnd() || limit > static_cast<uint32_t>(GuestLimit::kOutput)) return std::nullopt;
  r.limit = static_cast<GuestLimit>(limit);
  return r;
}

std::string EncodeFileHeader(const FileHeader& h) {
  Encoder e;
  e.U32(h.mount_index);
  e.U8(static_cast<uint8_t>(h.kind));
  e.U32(h.mode);
  e.U64(h.size);
  e.Str(h.path);
  e.Str(h.link_target);
  return e.Take();
}

std::optional<FileHeader> DecodeFileHeader(std::string_view payload) {
  Decoder d(payload, 4096);
  FileHeader h;
  uint8_t kind = 0;
  d.U32(&h.mount_index);
  d.U8(&kind);
  d.U32(&h.mode);
  d.U64(&h.size);
  d.Str(&h.path);
  d.Str(&h.link_target);
  if (!d.AtEnd() || kind < static_cast<uint8_t>(FileKind::kDirectory) ||
      kind > static_cast<uint8_t>(FileKind::kFifo)) {
    return std::nullopt;
  }
  h.kind = static_cast<FileKind>(kind);
  return h;
}

std::string EncodeHeartbeat(const Heartbeat& h) {
  Encoder e;
  e.U64(h.guest_ns);
  e.U64(h.cpu_ns);
  e.U8(h.program_exited ? 1 : 0);
  e.Str(h.program_state.substr(0, kMaxHeartbeatState));
  return e.Take();
}

std::optional<Heartbeat> DecodeHeartbeat(std::string_view payload) {
  Decoder d(payload, kMaxHeartbeatState);
  Heartbeat h;
  uint8_t exited = 0;
  d.U64(&h.guest_ns);
  d.U64(&h.cpu_ns);
  d.U8(&exited);
  d.Str(&h.program_state);
  if (!d.AtEnd() || exited > 1) return std::nullopt;
  h.program_exited = exited == 1;
  return h;
}

std::string EncodeHello(const Hello& h) {
  Encoder e;
  e.U32(h.protocol_version);
  e.Str(h.kernel_release);
  e.U64(h.agent_start_ns);
  e.U64(h.modules_ns);
  return e.Take();
}

std::optional<Hello> DecodeHello(std::string_view payload) {
  Decoder d(payload, 256);
  Hello h;
  d.U32(&h.protocol_version);
  d.Str(&h.kernel_release);
  d.U64(&h.agent_start_ns);
  d.U64(&h.modules_ns);
  if (!d.AtEnd()) return std::nullopt;
  return h;
}

}  // namespace safex::microvm
