#include "compiler/compare.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "compiler/values.h"
#include "plan/plan_json.h"
#include "plan/verify.h"

namespace safex::compiler {
namespace {

using Effect = Change::Effect;

std::string Idx(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

class Comparer {
 public:
  Comparer(const plan::Plan& o, const plan::Plan& n) : o_(o), n_(n) {}

  std::vector<Change> Run() {
    Trust();
    Backend();
    Limits();
    Process();
    Mounts();
    Egress();
    Env();
    Caller();
    Container();
    Session();
    Seccomp();
    Validators();
    Outputs();
    Tests();
    return std::move(out_);
  }

 private:
  void Add(Effect e, const char* code, std::string field, std::string desc) {
    out_.push_back(Change{e, e == Effect::kLoosens ? code : "", std::move(field), std::move(desc)});
  }

  void Trust() {
    if (o_.trust == n_.trust) return;
    bool loosens = n_.trust == plan::Trust::kTrusted;
    Add(loosens ? Effect::kLoosens : Effect::kTightens, "E046", "trust",
        std::string("trust changed from ") + plan::TrustName(o_.trust) + " to " +
            plan::TrustName(n_.trust));
  }

  void Backend() {
    if (o_.backend != n_.backend) {
      int a = BackendStrength(o_.backend), b = BackendStrength(n_.backend);
      Add(b < a ? Effect::kLoosens : Effect::kTightens, "E047", "backend",
          std::string("isolation changed from ") + plan::BackendName(o_.backend) + " to " +
              plan::BackendName(n_.backend));
    }
    if (o_.gvisor.platform != n_.gvisor.platform) {
      Add(Effect::kNeutral, "", "gvisor.platform",
          "gvisor platform changed from " + o_.gvisor.platform + " to " + n_.gvisor.platform);
    }
    if (o_.microvm.vcpus != n_.microvm.vcpus) {
      Number("microvm.vcpus", "microvm vcpus", o_.microvm.vcpus, n_.microvm.vcpus, 0);
    }
    if (o_.microvm.kvm != n_.microvm.kvm) {
      Add(Effect::kNeutral, "", "microvm.kvm",
          std::string("microvm kvm changed from ") + plan::KvmModeName(o_.microvm.kvm) + " to " +
              plan::KvmModeName(n_.microvm.kvm));
    }
  }

  // kind: 0 count, 1 duration, 2 size
  void Number(const std::string& field, const std::string& name, uint64_t a, uint64_t b, int kind,
              const char* code = "E045") {
    if (a == b) return;
    auto fmt = [&](uint64_t v) {
      return kind == 1 ? FormatDuration(v) : kind == 2 ? FormatSize(v) : std::to_string(v);
    };
    // Zero is "not set": no cap at all. Setting one tightens; dropping one loosens.
    if (a == 0) {
      Add(Effect::kTightens, code, field, name + " set to " + fmt(b));
      return;
    }
    if (b == 0) {
      Add(Effect::kLoosens, code, field, name + " (" + fmt(a) + ") removed");
      return;
    }
    Add(b > a ? Effect::kLoosens : Effect::kTightens, code, field,
        name + (b > a ? " raised" : " lowered") + " from " + fmt(a) + " to " + fmt(b));
  }

  void Limits() {
    const auto& a = o_.limits;
    const auto& b = n_.limits;
    Number("limits.wall_time_ns", "wall_time", a.wall_time_ns, b.wall_time_ns, 1);
    Number("limits.cpu_time_ns", "cpu_time", a.cpu_time_ns, b.cpu_time_ns, 1);
    Number("limits.memory_bytes", "memory", a.memory_bytes, b.memory_bytes, 2);
    Number("limits.pids", "pids", a.pids, b.pids, 0);
    Number("limits.open_files", "open_files", a.open_files, b.open_files, 0);
    Number("limits.output_bytes", "output", a.output_bytes, b.output_bytes, 2);
    Number("limits.disk_bytes", "disk", a.disk_bytes, b.disk_bytes, 2);
    Number("limits.cpus", "cpus", a.cpus, b.cpus, 0);
  }

  void Process() {
    auto id = [&](const char* field, const char* name, uint32_t a, uint32_t b) {
      if (a == b) return;
      Effect e = b == 0 ? Effect::kLoosens : a == 0 ? Effect::kTightens : Effect::kNeutral;
      Add(e, "E051", field,
          std::string(name) + " changed from " + std::to_string(a) + " to " + std::to_string(b) +
              (b == 0 ? " (root)" : ""));
    };
    id("process.uid", "user", o_.process.uid, n_.process.uid);
    id("process.gid", "group", o_.process.gid, n_.process.gid);
    if (o_.process.cwd != n_.process.cwd) {
      Add(Effect::kNeutral, "", "process.cwd",
          "cwd changed from \"" + o_.process.cwd + "\" to \"" + n_.process.cwd + "\"");
    }
  }

  static std::string Describe(const plan::Mount& m) {
    std::string s = std::string(plan::MountKindName(m.kind));
    if (m.kind == plan::MountKind::kBind) s += " \"" + m.source + "\"";
    s += " at \"" + m.target + "\"";
    return s;
  }

  // An old bind mount that shows everything the new bind `m` shows, at the same place, with flags
  // at least as loose: then `m` is a narrowing (rootfs ["/usr/lib"] in place of ["/usr"]).
  const plan::Mount* WiderBind(const plan::Mount& m) const {
    if (m.kind != plan::MountKind::kBind) return nullptr;
    for (const auto& o : o_.mounts) {
      if (o.kind != plan::MountKind::kBind || !plan::IsNormalAbsolutePath(o.target) ||
          !plan::IsNormalAbsolutePath(o.source) || !plan::PathWithin(m.target, o.target) ||
          !plan::PathWithin(m.source, o.source)) {
        continue;
      }
      std::string rel_target = o.target == "/" ? m.target : m.target.substr(o.target.size());
      std::string rel_source = o.source == "/" ? m.source : m.source.substr(o.source.size());
      if (rel_target != rel_source) continue;
      bool flags_ok = (m.read_only || !o.read_only) && (m.noexec || !o.noexec) &&
                      (m.nosuid || !o.nosuid) && (m.nodev || !o.nodev);
      if (flags_ok) return &o;
    }
    return nullptr;
  }

  void Mounts() {
    std::map<std::string, size_t> old_by_target;
    for (size_t i = 0; i < o_.mounts.size(); ++i) old_by_target[o_.mounts[i].target] = i;
    std::set<std::string> kept;
    for (size_t i = 0; i < n_.mounts.size(); ++i) {
      const plan::Mount& m = n_.mounts[i];
      std::string f = Idx("mounts", i);
      auto it = old_by_target.find(m.target);
      if (it == old_by_target.end()) {
        if (const plan::Mount* wider = WiderBind(m)) {
          Add(Effect::kTightens, "", f, "narrows mount " + Describe(*wider) + " to " + Describe(m));
        } else {
          Add(Effect::kLoosens, "E048", f, "adds mount " + Describe(m));
        }
        continue;
      }
      kept.insert(m.target);
      const plan::Mount& o = o_.mounts[it->second];
      if (o.kind != m.kind || o.source != m.source) {
        Add(Effect::kLoosens, "E048", f, "replaces mount " + Describe(o) + " with " + Describe(m));
        continue;
      }
      if (o.read_only != m.read_only) {
        Add(m.read_only ? Effect::kTightens : Effect::kLoosens, "E048", f + ".read_only",
            "mount at \"" + m.target + "\" made " + (m.read_only ? "read-only" : "writable"));
      }
      if (o.size_bytes != m.size_bytes) {
        Number(f + ".size_bytes", "size of mount \"" + m.target + "\"", o.size_bytes, m.size_bytes,
               2);
      }
      auto flag = [&](bool a, bool b, const char* name) {
        if (a == b) return;
        Add(b ? Effect::kTightens : Effect::kLoosens, "E048", f + "." + name,
            "mount at \"" + m.target + "\" " + (b ? "now " : "no longer ") + name);
      };
      flag(o.noexec, m.noexec, "noexec");
      flag(o.nosuid, m.nosuid, "nosuid");
      flag(o.nodev, m.nodev, "nodev");
    }
    for (size_t i = 0; i < o_.mounts.size(); ++i) {
      if (!kept.count(o_.mounts[i].target)) {
        Add(Effect::kTightens, "", Idx("mounts", i), "removes mount " + Describe(o_.mounts[i]));
      }
    }
  }

  static std::string Dest(const plan::EgressRule& e) {
    bool v6 = e.host.find(':') != std::string::npos;
    return std::string(e.protocol == plan::Protocol::kUdp ? "udp://" : "") +
           (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
  }

  void Egress() {
    using Key = std::tuple<std::string, uint16_t, plan::Protocol>;
    std::set<Key> old_set, new_set;
    for (const auto& e : o_.network.egress) old_set.insert({e.host, e.port, e.protocol});
    for (const auto& e : n_.network.egress) new_set.insert({e.host, e.port, e.protocol});
    for (size_t i = 0; i < n_.network.egress.size(); ++i) {
      const auto& e = n_.network.egress[i];
      if (!old_set.count({e.host, e.port, e.protocol})) {
        Add(Effect::kLoosens, "E049", Idx("network.egress", i), "grants egress to " + Dest(e));
      }
    }
    for (size_t i = 0; i < o_.network.egress.size(); ++i) {
      const auto& e = o_.network.egress[i];
      if (!new_set.count({e.host, e.port, e.protocol})) {
        Add(Effect::kTightens, "", Idx("network.egress", i), "revokes egress to " + Dest(e));
      }
    }
  }

  void Env() {
    for (const auto& [k, v] : n_.env) {
      auto it = o_.env.find(k);
      if (it == o_.env.end()) {
        Add(Effect::kNeutral, "", "env." + k, "sets environment variable " + k);
      } else if (it->second != v) {
        Add(Effect::kNeutral, "", "env." + k, "changes environment variable " + k);
      }
    }
    for (const auto& [k, v] : o_.env) {
      if (!n_.env.count(k))
        Add(Effect::kNeutral, "", "env." + k, "unsets environment variable " + k);
    }
  }

  // What callers may choose per run: each new name or directory is something a caller could not
  // choose before (E056); each one taken away tightens.
  void Caller() {
    auto diff = [this](const std::vector<std::string>& now, const std::vector<std::string>& was,
                       const std::string& field, const std::string& what) {
      for (const std::string& x : now) {
        if (std::find(was.begin(), was.end(), x) == was.end()) {
          Add(Effect::kLoosens, "E056", field, "lets callers choose " + what + " " + x);
        }
      }
      for (const std::string& x : was) {
        if (std::find(now.begin(), now.end(), x) == now.end()) {
          Add(Effect::kTightens, "", field, "no longer lets callers choose " + what + " " + x);
        }
      }
    };
    diff(n_.caller.env, o_.caller.env, "caller.env", "environment variable");
    diff(n_.caller.cwd, o_.caller.cwd, "caller.cwd", "working directory under");
  }

  // Container images: a list where the extended policy had none tightens; an image the extended
  // policy's list did not allow, or no list where it had one, loosens (E098).
  void Container() {
    const auto& now = n_.container.images;
    const auto& was = o_.container.images;
    if (was.empty()) {
      if (!now.empty()) Add(Effect::kTightens, "", "container.images", "limits the images");
      return;
    }
    if (now.empty()) {
      Add(Effect::kLoosens, "E098", "container.images", "allows any image");
      return;
    }
    for (const std::string& i : now) {
      plan::ContainerRules old_rules{was};
      if (!plan::ImageAllowed(old_rules, i)) {
        Add(Effect::kLoosens, "E098", "container.images", "allows image " + i);
      }
    }
    for (const std::string& i : was) {
      if (std::find(now.begin(), now.end(), i) == now.end()) {
        Add(Effect::kTightens, "", "container.images", "no longer allows image " + i);
      }
    }
  }

  // Sessions: allowing them where the extended policy did not, or longer or more commands, lets a
  // caller keep state across commands it could not before (E096); the reverse tightens.
  void Session() {
    const plan::SessionLimits& n = n_.session;
    const plan::SessionLimits& o = o_.session;
    if (n.allowed && !o.allowed) {
      Add(Effect::kLoosens, "E096", "session", "allows sessions (state kept across commands)");
      return;
    }
    if (!n.allowed) {
      if (o.allowed) Add(Effect::kTightens, "", "session", "no longer allows sessions");
      return;
    }
    Number("session.max_execs", "session max_execs", o.max_execs, n.max_execs, 0, "E096");
    Number("session.idle_timeout_ns", "session idle_timeout", o.idle_timeout_ns,
           n.idle_timeout_ns, 1, "E096");
    Number("session.max_lifetime_ns", "session max_lifetime", o.max_lifetime_ns,
           n.max_lifetime_ns, 1, "E096");
  }

  static std::string ActionText(plan::SyscallAction a, int err) {
    if (a == plan::SyscallAction::kErrno) return err == 1 ? "deny" : "errno " + ErrnoName(err);
    return plan::SyscallActionName(a);
  }

  void Seccomp() {
    const auto& a = o_.seccomp;
    const auto& b = n_.seccomp;
    if (a.default_action != b.default_action) {
      int x = ActionStrictness(a.default_action), y = ActionStrictness(b.default_action);
      Add(y < x ? Effect::kLoosens : Effect::kTightens, "E050", "seccomp.default_action",
          "syscall default changed from " + ActionText(a.default_action, a.default_errno) + " to " +
              ActionText(b.default_action, b.default_errno));
    }
    std::map<std::string, const plan::SyscallRule*> old_rules, new_rules;
    std::map<std::string, size_t> new_index, old_index;
    for (size_t i = 0; i < a.rules.size(); ++i)
      old_rules[a.rules[i].name] = &a.rules[i], old_index[a.rules[i].name] = i;
    for (size_t i = 0; i < b.rules.size(); ++i)
      new_rules[b.rules[i].name] = &b.rules[i], new_index[b.rules[i].name] = i;
    std::set<std::string> names;
    for (const auto& [k, v] : old_rules) names.insert(k);
    for (const auto& [k, v] : new_rules) names.insert(k);
    for (const auto& name : names) {
      auto oi = old_rules.find(name);
      auto ni = new_rules.find(name);
      plan::SyscallAction oa = oi != old_rules.end() ? oi->second->action : a.default_action;
      int oe = oi != old_rules.end() ? oi->second->errno_value : a.default_errno;
      plan::SyscallAction na = ni != new_rules.end() ? ni->second->action : b.default_action;
      int ne = ni != new_rules.end() ? ni->second->errno_value : b.default_errno;
      std::string field = ni != new_rules.end() ? Idx("seccomp.rules", new_index[name])
                                                : Idx("seccomp.rules", old_index[name]);
      if (oa == na && (oa != plan::SyscallAction::kErrno || oe == ne)) continue;
      int x = ActionStrictness(oa), y = ActionStrictness(na);
      Effect e = y < x ? Effect::kLoosens : y > x ? Effect::kTightens : Effect::kNeutral;
      Add(e, "E050", field,
          "syscall " + name + " changed from " + ActionText(oa, oe) + " to " + ActionText(na, ne));
    }
  }

  static std::string VName(const plan::Validator& v) {
    return v.target == plan::ValidatorTarget::kFile
               ? "validator of file \"" + v.path + "\""
               : std::string("validator of ") + plan::ValidatorTargetName(v.target);
  }

  void Validators() {
    // Validators pair up by target and path, in order; unpaired ones are added or removed.
    std::map<std::pair<int, std::string>, std::vector<size_t>> old_groups, new_groups;
    for (size_t i = 0; i < o_.validators.size(); ++i) {
      old_groups[{static_cast<int>(o_.validators[i].target), o_.validators[i].path}].push_back(i);
    }
    for (size_t i = 0; i < n_.validators.size(); ++i) {
      new_groups[{static_cast<int>(n_.validators[i].target), n_.validators[i].path}].push_back(i);
    }
    for (const auto& [key, news] : new_groups) {
      auto it = old_groups.find(key);
      size_t paired = it == old_groups.end() ? 0 : std::min(it->second.size(), news.size());
      for (size_t k = 0; k < paired; ++k) {
        OneValidator(it->second[k], news[k]);
      }
      for (size_t k = paired; k < news.size(); ++k) {
        Add(Effect::kTightens, "", Idx("validators", news[k]),
            "adds a " + VName(n_.validators[news[k]]));
      }
    }
    for (const auto& [key, olds] : old_groups) {
      auto it = new_groups.find(key);
      size_t paired = it == new_groups.end() ? 0 : std::min(it->second.size(), olds.size());
      for (size_t k = paired; k < olds.size(); ++k) {
        Add(Effect::kLoosens, "E052", Idx("validators", olds[k]),
            "removes a " + VName(o_.validators[olds[k]]));
      }
    }
  }

  void OneValidator(size_t oi, size_t ni) {
    const plan::Validator& a = o_.validators[oi];
    const plan::Validator& b = n_.validators[ni];
    std::string f = Idx("validators", ni);
    std::string name = VName(b);
    if (a.max_bytes != b.max_bytes) {
      Number(f + ".max_bytes", "max of the " + name, a.max_bytes, b.max_bytes, 2, "E052");
    }
    if (a.on_overflow != b.on_overflow) {
      bool loosens = b.on_overflow == plan::OverflowAction::kTruncate;
      Add(loosens ? Effect::kLoosens : Effect::kTightens, "E052", f + ".on_overflow",
          name + (loosens ? " now truncates instead of rejecting"
                          : " now rejects instead of truncating"));
    }
    if (a.utf8 != b.utf8) {
      Add(b.utf8 ? Effect::kTightens : Effect::kLoosens, "E052", f + ".utf8",
          name + (b.utf8 ? " now requires UTF-8" : " no longer requires UTF-8"));
    }
    if (a.control != b.control) {
      Add(static_cast<int>(b.control) > static_cast<int>(a.control) ? Effect::kTightens
                                                                    : Effect::kLoosens,
          "E052", f + ".control",
          name + " control characters: " + plan::ControlCharsName(a.control) + " -> " +
              plan::ControlCharsName(b.control));
    }
    if (a.max_lines != b.max_lines) {
      uint64_t x = a.max_lines == 0 ? UINT64_MAX : a.max_lines;
      uint64_t y = b.max_lines == 0 ? UINT64_MAX : b.max_lines;
      Add(y > x ? Effect::kLoosens : Effect::kTightens, "E052", f + ".max_lines",
          name + " max_lines " + (a.max_lines ? std::to_string(a.max_lines) : "none") + " -> " +
              (b.max_lines ? std::to_string(b.max_lines) : "none"));
    }
    auto key = [](const plan::RegexRule& r) {
      return std::string(plan::RegexActionName(r.action)) + " /" + r.pattern + "/";
    };
    std::multiset<std::string> ra, rb;
    for (const auto& r : a.regex) ra.insert(key(r) + " " + r.replacement);
    for (const auto& r : b.regex) rb.insert(key(r) + " " + r.replacement);
    for (const auto& r : b.regex) {
      auto it = ra.find(key(r) + " " + r.replacement);
      if (it != ra.end())
        ra.erase(it);
      else
        Add(Effect::kTightens, "", f + ".regex", name + " adds " + key(r));
    }
    for (const auto& r : a.regex) {
      auto it = rb.find(key(r) + " " + r.replacement);
      if (it != rb.end())
        rb.erase(it);
      else
        Add(Effect::kLoosens, "E052", f + ".regex", name + " drops " + key(r));
    }
    if (a.json.has_value() != b.json.has_value()) {
      Add(b.json ? Effect::kTightens : Effect::kLoosens, "E052", f + ".json",
          name + (b.json ? " now requires JSON" : " no longer requires JSON"));
    } else if (a.json && b.json) {
      if (a.json->max_depth != b.json->max_depth) {
        Number(f + ".json.max_depth", "json_max_depth of the " + name, a.json->max_depth,
               b.json->max_depth, 0, "E052");
      }
      for (const auto& [k, t] : a.json->required) {
        auto it = b.json->required.find(k);
        if (it == b.json->required.end()) {
          Add(Effect::kLoosens, "E052", f + ".json.required",
              name + " no longer requires key " + k);
        } else if (it->second != t) {
          Add(Effect::kNeutral, "", f + ".json.required",
              name + " key " + k + " type " + t + " -> " + it->second);
        }
      }
      for (const auto& [k, t] : b.json->required) {
        if (!a.json->required.count(k)) {
          Add(Effect::kTightens, "", f + ".json.required", name + " now requires key " + k);
        }
      }
    }
  }

  void Outputs() {
    Number("outputs.max_files", "outputs max_files", o_.outputs.max_files, n_.outputs.max_files, 0);
    Number("outputs.max_total_bytes", "outputs max_total", o_.outputs.max_total_bytes,
           n_.outputs.max_total_bytes, 2);
  }

  // A denial test removed or weakened loosens the evidence (E055); a success test removed or
  // changed is neutral; a test added, or a denial test narrowed, tightens it.
  void Tests() {
    std::map<std::string, size_t> now;
    for (size_t i = 0; i < n_.tests.size(); ++i) now[n_.tests[i].name] = i;
    std::set<std::string> old_names;
    for (size_t i = 0; i < o_.tests.size(); ++i) {
      const plan::PolicyTest& t = o_.tests[i];
      old_names.insert(t.name);
      const bool denial = plan::ExpectsDenial(t.expect);
      const std::string what =
          std::string(denial ? "denial" : "success") + " test \"" + t.name + "\"";
      auto it = now.find(t.name);
      if (it == now.end()) {
        Add(denial ? Effect::kLoosens : Effect::kNeutral, "E055", Idx("tests", i),
            "removes " + what);
        continue;
      }
      const plan::PolicyTest& n = n_.tests[it->second];
      if (n == t) continue;
      const std::string f = Idx("tests", it->second);
      if (plan::Narrows(n, t)) {
        Add(Effect::kTightens, "", f, "adds expectations to " + what);
      } else {
        Add(denial ? Effect::kLoosens : Effect::kNeutral, "E055", f, "changes " + what);
      }
    }
    for (size_t i = 0; i < n_.tests.size(); ++i) {
      if (old_names.count(n_.tests[i].name) != 0) continue;
      Add(Effect::kTightens, "", Idx("tests", i), "adds test \"" + n_.tests[i].name + "\"");
    }
  }

  const plan::Plan& o_;
  const plan::Plan& n_;
  std::vector<Change> out_;
};

}  // namespace

std::vector<Change> ComparePlans(const plan::Plan& old, const plan::Plan& now) {
  return Comparer(old, now).Run();
}

const char* EffectName(Change::Effect e) {
  switch (e) {
    case Change::Effect::kLoosens:
      return "loosens";
    case Change::Effect::kTightens:
      return "tightens";
    case Change::Effect::kNeutral:
      return "changes";
  }
  return "changes";
}

int BackendStrength(plan::Backend b) {
  switch (b) {
    case plan::Backend::kNative:
      return 0;
    case plan::Backend::kGvisor:
      return 1;
    case plan::Backend::kMicrovm:
      return 2;
  }
  return 0;
}

int ActionStrictness(plan::SyscallAction a) {
  switch (a) {
    case plan::SyscallAction::kAllow:
      return 0;
    case plan::SyscallAction::kLog:
      return 1;
    case plan::SyscallAction::kErrno:
      return 2;
    case plan::SyscallAction::kKill:
      return 3;
  }
  return 0;
}

}  // namespace safex::compiler
