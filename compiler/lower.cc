#include "compiler/lower.h"

#include <sys/socket.h>

#include <set>

#include "compiler/policy_tests.h"
#include "plan/address_class.h"
#include "plan/plan_json.h"
#include "plan/verify.h"

namespace safex::compiler {

using dsl::Statement;
using dsl::Value;
using dsl::ValueKind;

Origin MakeOrigin(const std::string& path, const dsl::Span& span) {
  return Origin{
      path + ":" + std::to_string(span.begin.line) + ":" + std::to_string(span.begin.column), path,
      span};
}

std::string Keyword(const Statement& s, Diags& d) {
  if (s.head.empty() || s.head[0].kind != ValueKind::kIdent) {
    d.Error("E020", s.head.empty() ? s.span : s.head[0].span,
            "expected a keyword at the start of the statement, found " +
                (s.head.empty() ? std::string("nothing") : DescribeValue(s.head[0])));
    return "";
  }
  return s.head[0].text;
}

bool ExpectAssignment(const Statement& s, Diags& d, const std::string& key) {
  if (s.head.size() == 1 && s.has_assignment && !s.has_block) return true;
  d.Error("E027", s.span, "`" + key + "` is set with `" + key + " = value`",
          "write `" + key + " = ...` on its own");
  return false;
}

bool ExpectBlock(const Statement& s, Diags& d, const std::string& key) {
  if (s.head.size() == 1 && !s.has_assignment && s.has_block) return true;
  d.Error("E027", s.span, "`" + key + "` is a block: `" + key + " { ... }`");
  return false;
}

namespace {

std::string Quote(std::string_view s) { return "`" + std::string(s) + "`"; }

bool ValidPolicyName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  if (n[0] == '.' || n[0] == '-') return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return n.find("..") == std::string::npos;
}

// Unknown keyword: E020 with the closest known one.
void UnknownKeyword(const Statement& s, Diags& d, const std::string& kw, const char* where,
                    const std::vector<std::string_view>& known) {
  std::string near = dsl::ClosestMatch(kw, known);
  std::string list;
  for (size_t i = 0; i < known.size(); ++i) list += (i ? ", " : "") + std::string(known[i]);
  d.Error("E020", s.head[0].span, "unknown keyword " + Quote(kw) + " in " + where,
          near.empty() ? "expected one of: " + list : "did you mean " + Quote(near) + "?");
}

class Lowerer {
 public:
  Lowerer(Diags& d, Draft& draft, OverrideTable& ov, std::string policy_name)
      : d_(d), draft_(draft), ov_(ov), policy_name_(std::move(policy_name)) {}

  void Policy(const Statement& policy) {
    CheckNoAnnotations(policy, "the `policy` statement");
    std::map<std::string, dsl::Span> once;
    std::set<std::string> mount_targets;
    for (const Statement& s : policy.block) {
      std::string kw = Keyword(s, d_);
      if (kw.empty()) continue;
      static const std::vector<std::string_view> kKeywords = {
          "trust",   "isolation", "limits",   "rootfs",   "mount",   "unmount",
          "network", "env",       "syscalls", "validate", "outputs", "process",
          "gvisor",  "microvm",   "test",     "caller",   "session", "container"};
      bool known = false;
      for (auto k : kKeywords) known |= kw == k;
      if (!known) {
        UnknownKeyword(s, d_, kw, "a policy", kKeywords);
        continue;
      }
      if (kw == "test") {  // repeatable, and never an override: a test loosens nothing
        CheckNoAnnotations(s, "a test");
        LowerTest(s, policy_name_, d_, draft_, Here(s));
        continue;
      }
      if (kw != "mount" && kw != "unmount" && kw != "validate") {
        if (!Once(once, kw, s)) continue;
      }
      active_ = Annotations(s);
      draft_.mentioned.insert(kw);
      if (kw == "trust")
        Trust(s);
      else if (kw == "isolation")
        Isolation(s);
      else if (kw == "limits")
        Limits(s);
      else if (kw == "rootfs")
        Rootfs(s);
      else if (kw == "mount")
        Mount(s, mount_targets);
      else if (kw == "unmount")
        Unmount(s);
      else if (kw == "network")
        Network(s);
      else if (kw == "env")
        Env(s);
      else if (kw == "syscalls")
        Syscalls(s);
      else if (kw == "validate")
        Validate(s);
      else if (kw == "outputs")
        Outputs(s);
      else if (kw == "process")
        Process(s);
      else if (kw == "gvisor")
        Gvisor(s);
      else if (kw == "microvm")
        Microvm(s);
      else if (kw == "caller")
        Caller(s);
      else if (kw == "session")
        Session(s);
      else if (kw == "container")
        Container(s);
      active_.reset();
    }
  }

 private:
  // ---------------------------------------------------------------------------------------------
  // Annotations and origins

  std::optional<size_t> Annotations(const Statement& s) {
    std::optional<size_t> mark;
    for (const auto& a : s.annotations) {
      if (a.name != "override") {
        std::string near = dsl::ClosestMatch(a.name, {"override"});
        d_.Error("E032", a.span, "unknown annotation `@" + a.name + "`",
                 near.empty() ? "the only annotation is `@override(\"reason\")`"
                              : "did you mean `@override`?");
        continue;
      }
      if (a.args.size() != 1 || a.args[0].kind != ValueKind::kString ||
          a.args[0].text.find_first_not_of(" \t") == std::string::npos) {
        d_.Error("E032", a.span, "`@override` needs one non-empty reason string",
                 "e.g. `@override(\"SEC-123: pandas needs 1GiB\")`");
        continue;
      }
      if (mark) {
        d_.Error("E032", a.span, "a statement carries at most one `@override`");
        continue;
      }
      ov_.marks.push_back(OverrideMark{a.args[0].text, Here(s), {}});
      mark = ov_.marks.size() - 1;
    }
    // A statement inside an overridden block is covered by the block's override.
    if (!mark && active_) return active_;
    return mark;
  }

  void CheckNoAnnotations(const Statement& s, const char* what) {
    for (const auto& a : s.annotations) {
      d_.Error("E032", a.span, std::string("annotations are not allowed on ") + what,
               "put `@override(...)` on the statement that loosens a value");
    }
  }

  // The origin of statement `s`, registered with the active override if any.
  Origin Here(const Statement& s) {
    // From the keyword, not from an annotation in front of it.
    dsl::Span span = s.span;
    if (!s.head.empty()) span.begin = s.head.front().span.begin;
    Origin o = MakeOrigin(d_.path(), span);
    if (active_) ov_.by_loc[o.loc] = *active_;
    return o;
  }

  // Runs `fn` for the statements of a block with per-statement annotations applied.
  template <typename Fn>
  void Each(const Statement& block, Fn fn) {
    auto saved = active_;
    for (const Statement& s : block.block) {
      active_ = Annotations(s);
      fn(s);
      active_ = saved;
    }
  }

  bool Once(std::map<std::string, dsl::Span>& seen, const std::string& key, const Statement& s) {
    auto [it, inserted] = seen.emplace(key, s.span);
    if (inserted) return true;
    d_.Error("E025", s.head.empty() ? s.span : s.head[0].span, Quote(key) + " is set twice",
             "first set at line " + std::to_string(it->second.begin.line) + ":" +
                 std::to_string(it->second.begin.column));
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Scalars

  void Trust(const Statement& s) {
    if (!ExpectAssignment(s, d_, "trust")) return;
    auto v = ReadChoice(s.assigned, d_, "trust level", {"untrusted", "trusted"});
    if (v) draft_.trust = Set<plan::Trust>{*plan::TrustFromName(*v), Here(s)};
  }

  void Isolation(const Statement& s) {
    if (!ExpectAssignment(s, d_, "isolation")) return;
    auto v = ReadChoice(s.assigned, d_, "isolation backend", {"gvisor", "microvm", "native"});
    if (v) draft_.backend = Set<plan::Backend>{*plan::BackendFromName(*v), Here(s)};
  }

  void Limits(const Statement& s) {
    if (!ExpectBlock(s, d_, "limits")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      struct L {
        std::string_view name, field;
        int kind;  // 0 duration, 1 size, 2 integer
        uint64_t max;
      };
      static const L kLimits[] = {
          {"wall_time", "wall_time_ns", 0, 0},
          {"cpu_time", "cpu_time_ns", 0, 0},
          {"memory", "memory_bytes", 1, 0},
          {"pids", "pids", 2, 1u << 22},
          {"open_files", "open_files", 2, 1u << 20},
          {"output", "output_bytes", 1, 0},
          {"disk", "disk_bytes", 1, 0},
          {"cpus", "cpus", 2, 1024},
      };
      const L* lim = nullptr;
      for (const auto& l : kLimits) {
        if (kw == l.name) lim = &l;
      }
      if (!lim) {
        std::vector<std::string_view> names;
        for (const auto& l : kLimits) names.push_back(l.name);
        UnknownKeyword(x, d_, kw, "`limits`", names);
        return;
      }
      draft_.mentioned.insert("limits." + kw);
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      std::optional<uint64_t> v;
      if (lim->kind == 0)
        v = ReadDuration(x.assigned, d_, kw);
      else if (lim->kind == 1)
        v = ReadSize(x.assigned, d_, kw);
      else
        v = ReadInteger(x.assigned, d_, kw, 1, lim->max);
      if (v && *v == 0) {
        d_.Error("E023", x.assigned.span, Quote(kw) + " must be greater than zero");
        return;
      }
      if (v) draft_.limits[std::string(lim->field)] = Set<uint64_t>{*v, Here(x)};
    });
  }

  void Outputs(const Statement& s) {
    if (!ExpectBlock(s, d_, "outputs")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "max_files" && kw != "max_total") {
        UnknownKeyword(x, d_, kw, "`outputs`", {"max_files", "max_total"});
        return;
      }
      draft_.mentioned.insert("outputs." + kw);
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      if (kw == "max_files") {
        auto v = ReadInteger(x.assigned, d_, kw, 1, 100000);
        if (v) draft_.outputs_max_files = Set<uint64_t>{*v, Here(x)};
      } else {
        auto v = ReadSize(x.assigned, d_, kw);
        if (v && *v == 0)
          d_.Error("E023", x.assigned.span, "`max_total` must be greater than zero");
        else if (v)
          draft_.outputs_max_total = Set<uint64_t>{*v, Here(x)};
      }
    });
  }

  void Process(const Statement& s) {
    if (!ExpectBlock(s, d_, "process")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "user" && kw != "group" && kw != "cwd") {
        UnknownKeyword(x, d_, kw, "`process`", {"user", "group", "cwd"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      if (kw == "cwd") {
        auto v = ReadString(x.assigned, d_, "cwd");
        if (v) draft_.cwd = Set<std::string>{*v, Here(x)};
        return;
      }
      // 2^32-1 is (uid_t)-1, "no change" to the kernel: never a real id.
      auto v = ReadInteger(x.assigned, d_, kw, 0, 0xfffffffeULL);
      if (!v) return;
      auto& slot = kw == "user" ? draft_.uid : draft_.gid;
      slot = Set<uint32_t>{static_cast<uint32_t>(*v), Here(x)};
    });
  }

  // `caller { env = ["SEED"]  cwd = ["/data/in"] }`: what a caller of the service may choose per
  // run (plan.h, CallerChoices); the verifier checks the names and paths.
  void Caller(const Statement& s) {
    if (!ExpectBlock(s, d_, "caller")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "env" && kw != "cwd") {
        UnknownKeyword(x, d_, kw, "`caller`", {"env", "cwd"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      auto values = Strings(x, kw == "env" ? "caller env" : "caller cwd",
                            kw == "env" ? "a variable name" : "a directory");
      if (values) (kw == "env" ? draft_.caller_env : draft_.caller_cwd) = std::move(*values);
    });
  }

  // `key = ["a", "b"]` of statement x: its strings where it is a list of strings (each item
  // that is not is an error), set here.
  std::optional<Set<std::vector<std::string>>> Strings(const Statement& x, const char* what,
                                                       const char* item) {
    const auto* items = ReadList(x.assigned, d_, what);
    if (items == nullptr) return std::nullopt;
    std::vector<std::string> values;
    for (const dsl::Value& v : *items) {
      auto text = ReadString(v, d_, item);
      if (text) values.push_back(*text);
    }
    return Set<std::vector<std::string>>{std::move(values), Here(x)};
  }

  // `container { images = ["docker.io/library/python:3.12", "registry.example.com/agents/*"] }`:
  // the images `safex-oci` may run containers of this policy from (plan.h, ContainerRules).
  void Container(const Statement& s) {
    if (!ExpectBlock(s, d_, "container")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "images") {
        UnknownKeyword(x, d_, kw, "`container`", {"images"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      auto values = Strings(x, "container images", "an image name");
      if (values && values->value.empty()) {
        d_.Error("E023", x.assigned.span, "`images` lists no image",
                 "list the images allowed, or leave `container` out to allow any");
        return;
      }
      if (values) draft_.container_images = std::move(*values);
    });
  }

  // `session { max_execs = 100  idle_timeout = 5m  max_lifetime = 1h }`: the service may keep
  // one sandbox for several commands of one caller's task (plan.h, SessionLimits); a key not
  // written keeps the inherited value, or the default. The verifier checks the bounds.
  void Session(const Statement& s) {
    if (!ExpectBlock(s, d_, "session")) return;
    draft_.session = Set<bool>{true, Here(s)};
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "max_execs" && kw != "idle_timeout" && kw != "max_lifetime") {
        UnknownKeyword(x, d_, kw, "`session`", {"max_execs", "idle_timeout", "max_lifetime"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      if (kw == "max_execs") {
        auto v = ReadInteger(x.assigned, d_, kw, 1, plan::kMaxSessionExecs);
        if (v) draft_.session_max_execs = Set<uint64_t>{*v, Here(x)};
        return;
      }
      auto v = ReadDuration(x.assigned, d_, kw);
      if (!v) return;
      (kw == "idle_timeout" ? draft_.session_idle_timeout : draft_.session_max_lifetime) =
          Set<uint64_t>{*v, Here(x)};
    });
  }

  void Gvisor(const Statement& s) {
    if (!ExpectBlock(s, d_, "gvisor")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "platform") {
        UnknownKeyword(x, d_, kw, "`gvisor`", {"platform"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      auto v = ReadChoice(x.assigned, d_, "gvisor platform", {"systrap", "ptrace"});
      if (v) draft_.gvisor_platform = Set<std::string>{*v, Here(x)};
    });
  }

  void Microvm(const Statement& s) {
    if (!ExpectBlock(s, d_, "microvm")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "vcpus" && kw != "kvm") {
        UnknownKeyword(x, d_, kw, "`microvm`", {"vcpus", "kvm"});
        return;
      }
      if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
      if (kw == "vcpus") {
        auto v = ReadInteger(x.assigned, d_, kw, 1, 64);
        if (v) draft_.microvm_vcpus = Set<uint32_t>{static_cast<uint32_t>(*v), Here(x)};
      } else {
        auto v = ReadChoice(x.assigned, d_, "kvm mode", {"auto", "require", "never"});
        if (v) draft_.microvm_kvm = Set<plan::KvmMode>{*plan::KvmModeFromName(*v), Here(x)};
      }
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Mounts

  std::optional<std::string> PathValue(const Value& v, const char* what) {
    auto s = ReadString(v, d_, what);
    if (!s) return std::nullopt;
    if (!plan::IsNormalAbsolutePath(*s)) {
      d_.Error("E029", v.span,
               std::string(what) + " \"" + *s + "\" is not an absolute, normalised path",
               "paths start with `/` and have no `.`, `..`, `//` or trailing `/`");
      return std::nullopt;
    }
    return s;
  }

  void Rootfs(const Statement& s) {
    if (s.head.size() != 3 || s.has_assignment || s.has_block ||
        s.head[1].kind != ValueKind::kIdent) {
      d_.Error("E027", s.span, "`rootfs` is written `rootfs host_readonly [\"/usr\", ...]`");
      return;
    }
    if (!ReadChoice(s.head[1], d_, "rootfs kind", {"host_readonly"})) return;
    const auto* items = ReadList(s.head[2], d_, "rootfs host_readonly");
    if (!items) return;
    Origin o = Here(s);
    std::vector<Set<plan::Mount>> rootfs;
    std::set<std::string> seen;
    for (const Value& item : *items) {
      auto p = PathValue(item, "rootfs path");
      if (!p) continue;
      if (!seen.insert(*p).second) {
        d_.Error("E036", item.span, "\"" + *p + "\" is listed twice");
        continue;
      }
      plan::Mount m;
      m.kind = plan::MountKind::kBind;
      m.source = m.target = *p;
      m.read_only = true;
      m.noexec = false;  // the programs live here
      rootfs.push_back({m, o});
    }
    draft_.rootfs = std::move(rootfs);
  }

  void Mount(const Statement& s, std::set<std::string>& targets) {
    // mount KIND at "TARGET" [{...}]   |   mount bind "SOURCE" at "TARGET" [{...}]
    const char* shape =
        "write `mount tmpfs|input|output at \"/path\" { ... }` or "
        "`mount bind \"/host/path\" at \"/path\"`";
    if (s.head.size() < 2 || s.has_assignment || s.head[1].kind != ValueKind::kIdent) {
      d_.Error("E027", s.span, "malformed `mount` statement", shape);
      return;
    }
    auto kind_name = ReadChoice(s.head[1], d_, "mount kind", {"tmpfs", "input", "output", "bind"});
    if (!kind_name) return;
    plan::Mount m;
    m.kind = *plan::MountKindFromName(*kind_name);
    size_t at = m.kind == plan::MountKind::kBind ? 3 : 2;
    if (s.head.size() != at + 2 || s.head[at].kind != ValueKind::kIdent ||
        s.head[at].text != "at") {
      d_.Error("E027", s.span, "malformed `mount " + *kind_name + "` statement", shape);
      return;
    }
    std::optional<std::string> source;
    if (m.kind == plan::MountKind::kBind) {
      source = PathValue(s.head[2], "bind source");
      if (!source) return;
      m.source = *source;
    }
    auto target = PathValue(s.head[at + 1], "mount target");
    if (!target) return;
    m.target = *target;
    if (!targets.insert(m.target).second) {
      d_.Error("E025", s.head[at + 1].span, "\"" + m.target + "\" is mounted twice in this policy");
      return;
    }
    // Defaults by kind: writable kinds are noexec; read-only binds keep exec (programs live there).
    bool writable_kind = m.kind == plan::MountKind::kTmpfs || m.kind == plan::MountKind::kOutput;
    m.read_only = !writable_kind;
    m.noexec = m.kind != plan::MountKind::kBind;
    std::optional<uint64_t> size;
    bool size_written = false;
    Origin origin = Here(s);
    if (s.has_block) {
      std::map<std::string, dsl::Span> seen;
      Each(s, [&](const Statement& x) {
        std::string kw = Keyword(x, d_);
        if (kw.empty()) return;
        if (kw != "size" && kw != "mode" && kw != "exec") {
          UnknownKeyword(x, d_, kw, "a mount", {"size", "mode", "exec"});
          return;
        }
        if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
        if (kw == "size") {
          if (!writable_kind) {
            d_.Error("E037", x.span, "only tmpfs and output mounts take a `size`");
            return;
          }
          size_written = true;
          size = ReadSize(x.assigned, d_, "size");
          if (size && *size == 0)
            d_.Error("E023", x.assigned.span, "`size` must be greater than zero");
        } else if (kw == "mode") {
          auto mode = ReadChoice(x.assigned, d_, "mount mode", {"ro", "rw"});
          if (!mode) return;
          if (writable_kind && *mode == "ro") {
            d_.Error("E037", x.assigned.span,
                     std::string("a ") + *kind_name + " mount is always writable (`mode = rw`)");
          } else if (m.kind == plan::MountKind::kInput && *mode == "rw") {
            d_.Error("E037", x.assigned.span, "the input mount is always read-only (`mode = ro`)");
          } else {
            m.read_only = *mode == "ro";
            if (m.kind == plan::MountKind::kBind && !m.read_only) m.noexec = true;
          }
        } else {
          auto exec = ReadBool(x.assigned, d_, "exec");
          if (exec) m.noexec = !*exec;
        }
      });
    }
    if (writable_kind) {
      if (!size) {
        if (size_written) return;  // its error is already reported
        d_.Error("E024", s.span,
                 std::string("a ") + *kind_name + " mount needs a size cap: `{ size = 64MiB }`");
        return;
      }
      m.size_bytes = *size;
    }
    for (auto& existing : draft_.mounts) {
      if (existing.value.target == m.target) {
        existing = {m, origin};  // a redefinition in a child replaces the inherited mount in place
        return;
      }
    }
    draft_.mounts.push_back({m, origin});
  }

  void Unmount(const Statement& s) {
    if (s.head.size() != 2 || s.has_assignment || s.has_block) {
      d_.Error("E027", s.span, "`unmount` is written `unmount \"/path\"`");
      return;
    }
    auto target = PathValue(s.head[1], "unmount target");
    if (!target) return;
    for (auto* list : {&draft_.mounts, &draft_.rootfs}) {
      for (auto it = list->begin(); it != list->end(); ++it) {
        if (it->value.target == *target) {
          list->erase(it);
          return;
        }
      }
    }
    d_.Error("E034", s.head[1].span, "nothing is mounted at \"" + *target + "\" to unmount",
             "`unmount` removes a mount inherited through `extends`");
  }

  // ---------------------------------------------------------------------------------------------
  // Network

  // "host:port", "tcp://host:port", "udp://host:port", "[v6]:port".
  std::optional<plan::EgressRule> Egress(const Value& v) {
    auto text = ReadString(v, d_, "egress destination");
    if (!text) return std::nullopt;
    std::string_view t = *text;
    plan::EgressRule r;
    auto fail = [&](const std::string& why) {
      d_.Error("E029", v.span, "invalid egress destination \"" + *text + "\": " + why,
               "write one destination as \"host:port\", \"udp://host:port\" or \"[v6]:port\"");
      return std::nullopt;
    };
    if (auto sep = t.find("://"); sep != std::string_view::npos) {
      std::string_view scheme = t.substr(0, sep);
      if (scheme == "udp")
        r.protocol = plan::Protocol::kUdp;
      else if (scheme != "tcp")
        return fail("unknown protocol `" + std::string(scheme) + "`");
      t.remove_prefix(sep + 3);
    }
    std::string_view host, port;
    if (!t.empty() && t[0] == '[') {
      auto close = t.find(']');
      if (close == std::string_view::npos || close + 1 >= t.size() || t[close + 1] != ':') {
        return fail("expected `[address]:port`");
      }
      host = t.substr(1, close - 1);
      port = t.substr(close + 2);
      auto ip = plan::IpAddress::Parse(host);
      if (!ip || ip->family == AF_INET) return fail("brackets hold an IPv6 address");
      r.host = ip->ToString();
    } else {
      auto colon = t.rfind(':');
      if (colon == std::string_view::npos) return fail("no port");
      host = t.substr(0, colon);
      port = t.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) return fail("IPv6 addresses go in brackets");
      if (host.empty()) return fail("no host");
      if (host.find_first_of("*?/ ") != std::string_view::npos) {
        return fail("a single host name or address, no wildcards, paths or ranges");
      }
      auto ip = plan::IpAddress::Parse(host);
      if (ip) {
        r.host = ip->ToString();
      } else {
        r.host = std::string(host);
        for (auto& c : r.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return fail("the port must be a number from 1 to 65535 (no ranges)");
    }
    unsigned long p = std::stoul(std::string(port));
    if (p == 0 || p > 65535) return fail("the port must be from 1 to 65535");
    r.port = static_cast<uint16_t>(p);
    return r;
  }

  void Network(const Statement& s) {
    if (!ExpectBlock(s, d_, "network")) return;
    std::vector<Set<plan::EgressRule>> egress;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw == "default") {
        if (!Once(seen, kw, x) || !ExpectAssignment(x, d_, kw)) return;
        auto v = ReadChoice(x.assigned, d_, "network default", {"deny", "allow"});
        if (v && *v == "allow") {
          d_.Error("E037", x.assigned.span, "the network default is always `deny`",
                   "grant each destination with `egress \"host:port\"`");
        }
        return;
      }
      if (kw != "egress") {
        UnknownKeyword(x, d_, kw, "`network`", {"default", "egress"});
        return;
      }
      if (x.head.size() != 2 || x.has_assignment || x.has_block) {
        d_.Error("E027", x.span, "`egress` takes one destination: `egress \"host:port\"`",
                 "write one `egress` line per destination");
        return;
      }
      auto r = Egress(x.head[1]);
      if (!r) return;
      for (const auto& e : egress) {
        if (e.value.host == r->host && e.value.port == r->port && e.value.protocol == r->protocol) {
          d_.Error("E036", x.head[1].span, "this destination is already granted");
          return;
        }
      }
      egress.push_back({*r, Here(x)});
    });
    // A network block states the whole egress set; a child's block replaces its parent's.
    draft_.egress = std::move(egress);
  }

  // ---------------------------------------------------------------------------------------------
  // Environment

  void Env(const Statement& s) {
    if (!ExpectBlock(s, d_, "env")) return;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw != "set" && kw != "unset") {
        UnknownKeyword(x, d_, kw, "`env`", {"set", "unset"});
        return;
      }
      bool set = kw == "set";
      if (x.head.size() != 2 || x.head[1].kind != ValueKind::kIdent || x.has_block ||
          x.has_assignment != set) {
        d_.Error("E027", x.span, set ? "write `set NAME = \"value\"`" : "write `unset NAME`");
        return;
      }
      const std::string& name = x.head[1].text;
      if (!Once(seen, name, x)) return;
      if (!set) {
        if (!draft_.env.erase(name)) {
          d_.Error("E034", x.head[1].span, "`" + name + "` is not set, so it cannot be unset");
        }
        return;
      }
      auto v = ReadString(x.assigned, d_, "an environment value");
      if (v) draft_.env[name] = Set<std::string>{*v, Here(x)};
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Syscalls

  void Syscalls(const Statement& s) {
    if (!ExpectBlock(s, d_, "syscalls")) return;
    std::map<std::string, dsl::Span> seen_default;
    std::map<std::string, dsl::Span> seen;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      if (kw == "default") {
        if (!Once(seen_default, kw, x) || !ExpectAssignment(x, d_, kw)) return;
        auto v = ReadChoice(x.assigned, d_, "syscall default", {"allow", "log", "deny", "kill"});
        if (!v) return;
        plan::SyscallAction a = *v == "allow"  ? plan::SyscallAction::kAllow
                                : *v == "log"  ? plan::SyscallAction::kLog
                                : *v == "kill" ? plan::SyscallAction::kKill
                                               : plan::SyscallAction::kErrno;
        draft_.seccomp_default = Set<plan::SyscallAction>{a, Here(x)};
        return;
      }
      static const std::vector<std::string_view> kActions = {"allow", "log", "deny", "errno",
                                                             "kill"};
      bool known = false;
      for (auto a : kActions) known |= kw == a;
      if (!known) {
        std::vector<std::string_view> all = kActions;
        all.push_back("default");
        UnknownKeyword(x, d_, kw, "`syscalls`", all);
        return;
      }
      plan::SyscallRule rule;
      size_t list_at = 1;
      if (kw == "errno") {
        // errno ENOSYS [names]  |  errno 38 [names]
        if (x.head.size() != 3 || x.has_assignment || x.has_block) {
          d_.Error("E027", x.span, "write `errno ENOSYS [name, ...]`");
          return;
        }
        const Value& e = x.head[1];
        if (e.kind == ValueKind::kInteger) {
          auto n = ReadInteger(e, d_, "errno value", 1, 4095);
          if (!n) return;
          rule.errno_value = static_cast<int>(*n);
        } else if (e.kind == ValueKind::kIdent) {
          auto n = ErrnoFromName(e.text);
          if (!n) {
            std::string near = dsl::ClosestMatch(e.text, ErrnoNames());
            d_.Error("E035", e.span, "unknown errno name `" + e.text + "`",
                     near.empty() ? "use a name such as EPERM or ENOSYS, or a number"
                                  : "did you mean `" + near + "`?");
            return;
          }
          rule.errno_value = *n;
        } else {
          d_.Error("E021", e.span, "errno needs a name such as ENOSYS, found " + DescribeValue(e));
          return;
        }
        rule.action = plan::SyscallAction::kErrno;
        list_at = 2;
      } else {
        if (x.head.size() != 2 || x.has_assignment || x.has_block) {
          d_.Error("E027", x.span, "write `" + kw + " [name, ...]`");
          return;
        }
        rule.action = kw == "allow"  ? plan::SyscallAction::kAllow
                      : kw == "log"  ? plan::SyscallAction::kLog
                      : kw == "kill" ? plan::SyscallAction::kKill
                                     : plan::SyscallAction::kErrno;
        rule.errno_value = 1;  // EPERM for `deny`
      }
      const auto* items = ReadList(x.head[list_at], d_, "a syscall rule");
      if (!items) return;
      Origin o = Here(x);
      for (const Value& item : *items) {
        if (item.kind != ValueKind::kIdent) {
          d_.Error("E021", item.span,
                   "a syscall name needs an identifier, found " + DescribeValue(item));
          continue;
        }
        if (!plan::IsKnownSyscall(item.text)) {
          // "Did you mean" costs an edit distance per known name: only for the first few.
          std::string near;
          if (++suggestions_ <= 16) {
            std::vector<std::string_view> names(plan::KnownSyscalls().begin(),
                                                plan::KnownSyscalls().end());
            near = dsl::ClosestMatch(item.text, names);
          }
          d_.Error("E035", item.span, "unknown system call `" + item.text + "`",
                   near.empty() ? "names are x86_64 system calls as in `man 2 syscalls`"
                                : "did you mean `" + near + "`?");
          continue;
        }
        if (!Once(seen, item.text, Statement{item.span, {}, {item}})) continue;
        plan::SyscallRule r = rule;
        r.name = item.text;
        draft_.syscalls[item.text] = Set<plan::SyscallRule>{r, o};
      }
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Validators

  void Validate(const Statement& s) {
    const char* shape =
        "write `validate stdout { ... }`, `validate stderr { ... }` or "
        "`validate file \"/out/path\" { ... }`";
    if (s.head.size() < 2 || s.has_assignment || !s.has_block) {
      d_.Error("E027", s.span, "malformed `validate` statement", shape);
      return;
    }
    auto target = ReadChoice(s.head[1], d_, "validator target", {"stdout", "stderr", "file"});
    if (!target) return;
    DraftValidator dv;
    dv.v.target = *plan::ValidatorTargetFromName(*target);
    if ((dv.v.target == plan::ValidatorTarget::kFile) != (s.head.size() == 3)) {
      d_.Error("E027", s.span, "malformed `validate " + *target + "` statement", shape);
      return;
    }
    if (dv.v.target == plan::ValidatorTarget::kFile) {
      auto p = ReadString(s.head[2], d_, "validated file path");
      if (!p) return;
      dv.v.path = *p;
    }
    dv.origin = Here(s);
    std::map<std::string, dsl::Span> seen;
    bool has_max = false;
    std::optional<dsl::Span> json_detail;
    Each(s, [&](const Statement& x) {
      std::string kw = Keyword(x, d_);
      if (kw.empty()) return;
      static const std::vector<std::string_view> kKeys = {
          "max",    "overflow", "utf8", "control",        "max_lines",
          "reject", "redact",   "json", "json_max_depth", "require"};
      bool known = false;
      for (auto k : kKeys) known |= kw == k;
      if (!known) {
        UnknownKeyword(x, d_, kw, "a validator", kKeys);
        return;
      }
      if (kw == "reject" || kw == "redact") {
        Regex(x, kw, dv);
        return;
      }
      if (kw == "require" && x.head.size() == 2 && x.has_assignment && !x.has_block) {
        // require "key" = type   (one key; quoted keys may hold any character)
        RequireOne(x, x.head[1], dv);
        json_detail = x.span;
        return;
      }
      if (!Once(seen, kw, x)) return;
      if (kw == "require") {
        Require(x, dv);
        json_detail = x.span;
        return;
      }
      if (!ExpectAssignment(x, d_, kw)) return;
      Origin o = Here(x);
      if (kw == "max") {
        has_max = true;  // written; a bad value is reported below, not as missing
        auto v = ReadSize(x.assigned, d_, "max");
        if (v && *v == 0)
          d_.Error("E023", x.assigned.span, "`max` must be greater than zero");
        else if (v) {
          dv.v.max_bytes = *v;
          dv.fields["max_bytes"] = o;
        }
      } else if (kw == "overflow") {
        auto v = ReadChoice(x.assigned, d_, "overflow action", {"reject", "truncate"});
        if (!v) return;
        if (*v == "truncate" && dv.v.target == plan::ValidatorTarget::kFile) {
          d_.Error("E037", x.assigned.span, "a file validator rejects oversized files",
                   "`overflow = truncate` applies to stdout and stderr");
          return;
        }
        dv.v.on_overflow = *plan::OverflowActionFromName(*v);
        dv.fields["on_overflow"] = o;
      } else if (kw == "utf8") {
        auto v = ReadBool(x.assigned, d_, "utf8");
        if (v) dv.v.utf8 = *v, dv.fields["utf8"] = o;
      } else if (kw == "control") {
        auto v = ReadChoice(x.assigned, d_, "control character rule", {"allow", "strip", "reject"});
        if (v) dv.v.control = *plan::ControlCharsFromName(*v), dv.fields["control"] = o;
      } else if (kw == "max_lines") {
        auto v = ReadInteger(x.assigned, d_, "max_lines", 1, 1ULL << 32);
        if (v) dv.v.max_lines = *v, dv.fields["max_lines"] = o;
      } else if (kw == "json") {
        auto v = ReadBool(x.assigned, d_, "json");
        if (v && *v) {
          if (!dv.v.json) dv.v.json = plan::JsonRule{};
          dv.fields["json"] = o;
        }
      } else if (kw == "json_max_depth") {
        auto v = ReadInteger(x.assigned, d_, "json_max_depth", 1, plan::kMaxJsonDepth);
        if (v) {
          pending_depth_ = *v;
          json_detail = x.span;
          dv.fields["json.max_depth"] = o;
        }
      }
    });
    if (json_detail) {
      if (!dv.v.json) {
        d_.Error("E037", *json_detail, "`json_max_depth` and `require` need `json = true`");
      } else if (pending_depth_) {
        dv.v.json->max_depth = *pending_depth_;
      }
    }
    if (dv.v.json && !pending_required_.empty()) dv.v.json->required = pending_required_;
    pending_depth_.reset();
    pending_required_.clear();
    if (!has_max) {
      d_.Error("E024", s.span, "a validator needs a size cap: `max = 64KiB`");
      return;
    }
    if (dv.v.max_bytes == 0) return;  // `max` had an error
    draft_.validators.push_back(std::move(dv));
  }

  void Regex(const Statement& x, const std::string& kw, DraftValidator& dv) {
    // reject /re/   |   redact /re/   |   redact /re/ with "text"
    bool redact = kw == "redact";
    bool ok =
        !x.has_assignment && !x.has_block &&
        (x.head.size() == 2 || (redact && x.head.size() == 4 &&
                                x.head[2].kind == ValueKind::kIdent && x.head[2].text == "with"));
    if (!ok) {
      d_.Error("E027", x.span,
               redact ? "write `redact /pattern/` or `redact /pattern/ with \"text\"`"
                      : "write `reject /pattern/`");
      return;
    }
    if (x.head[1].kind != ValueKind::kRegex) {
      d_.Error("E021", x.head[1].span,
               "`" + kw + "` needs a /regex/, found " + DescribeValue(x.head[1]));
      return;
    }
    plan::RegexRule r;
    r.pattern = x.head[1].text;
    r.action = redact ? plan::RegexAction::kRedact : plan::RegexAction::kReject;
    if (x.head.size() == 4) {
      auto t = ReadString(x.head[3], d_, "the replacement");
      if (!t) return;
      r.replacement = *t;
    }
    dv.fields["regex[" + std::to_string(dv.v.regex.size()) + "]"] = Here(x);
    dv.v.regex.push_back(std::move(r));
  }

  void RequireOne(const Statement& x, const Value& key, DraftValidator& dv) {
    if (key.kind != ValueKind::kIdent && key.kind != ValueKind::kString) {
      d_.Error("E021", key.span,
               "a required key is a name or a string, found " + DescribeValue(key));
      return;
    }
    if (pending_required_.count(key.text)) {
      d_.Error("E025", key.span, "key \"" + key.text + "\" is required twice");
      return;
    }
    dv.fields["json.required"] = Here(x);
    auto type = ReadChoice(x.assigned, d_, "json type",
                           {"string", "number", "integer", "boolean", "object", "array", "null"});
    if (type) pending_required_[key.text] = *type;
  }

  void Require(const Statement& x, DraftValidator& dv) {
    if (!ExpectBlock(x, d_, "require")) return;
    Origin o = Here(x);
    dv.fields["json.required"] = o;
    std::map<std::string, dsl::Span> seen;
    Each(x, [&](const Statement& k) {
      if (k.head.size() != 1 || !k.has_assignment || k.has_block ||
          (k.head[0].kind != ValueKind::kIdent && k.head[0].kind != ValueKind::kString)) {
        d_.Error("E027", k.span, "write `key = type`, e.g. `answer = integer`");
        return;
      }
      const std::string& key = k.head[0].text;
      if (!Once(seen, key, k)) return;
      auto type = ReadChoice(k.assigned, d_, "json type",
                             {"string", "number", "integer", "boolean", "object", "array", "null"});
      if (type) pending_required_[key] = *type;
    });
  }

  Diags& d_;
  Draft& draft_;
  OverrideTable& ov_;
  const std::string policy_name_;
  std::optional<size_t> active_;
  int suggestions_ = 0;
  std::optional<uint64_t> pending_depth_;
  std::map<std::string, std::string> pending_required_;
};

}  // namespace

std::optional<PolicyHeader> ReadPolicyHeader(const dsl::File& file, Diags& d) {
  const Statement* found = nullptr;
  for (const Statement& s : file.statements) {
    if (!s.head.empty() && s.head[0].kind == ValueKind::kIdent && s.head[0].text == "policy") {
      if (found) {
        d.Error("E028", s.head[0].span, "a file holds one `policy`",
                "the first one starts at line " + std::to_string(found->span.begin.line));
        continue;
      }
      found = &s;
      continue;
    }
    std::string kw = s.head.empty() || s.head[0].kind != ValueKind::kIdent ? "" : s.head[0].text;
    std::string near = dsl::ClosestMatch(kw, {"policy"});
    d.Error("E028", s.head.empty() ? s.span : s.head[0].span,
            "only a `policy \"name\" { ... }` block may appear at the top level",
            near == "policy" && kw != "policy" ? "did you mean `policy`?"
                                               : "put every setting inside the policy block");
  }
  if (!found) {
    if (d.errors() == 0) {
      d.Error("E028", dsl::Span{}, "the file holds no `policy \"name\" { ... }` block");
    }
    return std::nullopt;
  }
  const Statement& s = *found;
  bool shape = s.has_block && !s.has_assignment &&
               (s.head.size() == 2 || (s.head.size() == 4 && s.head[2].kind == ValueKind::kIdent &&
                                       s.head[2].text == "extends"));
  if (!shape) {
    d.Error("E027", s.span, "malformed policy header",
            "write `policy \"name\" { ... }` or `policy \"name\" extends \"parent\" { ... }`");
    return std::nullopt;
  }
  PolicyHeader h;
  h.stmt = found;
  auto name = ReadString(s.head[1], d, "the policy name");
  if (!name) return std::nullopt;
  if (!ValidPolicyName(*name)) {
    d.Error("E033", s.head[1].span, "invalid policy name \"" + *name + "\"",
            "names are 1 to 64 letters, digits, `-`, `_` or `.`, not starting with `.` or `-`");
    return std::nullopt;
  }
  h.name = *name;
  if (s.head.size() == 4) {
    auto parent = ReadString(s.head[3], d, "the extended policy's name");
    if (!parent) return std::nullopt;
    if (parent->find('/') != std::string::npos || parent->find("..") != std::string::npos ||
        !ValidPolicyName(*parent)) {
      d.Error("E041", s.head[3].span, "invalid policy name \"" + *parent + "\" after `extends`",
              "name the policy, not a path: it is looked up as NAME.policy in the search path");
      return std::nullopt;
    }
    h.extends = *parent;
    h.extends_span = s.head[3].span;
  }
  return h;
}

void LowerPolicy(const PolicyHeader& header, Diags& d, Draft& draft, OverrideTable& overrides) {
  Lowerer(d, draft, overrides, header.name).Policy(*header.stmt);
}

}  // namespace safex::compiler
