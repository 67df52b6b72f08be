#include "plan/plan_json.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "common/sha256.h"
#include "common/strict_json.h"

namespace safex::plan {
namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Enum names

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

constexpr EnumName<Trust> kTrustNames[] = {{Trust::kUntrusted, "untrusted"},
                                           {Trust::kTrusted, "trusted"}};
constexpr EnumName<Backend> kBackendNames[] = {
    {Backend::kGvisor, "gvisor"}, {Backend::kMicrovm, "microvm"}, {Backend::kNative, "native"}};
constexpr EnumName<MountKind> kMountKindNames[] = {{MountKind::kBind, "bind"},
                                                   {MountKind::kTmpfs, "tmpfs"},
                                                   {MountKind::kInput, "input"},
                                                   {MountKind::kOutput, "output"}};
constexpr EnumName<Protocol> kProtocolNames[] = {{Protocol::kTcp, "tcp"}, {Protocol::kUdp, "udp"}};
constexpr EnumName<SyscallAction> kSyscallActionNames[] = {{SyscallAction::kAllow, "allow"},
                                                           {SyscallAction::kErrno, "errno"},
                                                           {SyscallAction::kKill, "kill"},
                                                           {SyscallAction::kLog, "log"}};
constexpr EnumName<ValidatorTarget> kValidatorTargetNames[] = {{ValidatorTarget::kStdout, "stdout"},
                                                               {ValidatorTarget::kStderr, "stderr"},
                                                               {ValidatorTarget::kFile, "file"}};
constexpr EnumName<KvmMode> kKvmModeNames[] = {
    {KvmMode::kAuto, "auto"}, {KvmMode::kRequire, "require"}, {KvmMode::kNever, "never"}};
constexpr EnumName<OverflowAction> kOverflowNames[] = {{OverflowAction::kTruncate, "truncate"},
                                                       {OverflowAction::kReject, "reject"}};
constexpr EnumName<ControlChars> kControlNames[] = {{ControlChars::kAllow, "allow"},
                                                    {ControlChars::kStrip, "strip"},
                                                    {ControlChars::kReject, "reject"}};
constexpr EnumName<RegexAction> kRegexActionNames[] = {{RegexAction::kReject, "reject"},
                                                       {RegexAction::kRedact, "redact"}};

template <typename E, size_t N>
std::optional<E> FromName(const EnumName<E> (&table)[N], std::string_view s) {
  for (const auto& e : table) {
    if (s == e.name) return e.value;
  }
  return std::nullopt;
}
template <typename E, size_t N>
const char* ToName(const EnumName<E> (&table)[N], E v) {
  for (const auto& e : table) {
    if (v == e.value) return e.name;
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// Writing

Json LimitsJson(const Limits& l) {
  return Json{{"wall_time_ns", l.wall_time_ns}, {"cpu_time_ns", l.cpu_time_ns},
              {"memory_bytes", l.memory_bytes}, {"pids", l.pids},
              {"open_files", l.open_files},     {"output_bytes", l.output_bytes},
              {"disk_bytes", l.disk_bytes},     {"cpus", l.cpus}};
}

Json OptionalToJson(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }

Json TestsToJson(const std::vector<PolicyTest>& tests) {
  Json out = Json::array();
  for (const PolicyTest& t : tests) {
    Json files = Json::array();
    for (const TestInputFile& f : t.files)
      files.push_back(Json{{"name", f.name}, {"data", f.data}});
    const TestExpectation& e = t.expect;
    Json expect{{"exit_code", e.exit_code ? Json(*e.exit_code) : Json(nullptr)},
                {"verdict", OptionalToJson(e.verdict)},
                {"stdout_regex", OptionalToJson(e.stdout_regex)},
                {"stderr_regex", OptionalToJson(e.stderr_regex)},
                {"files_present", e.files_present},
                {"files_absent", e.files_absent},
                {"denied", e.denied}};
    out.push_back(Json{{"name", t.name},
                       {"argv", t.argv},
                       {"stdin", OptionalToJson(t.stdin_data)},
                       {"files", std::move(files)},
                       {"expect", std::move(expect)},
                       {"defined_in", t.defined_in}});
  }
  return out;
}

Json ToJson(const Plan& p) {
  Json j = Json::object();
  j["format_version"] = p.format_version;
  j["policy_name"] = p.policy_name;
  Json sources = Json::array();
  for (const auto& s : p.sources) sources.push_back(Json{{"path", s.path}, {"sha256", s.sha256}});
  j["sources"] = std::move(sources);
  j["source_digest"] = p.source_digest;
  j["trust"] = TrustName(p.trust);
  j["backend"] = BackendName(p.backend);
  j["gvisor"] = Json{{"platform", p.gvisor.platform}};
  j["microvm"] = Json{{"vcpus", p.microvm.vcpus}, {"kvm", KvmModeName(p.microvm.kvm)}};
  j["limits"] = LimitsJson(p.limits);
  j["process"] = Json{{"uid", p.process.uid}, {"gid", p.process.gid}, {"cwd", p.process.cwd}};
  Json mounts = Json::array();
  for (const auto& m : p.mounts) {
    mounts.push_back(Json{{"kind", MountKindName(m.kind)},
                          {"target", m.target},
                          {"source", m.source},
                          {"read_only", m.read_only},
                          {"size_bytes", m.size_bytes},
                          {"nosuid", m.nosuid},
                          {"nodev", m.nodev},
                          {"noexec", m.noexec}});
  }
  j["mounts"] = std::move(mounts);
  Json egress = Json::array();
  for (const auto& e : p.network.egress) {
    egress.push_back(
        Json{{"host", e.host}, {"port", e.port}, {"protocol", ProtocolName(e.protocol)}});
  }
  j["network"] = Json{{"egress", std::move(egress)}};
  Json env = Json::object();
  for (const auto& [k, v] : p.env) env[k] = v;
  j["env"] = std::move(env);
  if (!p.caller.empty()) j["caller"] = Json{{"env", p.caller.env}, {"cwd", p.caller.cwd}};
  if (!p.container.empty()) j["container"] = Json{{"images", p.container.images}};
  if (p.session.allowed) {
    j["session"] = Json{{"max_execs", p.session.max_execs},
                        {"idle_timeout_ns", p.session.idle_timeout_ns},
                        {"max_lifetime_ns", p.session.max_lifetime_ns}};
  }
  Json rules = Json::array();
  for (const auto& r : p.seccomp.rules) {
    rules.push_back(Json{
        {"name", r.name}, {"action", SyscallActionName(r.action)}, {"errno_value", r.errno_value}});
  }
  j["seccomp"] = Json{{"default_action", SyscallActionName(p.seccomp.default_action)},
                      {"default_errno", p.seccomp.default_errno},
                      {"rules", std::move(rules)}};
  Json validators = Json::array();
  for (const auto& v : p.validators) {
    Json regex = Json::array();
    for (const auto& r : v.regex) {
      regex.push_back(Json{{"pattern", r.pattern},
                           {"action", RegexActionName(r.action)},
                           {"replacement", r.replacement}});
    }
    Json json_rule = nullptr;
    if (v.json) {
      Json required = Json::object();
      for (const auto& [k, t] : v.json->required) required[k] = t;
      json_rule = Json{{"max_depth", v.json->max_depth}, {"required", std::move(required)}};
    }
    validators.push_back(Json{{"target", ValidatorTargetName(v.target)},
                              {"path", v.path},
                              {"max_bytes", v.max_bytes},
                              {"on_overflow", OverflowActionName(v.on_overflow)},
                              {"utf8", v.utf8},
                              {"control", ControlCharsName(v.control)},
                              {"max_lines", v.max_lines},
                              {"regex", std::move(regex)},
                              {"json", std::move(json_rule)}});
  }
  j["validators"] = std::move(validators);
  j["outputs"] =
      Json{{"max_files", p.outputs.max_files}, {"max_total_bytes", p.outputs.max_total_bytes}};
  Json overrides = Json::array();
  for (const auto& o : p.overrides) {
    overrides.push_back(Json{{"field", o.field}, {"reason", o.reason}, {"location", o.location}});
  }
  j["overrides"] = std::move(overrides);
  if (!p.tests.empty()) j["tests"] = TestsToJson(p.tests);
  Json prov = Json::object();
  for (const auto& [k, v] : p.provenance) prov[k] = v;
  j["provenance"] = std::move(prov);
  return j;
}

std::string Dump(const Json& j) {
  // nlohmann's objects are std::map: keys come out sorted bytewise. No indent, no spaces;
  // non-ASCII written as UTF-8; invalid UTF-8 replaced rather than thrown.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Reading: ParseStrictJson refuses duplicate keys, floats, deep nesting and a byte order mark.

constexpr size_t kMaxDepth = 32;

// Typed access to one JSON object: every key must be read exactly once; Done() reports the rest.
class Reader {
 public:
  Reader(const Json& j, std::string path, std::string* error)
      : j_(j), path_(std::move(path)), error_(error) {
    if (!j_.is_object()) Fail(path_.empty() ? "document" : path_, "is not an object");
  }

  bool ok() const { return error_->empty(); }

  const Json* Field(const std::string& key) {
    if (!ok() || !j_.is_object()) return nullptr;
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) {
      Fail(Path(key), "is missing");
      return nullptr;
    }
    return &*it;
  }

  uint64_t U64(const std::string& key, uint64_t max = std::numeric_limits<uint64_t>::max()) {
    const Json* v = Field(key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return Fail(Path(key), "is not an integer"), 0;
    if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0) {
      return Fail(Path(key), "is negative"), 0;
    }
    uint64_t n = v->get<uint64_t>();
    if (n > max) return Fail(Path(key), "is out of range"), 0;
    return n;
  }
  int64_t I64(const std::string& key, int64_t min, int64_t max) {
    const Json* v = Field(key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return Fail(Path(key), "is not an integer"), 0;
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return Fail(Path(key), "is out of range"), 0;
    }
    int64_t n = v->get<int64_t>();
    if (n < min || n > max) return Fail(Path(key), "is out of range"), 0;
    return n;
  }
  bool Bool(const std::string& key) {
    const Json* v = Field(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Fail(Path(key), "is not a boolean"), false;
    return v->get<bool>();
  }
  std::string String(const std::string& key) {
    const Json* v = Field(key);
    if (v == nullptr) return "";
    if (!v->is_string()) return Fail(Path(key), "is not a string"), "";
    return v->get<std::string>();
  }
  template <typename E>
  E Enum(const std::string& key, std::optional<E> (*parse)(std::string_view), E fallback) {
    const Json* v = Field(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) return Fail(Path(key), "is not a string"), fallback;
    auto e = parse(v->get_ref<const std::string&>());
    if (!e) return Fail(Path(key), "has unknown value \"" + v->get<std::string>() + "\""), fallback;
    return *e;
  }
  const Json* Array(const std::string& key) {
    const Json* v = Field(key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) return Fail(Path(key), "is not an array"), nullptr;
    return v;
  }
  // An object whose values are all strings.
  std::map<std::string, std::string> StringMap(const std::string& key) {
    std::map<std::string, std::string> out;
    const Json* v = Field(key);
    if (v == nullptr) return out;
    if (!v->is_object()) return Fail(Path(key), "is not an object"), out;
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_string()) {
        Fail(Path(key) + "." + it.key(), "is not a string");
        return out;
      }
      out[it.key()] = it.value().get<std::string>();
    }
    return out;
  }
  bool Has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  // A string or null.
  std::optional<std::string> OptionalString(const std::string& key) {
    const Json* v = Field(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_string()) return Fail(Path(key), "is not a string or null"), std::nullopt;
    return v->get<std::string>();
  }
  std::vector<std::string> StringList(const std::string& key) {
    std::vector<std::string> out;
    const Json* v = Array(key);
    if (v == nullptr) return out;
    for (const Json& x : *v) {
      if (!x.is_string()) return Fail(Path(key), "holds a value that is not a string"), out;
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  // Consumes `key` without checking it (read elsewhere).
  void Skip(const std::string& key) { seen_.insert(key); }

  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void Done() {
    if (!ok() || !j_.is_object()) return;
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!seen_.count(it.key())) {
        Fail(Path(it.key()), "is not a known field");
        return;
      }
    }
  }

  void Fail(const std::string& where, const std::string& what) {
    if (error_->empty()) *error_ = where + " " + what;
  }

 private:
  const Json& j_;
  std::string path_;
  std::string* error_;
  std::set<std::string> seen_;
};

std::string Idx(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

std::vector<PolicyTest> TestsFromJson(Reader& r, std::string* err) {
  std::vector<PolicyTest> out;
  const Json* a = r.Array("tests");
  for (size_t i = 0; a != nullptr && i < a->size() && r.ok(); ++i) {
    const std::string base = Idx("tests", i);
    Reader e((*a)[i], base, err);
    PolicyTest t;
    t.name = e.String("name");
    t.argv = e.StringList("argv");
    t.stdin_data = e.OptionalString("stdin");
    if (const Json* fa = e.Array("files")) {
      for (size_t k = 0; k < fa->size() && r.ok(); ++k) {
        Reader f((*fa)[k], Idx(base + ".files", k), err);
        t.files.push_back(TestInputFile{f.String("name"), f.String("data")});
        f.Done();
      }
    }
    if (const Json* x = e.Field("expect")) {
      Reader ex(*x, base + ".expect", err);
      if (x->is_object() && x->contains("exit_code") && !(*x)["exit_code"].is_null()) {
        t.expect.exit_code = static_cast<int32_t>(ex.I64("exit_code", INT32_MIN, INT32_MAX));
      } else {
        ex.Skip("exit_code");
      }
      t.expect.verdict = ex.OptionalString("verdict");
      t.expect.stdout_regex = ex.OptionalString("stdout_regex");
      t.expect.stderr_regex = ex.OptionalString("stderr_regex");
      t.expect.files_present = ex.StringList("files_present");
      t.expect.files_absent = ex.StringList("files_absent");
      t.expect.denied = ex.Bool("denied");
      ex.Done();
    }
    t.defined_in = e.String("defined_in");
    e.Done();
    out.push_back(std::move(t));
  }
  return out;
}

Plan FromJson(const Json& j, std::string* err) {
  Plan p;
  Reader r(j, "", err);
  p.format_version = static_cast<int>(r.I64("format_version", 0, 1 << 30));
  p.policy_name = r.String("policy_name");
  if (const Json* a = r.Array("sources")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      Reader e((*a)[i], Idx("sources", i), err);
      SourceFile s;
      s.path = e.String("path");
      s.sha256 = e.String("sha256");
      e.Done();
      p.sources.push_back(std::move(s));
    }
  }
  p.source_digest = r.String("source_digest");
  p.trust = r.Enum<Trust>("trust", TrustFromName, Trust::kUntrusted);
  p.backend = r.Enum<Backend>("backend", BackendFromName, Backend::kGvisor);
  if (const Json* g = r.Field("gvisor")) {
    Reader e(*g, "gvisor", err);
    p.gvisor.platform = e.String("platform");
    e.Done();
  }
  if (const Json* m = r.Field("microvm")) {
    Reader e(*m, "microvm", err);
    p.microvm.vcpus = static_cast<uint32_t>(e.U64("vcpus", UINT32_MAX));
    p.microvm.kvm = e.Enum<KvmMode>("kvm", KvmModeFromName, KvmMode::kAuto);
    e.Done();
  }
  if (const Json* l = r.Field("limits")) {
    Reader e(*l, "limits", err);
    p.limits.wall_time_ns = e.U64("wall_time_ns");
    p.limits.cpu_time_ns = e.U64("cpu_time_ns");
    p.limits.memory_bytes = e.U64("memory_bytes");
    p.limits.pids = e.U64("pids");
    p.limits.open_files = e.U64("open_files");
    p.limits.output_bytes = e.U64("output_bytes");
    p.limits.disk_bytes = e.U64("disk_bytes");
    p.limits.cpus = static_cast<uint32_t>(e.U64("cpus", UINT32_MAX));
    e.Done();
  }
  if (const Json* pr = r.Field("process")) {
    Reader e(*pr, "process", err);
    p.process.uid = static_cast<uint32_t>(e.U64("uid", UINT32_MAX));
    p.process.gid = static_cast<uint32_t>(e.U64("gid", UINT32_MAX));
    p.process.cwd = e.String("cwd");
    e.Done();
  }
  if (const Json* a = r.Array("mounts")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      Reader e((*a)[i], Idx("mounts", i), err);
      Mount m;
      m.kind = e.Enum<MountKind>("kind", MountKindFromName, MountKind::kBind);
      m.target = e.String("target");
      m.source = e.String("source");
      m.read_only = e.Bool("read_only");
      m.size_bytes = e.U64("size_bytes");
      m.nosuid = e.Bool("nosuid");
      m.nodev = e.Bool("nodev");
      m.noexec = e.Bool("noexec");
      e.Done();
      p.mounts.push_back(std::move(m));
    }
  }
  if (const Json* n = r.Field("network")) {
    Reader e(*n, "network", err);
    if (const Json* a = e.Array("egress")) {
      for (size_t i = 0; i < a->size() && r.ok(); ++i) {
        Reader x((*a)[i], Idx("network.egress", i), err);
        EgressRule rule;
        rule.host = x.String("host");
        rule.port = static_cast<uint16_t>(x.U64("port", 65535));
        rule.protocol = x.Enum<Protocol>("protocol", ProtocolFromName, Protocol::kTcp);
        x.Done();
        p.network.egress.push_back(std::move(rule));
      }
    }
    e.Done();
  }
  p.env = r.StringMap("env");
  if (r.Has("caller")) {
    Reader c(*r.Field("caller"), "caller", err);
    p.caller.env = c.StringList("env");
    p.caller.cwd = c.StringList("cwd");
    c.Done();
  }
  if (r.Has("container")) {
    Reader c(*r.Field("container"), "container", err);
    p.container.images = c.StringList("images");
    c.Done();
  }
  if (r.Has("session")) {
    Reader c(*r.Field("session"), "session", err);
    p.session.allowed = true;
    p.session.max_execs = static_cast<uint32_t>(c.U64("max_execs", 0xffffffffu));
    p.session.idle_timeout_ns = c.U64("idle_timeout_ns");
    p.session.max_lifetime_ns = c.U64("max_lifetime_ns");
    c.Done();
  }
  if (const Json* s = r.Field("seccomp")) {
    Reader e(*s, "seccomp", err);
    p.seccomp.default_action =
        e.Enum<SyscallAction>("default_action", SyscallActionFromName, SyscallAction::kAllow);
    p.seccomp.default_errno = static_cast<int>(e.I64("default_errno", INT32_MIN, INT32_MAX));
    if (const Json* a = e.Array("rules")) {
      for (size_t i = 0; i < a->size() && r.ok(); ++i) {
        Reader x((*a)[i], Idx("seccomp.rules", i), err);
        SyscallRule rule;
        rule.name = x.String("name");
        rule.action = x.Enum<SyscallAction>("action", SyscallActionFromName, SyscallAction::kErrno);
        rule.errno_value = static_cast<int>(x.I64("errno_value", INT32_MIN, INT32_MAX));
        x.Done();
        p.seccomp.rules.push_back(std::move(rule));
      }
    }
    e.Done();
  }
  if (const Json* a = r.Array("validators")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      std::string base = Idx("validators", i);
      Reader e((*a)[i], base, err);
      Validator v;
      v.target =
          e.Enum<ValidatorTarget>("target", ValidatorTargetFromName, ValidatorTarget::kStdout);
      v.path = e.String("path");
      v.max_bytes = e.U64("max_bytes");
      v.on_overflow =
          e.Enum<OverflowAction>("on_overflow", OverflowActionFromName, OverflowAction::kReject);
      v.utf8 = e.Bool("utf8");
      v.control = e.Enum<ControlChars>("control", ControlCharsFromName, ControlChars::kAllow);
      v.max_lines = e.U64("max_lines");
      if (const Json* ra = e.Array("regex")) {
        for (size_t k = 0; k < ra->size() && r.ok(); ++k) {
          Reader x((*ra)[k], Idx(base + ".regex", k), err);
          RegexRule rr;
          rr.pattern = x.String("pattern");
          rr.action = x.Enum<RegexAction>("action", RegexActionFromName, RegexAction::kReject);
          rr.replacement = x.String("replacement");
          x.Done();
          v.regex.push_back(std::move(rr));
        }
      }
      if (const Json* js = e.Field("json")) {
        if (!js->is_null()) {
          Reader x(*js, base + ".json", err);
          JsonRule jr;
          jr.max_depth = x.U64("max_depth");
          jr.required = x.StringMap("required");
          x.Done();
          v.json = std::move(jr);
        }
      }
      e.Done();
      p.validators.push_back(std::move(v));
    }
  }
  if (const Json* o = r.Field("outputs")) {
    Reader e(*o, "outputs", err);
    p.outputs.max_files = e.U64("max_files");
    p.outputs.max_total_bytes = e.U64("max_total_bytes");
    e.Done();
  }
  if (const Json* a = r.Array("overrides")) {
    for (size_t i = 0; i < a->size() && r.ok(); ++i) {
      Reader e((*a)[i], Idx("overrides", i), err);
      Override ov;
      ov.field = e.String("field");
      ov.reason = e.String("reason");
      ov.location = e.String("location");
      e.Done();
      p.overrides.push_back(std::move(ov));
    }
  }
  if (r.Has("tests")) p.tests = TestsFromJson(r, err);
  p.provenance = r.StringMap("provenance");
  r.Skip("plan_digest");
  r.Done();
  return p;
}

}  // namespace

std::optional<Trust> TrustFromName(std::string_view s) { return FromName(kTrustNames, s); }
std::optional<Backend> BackendFromName(std::string_view s) { return FromName(kBackendNames, s); }
std::optional<MountKind> MountKindFromName(std::string_view s) {
  return FromName(kMountKindNames, s);
}
std::optional<Protocol> ProtocolFromName(std::string_view s) { return FromName(kProtocolNames, s); }
std::optional<SyscallAction> SyscallActionFromName(std::string_view s) {
  return FromName(kSyscallActionNames, s);
}
std::optional<ValidatorTarget> ValidatorTargetFromName(std::string_view s) {
  return FromName(kValidatorTargetNames, s);
}
std::optional<KvmMode> KvmModeFromName(std::string_view s) { return FromName(kKvmModeNames, s); }
std::optional<OverflowAction> OverflowActionFromName(std::string_view s) {
  return FromName(kOverflowNames, s);
}
std::optional<ControlChars> ControlCharsFromName(std::string_view s) {
  return FromName(kControlNames, s);
}
std::optional<RegexAction> RegexActionFromName(std::string_view s) {
  return FromName(kRegexActionNames, s);
}
const char* OverflowActionName(OverflowAction a) { return ToName(kOverflowNames, a); }
const char* ControlCharsName(ControlChars c) { return ToName(kControlNames, c); }
const char* RegexActionName(RegexAction a) { return ToName(kRegexActionNames, a); }

std::string ToCanonicalJson(const Plan& plan) { return Dump(ToJson(plan)); }

std::string PlanDigest(const Plan& plan) { return Sha256Hex(ToCanonicalJson(plan)); }

std::string ToCanonicalJsonWithDigest(const Plan& plan) {
  Json j = ToJson(plan);
  std::string digest = Sha256Hex(Dump(j));
  j["plan_digest"] = digest;
  return Dump(j);
}

Result<Plan> PlanFromJson(std::string_view json) {
  StrictJsonOptions strict;
  strict.max_depth = kMaxDepth;
  strict.integers_only = true;
  auto parsed = ParseStrictJson(json, strict);
  if (!parsed.ok()) return Status::InvalidArgument("plan json: " + parsed.status().message());
  const Json& root = *parsed;
  try {
    std::string err;
    Plan plan = FromJson(root, &err);
    if (!err.empty()) return Status::InvalidArgument("plan json: " + err);
    auto it = root.find("plan_digest");
    if (it != root.end()) {
      if (!it->is_string())
        return Status::InvalidArgument("plan json: plan_digest is not a string");
      std::string want = PlanDigest(plan);
      if (it->get<std::string>() != want) {
        return Status::InvalidArgument("plan json: plan_digest does not match the plan (expected " +
                                       want + ")");
      }
    }
    return plan;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("plan json: ") + e.what());
  }
}

}  // namespace safex::plan
