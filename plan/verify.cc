#include "plan/verify.h"

#include <re2/re2.h>
#include <seccomp.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>

#include "common/sha256.h"
#include "plan/address_class.h"

namespace safex::plan {
namespace {

// Human units in messages ("64MiB", "30s"); exact, so nothing is rounded away.
std::string Bytes(uint64_t b) {
  static constexpr const char* kNames[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    uint64_t scale = 1ULL << (10 * (4 - i));
    if (b != 0 && b % scale == 0) return std::to_string(b / scale) + kNames[i];
  }
  return std::to_string(b) + "B";
}

std::string Nanos(uint64_t ns) {
  static constexpr std::pair<uint64_t, const char*> kUnits[] = {{3600'000'000'000ULL, "h"},
                                                                {60'000'000'000ULL, "m"},
                                                                {1'000'000'000ULL, "s"},
                                                                {1'000'000ULL, "ms"},
                                                                {1'000ULL, "us"}};
  for (const auto& [scale, name] : kUnits) {
    if (ns != 0 && ns % scale == 0) return std::to_string(ns / scale) + name;
  }
  return std::to_string(ns) + "ns";
}

class Checker {
 public:
  Checker(const Plan& p, const Ceilings& c) : p_(p), c_(c) {}

  std::vector<Violation> Run() {
    CheckStrings();
    CheckHeader();
    CheckBackend();
    CheckLimits();
    CheckProcess();
    CheckMounts();
    CheckEgress();
    CheckEnv();
    CheckCaller();
    CheckContainer();
    CheckSession();
    CheckSeccomp();
    CheckValidators();
    CheckOutputs();
    CheckOverrides();
    CheckTests();
    return std::move(out_);
  }

 private:
  void Add(const char* code, std::string field, std::string message) {
    out_.push_back(Violation{code, std::move(field), std::move(message)});
  }
  static std::string Idx(const std::string& base, size_t i) {
    return base + "[" + std::to_string(i) + "]";
  }
  bool Untrusted() const { return p_.trust == Trust::kUntrusted; }

  // -------------------------------------------------------------------------------------------
  static bool ValidUtf8(const std::string& s) {
    size_t i = 0, n = s.size();
    while (i < n) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == 0) return false;
      if (c < 0x80) {
        ++i;
        continue;
      }
      int len;
      uint32_t cp;
      if ((c & 0xe0) == 0xc0) {
        len = 2;
        cp = c & 0x1f;
      } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        cp = c & 0x0f;
      } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        cp = c & 0x07;
      } else {
        return false;
      }
      if (i + len > n) return false;
      for (int k = 1; k < len; ++k) {
        unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xc0) != 0x80) return false;
        cp = (cp << 6) | (cc & 0x3f);
      }
      if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
          cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return false;
      }
      i += len;
    }
    return true;
  }

  void Str(const std::string& field, const std::string& s) {
    if (!ValidUtf8(s)) Add("E087", field, "is not valid UTF-8 or contains NUL");
  }

  void CheckStrings() {
    Str("policy_name", p_.policy_name);
    for (size_t i = 0; i < p_.sources.size(); ++i)
      Str(Idx("sources", i) + ".path", p_.sources[i].path);
    Str("gvisor.platform", p_.gvisor.platform);
    Str("process.cwd", p_.process.cwd);
    for (const std::string& d : p_.caller.cwd) Str("caller.cwd", d);
    for (size_t i = 0; i < p_.mounts.size(); ++i) {
      Str(Idx("mounts", i) + ".target", p_.mounts[i].target);
      Str(Idx("mounts", i) + ".source", p_.mounts[i].source);
    }
    for (size_t i = 0; i < p_.network.egress.size(); ++i) {
      Str(Idx("network.egress", i) + ".host", p_.network.egress[i].host);
    }
    for (const auto& [k, v] : p_.env) {
      // Env values may be any bytes but NUL; names are checked in CheckEnv.
      if (v.find('\0') != std::string::npos) Add("E087", "env." + k, "value contains NUL");
      if (!ValidUtf8(v)) Add("E087", "env." + k, "value is not valid UTF-8");
    }
    for (size_t i = 0; i < p_.validators.size(); ++i) {
      const auto& v = p_.validators[i];
      Str(Idx("validators", i) + ".path", v.path);
      for (size_t k = 0; k < v.regex.size(); ++k) {
        Str(Idx(Idx("validators", i) + ".regex", k) + ".pattern", v.regex[k].pattern);
        Str(Idx(Idx("validators", i) + ".regex", k) + ".replacement", v.regex[k].replacement);
      }
    }
    for (size_t i = 0; i < p_.overrides.size(); ++i) {
      Str(Idx("overrides", i) + ".reason", p_.overrides[i].reason);
      Str(Idx("overrides", i) + ".field", p_.overrides[i].field);
    }
  }

  // -------------------------------------------------------------------------------------------
  static bool IsHex64(const std::string& s) {
    if (s.size() != 64) return false;
    for (char ch : s) {
      if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    }
    return true;
  }

  void CheckHeader() {
    if (p_.format_version != kPlanFormatVersion) {
      Add("E060", "format_version",
          "plan format version " + std::to_string(p_.format_version) +
              " is not supported (this "
              "build reads version " +
              std::to_string(kPlanFormatVersion) + ")");
    }
    if (p_.policy_name.empty() || p_.policy_name.size() > 128) {
      Add("E086", "policy_name", "policy name must be 1 to 128 bytes");
    }
    if (p_.sources.empty()) {
      Add("E086", "sources", "the plan names no source file");
    }
    std::string concat;
    for (size_t i = 0; i < p_.sources.size(); ++i) {
      if (!IsHex64(p_.sources[i].sha256)) {
        Add("E086", Idx("sources", i) + ".sha256", "is not a lowercase SHA-256 hex digest");
      }
      concat += p_.sources[i].sha256;
    }
    if (!p_.sources.empty() && p_.source_digest != Sha256Hex(concat)) {
      Add("E086", "source_digest", "does not match the digests of the sources");
    }
  }

  void CheckBackend() {
    if (Untrusted() && p_.backend != Backend::kGvisor && p_.backend != Backend::kMicrovm) {
      Add("E061", "backend",
          std::string("untrusted code must run under gvisor or microvm, not ") +
              BackendName(p_.backend));
    }
    if (!c_.allowed_backends.count(p_.backend)) {
      Add("E062", "backend",
          std::string("backend ") + BackendName(p_.backend) +
              " is not permitted by this host's ceilings");
    }
    if (p_.gvisor.platform != "systrap" && p_.gvisor.platform != "ptrace") {
      Add("E084", "gvisor.platform", "gvisor platform must be systrap or ptrace");
    }
    if (p_.microvm.vcpus == 0 || p_.microvm.vcpus > 64) {
      Add("E084", "microvm.vcpus", "microvm vcpus must be between 1 and 64");
    } else if (p_.backend == Backend::kMicrovm && c_.max.cpus != 0 &&
               p_.microvm.vcpus > c_.max.cpus) {
      Add("E084", "microvm.vcpus", "microvm vcpus exceed the host's cpus ceiling");
    }
  }

  // unit: 0 count, 1 bytes, 2 nanoseconds
  void Limit(const char* name, uint64_t v, uint64_t max, int unit) {
    std::string field = std::string("limits.") + name;
    auto fmt = [&](uint64_t x) {
      return unit == 1 ? Bytes(x) : unit == 2 ? Nanos(x) : std::to_string(x);
    };
    if (v == 0) {
      Add("E063", field, std::string("limit ") + name + " is missing (must be > 0)");
    } else if (v > max) {
      Add("E064", field,
          std::string("limit ") + name + " = " + fmt(v) + " exceeds this host's ceiling of " +
              fmt(max));
    }
  }

  void CheckLimits() {
    const Limits& l = p_.limits;
    const Limits& m = c_.max;
    Limit("wall_time_ns", l.wall_time_ns, m.wall_time_ns, 2);
    Limit("cpu_time_ns", l.cpu_time_ns, m.cpu_time_ns, 2);
    Limit("memory_bytes", l.memory_bytes, m.memory_bytes, 1);
    Limit("pids", l.pids, m.pids, 0);
    Limit("open_files", l.open_files, m.open_files, 0);
    Limit("output_bytes", l.output_bytes, m.output_bytes, 1);
    Limit("disk_bytes", l.disk_bytes, m.disk_bytes, 1);
    Limit("cpus", l.cpus, m.cpus, 0);
  }

  void CheckProcess() {
    if (Untrusted() && (p_.process.uid == 0 || p_.process.gid == 0)) {
      Add("E083", p_.process.uid == 0 ? "process.uid" : "process.gid",
          "untrusted code may not run as root (uid or gid 0) inside the sandbox");
    }
    if (!IsNormalAbsolutePath(p_.process.cwd)) {
      Add("E083", "process.cwd", "cwd must be an absolute, normalised path");
    }
  }

  // -------------------------------------------------------------------------------------------
  bool SourceForbidden(const std::string& src, std::string* why) const {
    if (src == "/") {
      *why = "the host root";
      return true;
    }
    auto check_list = [&](const std::vector<std::string>& list, const char* what) {
      for (const auto& f : list) {
        if (f == "/") continue;
        if (PathWithin(src, f)) {
          *why = std::string(what) + " " + f;
          return true;
        }
        if (PathWithin(f, src)) {
          *why = "a directory containing " + std::string(what) + " " + f;
          return true;
        }
      }
      return false;
    };
    if (check_list(ProtectedHostPaths(), "the protected host path")) return true;
    std::vector<std::string> op;
    for (const auto& f : c_.forbidden_mount_sources) {
      if (IsNormalAbsolutePath(f)) op.push_back(f);
    }
    return check_list(op, "the operator-forbidden path");
  }

  void CheckMounts() {
    if (p_.mounts.size() > kMaxMounts) {
      Add("E089", "mounts", "more than " + std::to_string(kMaxMounts) + " mounts");
    }
    size_t inputs = 0;
    for (size_t i = 0; i < p_.mounts.size(); ++i) {
      const Mount& m = p_.mounts[i];
      std::string f = Idx("mounts", i);
      if (!IsNormalAbsolutePath(m.target)) {
        Add("E065", f + ".target",
            "mount target \"" + m.target + "\" is not an absolute, normalised path");
      } else if (m.target == "/") {
        Add("E065", f + ".target", "a mount may not replace the sandbox root \"/\"");
      } else {
        for (const char* kernel : {"/proc", "/sys", "/dev"}) {
          if (PathWithin(m.target, kernel)) {
            Add("E065", f + ".target",
                "mount target \"" + m.target + "\" is inside " + kernel +
                    ", which the sandbox provides itself");
          }
        }
        for (size_t k = 0; k < i; ++k) {
          const std::string& o = p_.mounts[k].target;
          if (!IsNormalAbsolutePath(o)) continue;
          if (PathWithin(m.target, o) || PathWithin(o, m.target)) {
            Add("E066", f + ".target",
                "mount target \"" + m.target + "\" overlaps mount target \"" + o + "\"");
          }
        }
      }
      bool writable = !m.read_only;
      if (m.kind == MountKind::kBind) {
        std::string why;
        if (!IsNormalAbsolutePath(m.source)) {
          Add("E067", f + ".source",
              "bind source \"" + m.source + "\" is not an absolute, normalised path");
        } else if (SourceForbidden(m.source, &why)) {
          Add("E067", f + ".source", "bind source \"" + m.source + "\" is " + why);
        } else {
          CheckSourceOnDisk(f, m.source);
        }
        if (writable && Untrusted()) {
          Add("E068", f + ".read_only", "untrusted code may not have a writable host bind mount");
        }
        if (m.size_bytes != 0) Add("E069", f + ".size_bytes", "a bind mount has no size cap");
      } else {
        if (!m.source.empty()) {
          Add("E068", f + ".source",
              std::string("a ") + MountKindName(m.kind) + " mount takes no host source");
        }
      }
      if (m.kind == MountKind::kTmpfs || m.kind == MountKind::kOutput) {
        if (m.size_bytes == 0) {
          Add("E069", f + ".size_bytes",
              std::string(MountKindName(m.kind)) + " mount at \"" + m.target +
                  "\" has no size cap");
        } else if (m.size_bytes > c_.max.disk_bytes) {
          Add("E069", f + ".size_bytes",
              "mount size " + Bytes(m.size_bytes) + " exceeds this host's disk ceiling of " +
                  Bytes(c_.max.disk_bytes));
        }
      }
      if (m.kind == MountKind::kInput) {
        ++inputs;
        if (inputs == 2) Add("E070", f, "a plan has at most one input mount");
        if (writable) Add("E070", f + ".read_only", "the input mount must be read-only");
        if (m.size_bytes != 0) Add("E069", f + ".size_bytes", "an input mount has no size cap");
      }
      if (writable) {
        if (!m.nosuid || !m.nodev) {
          Add("E068", f, "writable mount \"" + m.target + "\" must be nosuid and nodev");
        }
        if (Untrusted() && !m.noexec) {
          Add("E068", f + ".noexec",
              "writable mount \"" + m.target + "\" must be noexec for untrusted code");
        }
      }
    }
  }

  void CheckSourceOnDisk(const std::string& f, const std::string& src) {
    struct stat st;
    if (lstat(src.c_str(), &st) != 0) return;  // absent here; the driver fails at mount time
    if (S_ISSOCK(st.st_mode)) {
      Add("E067", f + ".source", "bind source \"" + src + "\" is a socket");
      return;
    }
    char resolved[PATH_MAX];
    if (realpath(src.c_str(), resolved) == nullptr) return;
    std::string r = resolved;
    std::string why;
    if (r != src && SourceForbidden(r, &why)) {
      Add("E067", f + ".source", "bind source \"" + src + "\" resolves to " + r + ", " + why);
      return;
    }
    if (stat(resolved, &st) == 0 && S_ISSOCK(st.st_mode)) {
      Add("E067", f + ".source", "bind source \"" + src + "\" resolves to a socket");
    }
  }

  // -------------------------------------------------------------------------------------------
  static bool LocalOnlyName(std::string host) {
    for (auto& ch : host) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!host.empty() && host.back() == '.') host.pop_back();
    auto ends = [&](const std::string& suffix) {
      return host.size() > suffix.size() &&
             host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return host == "localhost" || ends(".localhost") || ends(".local") || host == "metadata" ||
           host == "metadata.google.internal" || host == "instance-data" || ends(".internal") ||
           host == "ip6-localhost" || host == "ip6-loopback";
  }

  void CheckEgress() {
    const auto& eg = p_.network.egress;
    if (eg.size() > kMaxEgress) {
      Add("E089", "network.egress", "more than " + std::to_string(kMaxEgress) + " egress rules");
    }
    std::set<std::tuple<std::string, uint16_t, Protocol>> seen;
    for (size_t i = 0; i < eg.size(); ++i) {
      const EgressRule& e = eg[i];
      std::string f = Idx("network.egress", i);
      if (e.port == 0) Add("E072", f + ".port", "egress port must be 1 to 65535");
      auto ip = IpAddress::Parse(e.host);
      if (ip) {
        if (!EgressAllowed(*ip, c_)) {
          Add("E073", f + ".host",
              "egress to " + e.host + " is refused: it is a " + AddressClassName(Classify(*ip)) +
                  " address" +
                  (Classify(*ip) == AddressClass::kPrivate || Classify(*ip) == AddressClass::kCgnat
                       ? " outside the host's allowed egress ranges"
                       : ""));
        }
      } else if (!IsValidDnsName(e.host)) {
        Add("E072", f + ".host",
            "egress host \"" + e.host + "\" is neither a DNS name nor an IP address literal");
      } else if (LocalOnlyName(e.host)) {
        Add("E072", f + ".host",
            "egress host \"" + e.host + "\" names the local machine or a metadata service");
      }
      if (!seen.insert({e.host, e.port, e.protocol}).second) {
        Add("E072", f, "duplicate egress rule " + e.host + ":" + std::to_string(e.port));
      }
    }
  }

  void CheckEnv() {
    if (p_.env.size() > kMaxEnv) {
      Add("E089", "env", "more than " + std::to_string(kMaxEnv) + " environment variables");
    }
    for (const auto& [k, v] : p_.env) {
      std::string f = "env." + k;
      if (!ValidEnvName(k)) {
        Add("E075", f, "environment variable names are [A-Za-z_][A-Za-z0-9_]*, at most 256 bytes");
        continue;
      }
      if (k.rfind("LD_", 0) == 0 || k == "GLIBC_TUNABLES") {
        Add("E074", f,
            k + " would change how the dynamic loader runs the program; it may not be set");
      }
      if (v.size() > kMaxEnvValueBytes) {
        Add("E075", f, "environment value longer than " + std::to_string(kMaxEnvValueBytes));
      }
    }
  }

  // What callers may choose (plan.h, CallerChoices): names an env entry could have, sorted and
  // unique, never the dynamic loader's; working directories that are normal absolute paths.
  void CheckCaller() {
    const auto& env = p_.caller.env;
    if (env.size() > kMaxEnv) {
      Add("E089", "caller.env", "more than " + std::to_string(kMaxEnv) + " names");
    }
    if (!std::is_sorted(env.begin(), env.end()) ||
        std::adjacent_find(env.begin(), env.end()) != env.end()) {
      Add("E075", "caller.env", "names must be sorted and unique");
    }
    for (const std::string& k : env) {
      const std::string f = "caller.env." + k;
      if (!ValidEnvName(k)) {
        Add("E075", f, "environment variable names are [A-Za-z_][A-Za-z0-9_]*, at most 256 bytes");
      } else if (k.rfind("LD_", 0) == 0 || k == "GLIBC_TUNABLES") {
        Add("E074", f,
            k + " would change how the dynamic loader runs the program; callers may not set it");
      }
    }
    const auto& cwd = p_.caller.cwd;
    if (!std::is_sorted(cwd.begin(), cwd.end()) ||
        std::adjacent_find(cwd.begin(), cwd.end()) != cwd.end()) {
      Add("E083", "caller.cwd", "directories must be sorted and unique");
    }
    for (const std::string& d : cwd) {
      if (!IsNormalAbsolutePath(d)) {
        Add("E083", "caller.cwd", "\"" + d + "\" is not an absolute, normalised path");
      }
    }
  }

  // Image names (plan.h, ContainerRules): sorted and unique, printable without spaces, at most
  // 512 bytes, a `*` only as the last character (a prefix), never a bare `*` (write no list).
  void CheckContainer() {
    const auto& images = p_.container.images;
    if (images.size() > 256) Add("E089", "container.images", "more than 256 images");
    if (!std::is_sorted(images.begin(), images.end()) ||
        std::adjacent_find(images.begin(), images.end()) != images.end()) {
      Add("E097", "container.images", "image names must be sorted and unique");
    }
    for (const std::string& i : images) {
      bool printable = !i.empty() && i.size() <= 512;
      for (char c : i) printable = printable && c > ' ' && c < 0x7f;
      size_t star = i.find('*');
      if (!printable || (star != std::string::npos && star + 1 != i.size()) || i == "*") {
        Add("E097", "container.images",
            "\"" + i + "\" is not an image name, or a prefix ending in a single `*`");
      }
    }
  }

  // Sessions (plan.h, SessionLimits): bounded when allowed, all zero when not (one canonical form).
  void CheckSession() {
    const plan::SessionLimits& s = p_.session;
    if (!s.allowed) {
      if (s.max_execs != 0 || s.idle_timeout_ns != 0 || s.max_lifetime_ns != 0) {
        Add("E095", "session", "bounds without sessions being allowed");
      }
      return;
    }
    constexpr uint64_t kSecond = 1'000'000'000ull, kDay = 86400 * kSecond;
    if (s.max_execs < 1 || s.max_execs > kMaxSessionExecs) {
      Add("E095", "session.max_execs",
          "must be 1.." + std::to_string(kMaxSessionExecs) + " commands");
    }
    if (s.idle_timeout_ns < kSecond || s.idle_timeout_ns > kDay) {
      Add("E095", "session.idle_timeout_ns", "must be 1s..24h");
    }
    if (s.max_lifetime_ns < s.idle_timeout_ns || s.max_lifetime_ns > kDay) {
      Add("E095", "session.max_lifetime_ns", "must be at least idle_timeout and at most 24h");
    }
  }

  static bool ValidEnvName(const std::string& k) {
    bool valid = !k.empty() && k.size() <= 256 && !(k[0] >= '0' && k[0] <= '9');
    for (char ch : k) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) valid = false;
    }
    return valid;
  }

  void Errno(const std::string& f, int e) {
    if (e < 1 || e > 4095) Add("E078", f, "errno value must be 1 to 4095");
  }

  void CheckSeccomp() {
    const Seccomp& s = p_.seccomp;
    if (s.default_action == SyscallAction::kErrno) Errno("seccomp.default_errno", s.default_errno);
    if (s.rules.size() > kMaxSyscallRules) {
      Add("E089", "seccomp.rules", "more than " + std::to_string(kMaxSyscallRules) + " rules");
    }
    for (size_t i = 0; i < s.rules.size(); ++i) {
      const SyscallRule& r = s.rules[i];
      std::string f = Idx("seccomp.rules", i);
      if (!IsKnownSyscall(r.name)) {
        Add("E076", f + ".name", "\"" + r.name + "\" is not a known x86_64 system call");
      }
      if (i > 0 && s.rules[i - 1].name >= r.name) {
        Add("E077", f + ".name",
            s.rules[i - 1].name == r.name ? "duplicate rule for system call " + r.name
                                          : "rules are not sorted by name");
      }
      if (r.action == SyscallAction::kErrno) Errno(f + ".errno_value", r.errno_value);
    }
  }

  // -------------------------------------------------------------------------------------------
  void CheckValidators() {
    if (p_.validators.size() > kMaxValidators) {
      Add("E089", "validators", "more than " + std::to_string(kMaxValidators) + " validators");
    }
    for (size_t i = 0; i < p_.validators.size(); ++i) {
      const Validator& v = p_.validators[i];
      std::string f = Idx("validators", i);
      if (v.max_bytes == 0) {
        Add("E079", f + ".max_bytes", "a validator must cap the size it reads (max)");
      } else if (v.target != ValidatorTarget::kFile && v.max_bytes > p_.limits.output_bytes) {
        Add("E079", f + ".max_bytes",
            std::string(ValidatorTargetName(v.target)) +
                " validator max exceeds the run's output limit");
      } else if (v.target == ValidatorTarget::kFile && v.max_bytes > c_.max.disk_bytes) {
        Add("E079", f + ".max_bytes", "file validator max exceeds this host's disk ceiling");
      }
      if (v.target == ValidatorTarget::kFile) {
        CheckValidatorPath(f, v.path);
      } else if (!v.path.empty()) {
        Add("E071", f + ".path", "a stream validator takes no path");
      }
      if (v.regex.size() > kMaxRegexPerValidator) {
        Add("E080", f + ".regex",
            "more than " + std::to_string(kMaxRegexPerValidator) + " patterns in one validator");
      }
      for (size_t k = 0; k < v.regex.size(); ++k) {
        const RegexRule& r = v.regex[k];
        std::string rf = Idx(f + ".regex", k);
        if (r.pattern.empty() || r.pattern.size() > kMaxRegexBytes) {
          Add("E080", rf + ".pattern",
              "patterns must be 1 to " + std::to_string(kMaxRegexBytes) + " bytes");
          continue;
        }
        if (r.replacement.size() > kMaxReplacementBytes) {
          Add("E080", rf + ".replacement",
              "replacement longer than " + std::to_string(kMaxReplacementBytes) + " bytes");
        }
        RE2::Options opt;
        opt.set_log_errors(false);
        opt.set_max_mem(8 << 20);
        RE2 re(r.pattern, opt);
        if (!re.ok()) {
          Add("E081", rf + ".pattern", "pattern does not compile: " + re.error());
        }
      }
      if (v.json) {
        if (v.json->max_depth == 0 || v.json->max_depth > kMaxJsonDepth) {
          Add("E080", f + ".json.max_depth",
              "json max depth must be 1 to " + std::to_string(kMaxJsonDepth));
        }
        if (v.json->required.size() > kMaxJsonRequired) {
          Add("E080", f + ".json.required",
              "more than " + std::to_string(kMaxJsonRequired) + " required keys");
        }
        static const std::set<std::string> kTypes = {"string", "number", "integer", "boolean",
                                                     "object", "array",  "null"};
        for (const auto& [key, type] : v.json->required) {
          if (!kTypes.count(type)) {
            Add("E082", f + ".json.required." + key,
                "unknown json type \"" + type +
                    "\" (string, number, integer, boolean, object, array or null)");
          }
          if (key.empty() || key.size() > 256 || !ValidUtf8(key)) {
            Add("E082", f + ".json.required", "required keys must be 1 to 256 bytes of UTF-8");
          }
        }
      }
    }
  }

  void CheckValidatorPath(const std::string& f, const std::string& path) {
    if (!IsNormalAbsolutePath(path) || path == "/") {
      Add("E071", f + ".path",
          "file validator path \"" + path + "\" is not absolute and normalised");
      return;
    }
    for (const Mount& m : p_.mounts) {
      if (m.kind == MountKind::kOutput && IsNormalAbsolutePath(m.target) &&
          PathWithin(path, m.target) && path != m.target) {
        return;
      }
    }
    Add("E071", f + ".path", "file validator path \"" + path + "\" is not under an output mount");
  }

  void CheckOutputs() {
    bool has_output = false;
    for (const Mount& m : p_.mounts) has_output |= m.kind == MountKind::kOutput;
    if (has_output) {
      if (p_.outputs.max_files == 0) {
        Add("E085", "outputs.max_files",
            "a plan with an output mount must cap the files collected");
      }
      if (p_.outputs.max_total_bytes == 0) {
        Add("E085", "outputs.max_total_bytes",
            "a plan with an output mount must cap the bytes collected");
      }
    }
    if (p_.outputs.max_total_bytes > c_.max.disk_bytes) {
      Add("E085", "outputs.max_total_bytes", "exceeds this host's disk ceiling");
    }
    if (p_.outputs.max_files > 100000) {
      Add("E085", "outputs.max_files", "at most 100000 files may be collected");
    }
  }

  void CheckOverrides() {
    for (size_t i = 0; i < p_.overrides.size(); ++i) {
      const Override& o = p_.overrides[i];
      if (o.field.empty() || o.reason.empty()) {
        Add("E088", Idx("overrides", i), "an override must name its field and give a reason");
      }
    }
  }

  // A policy's tests: named once each, something to run, at least one expectation, regexes that
  // compile, input files only with an input mount, expected files under an output mount.
  void CheckTests() {
    if (p_.tests.size() > kMaxTests) {
      Add("E093", "tests", "at most " + std::to_string(kMaxTests) + " tests per policy");
      return;
    }
    std::set<std::string> names;
    bool has_input = false;
    for (const Mount& m : p_.mounts) has_input |= m.kind == MountKind::kInput;
    for (size_t i = 0; i < p_.tests.size(); ++i) {
      const PolicyTest& t = p_.tests[i];
      const std::string f = Idx("tests", i);
      if (t.name.empty() || t.name.size() > 128)
        Add("E093", f + ".name", "a test needs a name of 1-128 bytes");
      if (!names.insert(t.name).second)
        Add("E093", f + ".name", "test \"" + t.name + "\" is defined twice");
      if (t.argv.empty() || t.argv[0].empty())
        Add("E093", f + ".argv", "a test must run something");
      for (const std::string& a : t.argv) {
        if (!ValidUtf8(a)) Add("E087", f + ".argv", "is not valid UTF-8 or contains NUL");
      }
      CheckTestInputs(t, f, has_input);
      CheckTestExpectation(t.expect, f + ".expect");
    }
  }

  void CheckTestInputs(const PolicyTest& t, const std::string& f, bool has_input) {
    if (!t.files.empty() && !has_input) {
      Add("E093", f + ".files", "input files need an input mount in the policy");
    }
    std::set<std::string> seen;
    for (const TestInputFile& file : t.files) {
      const std::string& n = file.name;
      if (n.empty() || n.size() > 255 || n.find('/') != std::string::npos || n[0] == '.' ||
          !ValidUtf8(n) || !seen.insert(n).second) {
        Add("E093", f + ".files",
            "input file name \"" + n +
                "\" must be a unique file name (no '/', not starting with '.')");
      }
    }
  }

  void CheckTestExpectation(const TestExpectation& e, const std::string& f) {
    if (!e.exit_code && !e.verdict && !e.stdout_regex && !e.stderr_regex &&
        e.files_present.empty() && e.files_absent.empty()) {
      Add("E093", f, "a test must expect something (exit, verdict, stdout, stderr, file, no_file)");
    }
    if (e.exit_code && (*e.exit_code < 0 || *e.exit_code > 255)) {
      Add("E093", f + ".exit_code", "an exit status is 0-255");
    }
    if (e.verdict && !IsTestVerdict(*e.verdict)) {
      Add("E093", f + ".verdict", "unknown verdict \"" + *e.verdict + "\"");
    }
    for (const auto* re : {&e.stdout_regex, &e.stderr_regex}) {
      if (!*re) continue;
      RE2::Options opt;
      opt.set_log_errors(false);
      opt.set_max_mem(8 << 20);
      RE2 compiled(**re, opt);
      if (!compiled.ok()) Add("E081", f, "pattern does not compile: " + compiled.error());
    }
    for (const auto* list : {&e.files_present, &e.files_absent}) {
      for (const std::string& path : *list) {
        bool under_output = false;
        for (const Mount& m : p_.mounts) {
          under_output |=
              m.kind == MountKind::kOutput && PathWithin(path, m.target) && path != m.target;
        }
        if (!IsNormalAbsolutePath(path) || !under_output) {
          Add("E093", f, "expected file \"" + path + "\" is not under an output mount");
        }
      }
    }
  }

  static constexpr size_t kMaxTests = 256;

  const Plan& p_;
  const Ceilings& c_;
  std::vector<Violation> out_;
};

}  // namespace

bool IsNormalAbsolutePath(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096) return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  size_t i = 1;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    std::string_view comp(p.data() + i, j - i);
    if (comp.empty() || comp == "." || comp == "..") return false;
    for (char ch : comp) {
      if (ch == '\0' || static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) return false;
    }
    i = j + 1;
  }
  return true;
}

bool PathWithin(const std::string& p, const std::string& dir) {
  if (dir == "/") return true;
  if (p.size() < dir.size() || p.compare(0, dir.size(), dir) != 0) return false;
  return p.size() == dir.size() || p[dir.size()] == '/';
}

bool IsValidDnsName(const std::string& host) {
  std::string h = host;
  if (!h.empty() && h.back() == '.') h.pop_back();  // fully qualified form
  if (h.empty() || h.size() > 253) return false;
  size_t start = 0;
  std::string_view last;
  while (start <= h.size()) {
    size_t dot = h.find('.', start);
    if (dot == std::string::npos) dot = h.size();
    std::string_view label(h.data() + start, dot - start);
    if (label.empty() || label.size() > 63) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    for (char ch : label) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-')) return false;
    }
    last = label;
    start = dot + 1;
  }
  bool all_digits = true;
  for (char ch : last) all_digits &= std::isdigit(static_cast<unsigned char>(ch)) != 0;
  return !all_digits;
}

bool IsKnownSyscall(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name) {
    if (!(std::islower(static_cast<unsigned char>(ch)) ||
          std::isdigit(static_cast<unsigned char>(ch)) || ch == '_')) {
      return false;
    }
  }
  return seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name.c_str()) >= 0;
}

const std::vector<std::string>& KnownSyscalls() {
  static const std::vector<std::string> kNames = [] {
    std::set<std::string> names;
    for (int nr = 0; nr < 1024; ++nr) {
      char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
      if (name != nullptr) {
        names.insert(name);
        free(name);  // libseccomp allocates the returned name
      }
    }
    return std::vector<std::string>(names.begin(), names.end());
  }();
  return kNames;
}

const std::vector<std::string>& ProtectedHostPaths() {
  static const std::vector<std::string> kPaths = {
      "/proc", "/sys", "/dev",     "/etc",           "/root",      "/home",
      "/boot", "/run", "/var/run", "/var/lib/safex", "/etc/safex", "/run/safex",
  };
  return kPaths;
}

std::vector<Violation> Verify(const Plan& plan, const Ceilings& ceilings) {
  return Checker(plan, ceilings).Run();
}

}  // namespace safex::plan
