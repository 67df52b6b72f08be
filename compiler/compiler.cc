#include "compiler/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>

#include "common/sha256.h"
#include "compiler/compare.h"
#include "compiler/draft.h"
#include "compiler/lower.h"
#include "compiler/values.h"
#include "dsl/parser.h"
#include "plan/verify.h"

namespace safex::compiler {

bool CompileResult::ok() const { return plan.has_value() && errors() == 0; }

size_t CompileResult::errors() const {
  size_t n = 0;
  for (const auto& d : diagnostics) n += d.severity == dsl::Severity::kError;
  return n;
}

size_t CompileResult::warnings() const {
  size_t n = 0;
  for (const auto& d : diagnostics) n += d.severity == dsl::Severity::kWarning;
  return n;
}

std::optional<std::string> ReadSourceFile(const std::string& path, std::string* error) {
  constexpr size_t kMax = 1 << 20;  // the parser's limit; refuse before reading more
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = std::string("cannot open: ") + strerror(errno);
    return std::nullopt;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    *error = "not a regular file";
    return std::nullopt;
  }
  std::string text;
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("cannot read: ") + strerror(errno);
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMax) {
      close(fd);
      *error = "larger than 1 MiB";
      return std::nullopt;
    }
  }
  close(fd);
  return text;
}

namespace {

struct Layer {
  std::string path;
  std::string text;
  dsl::ParseResult parsed;
  PolicyHeader header;
};

std::string Dirname(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Identity(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  return path;
}

// The origin of a plan field, falling back from "a[1].b" to "a[1]" to "a", then to the head.
const Origin& Lookup(const std::map<std::string, Origin>& origins, std::string field,
                     const Origin& head) {
  while (true) {
    auto it = origins.find(field);
    if (it != origins.end()) return it->second;
    auto cut = field.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) return head;
    field.resize(cut);
  }
}

// Orders the diagnostics from `from` on by file and position (a phase's findings come out in
// plan-field order otherwise).
void SortFrom(std::vector<dsl::Diagnostic>& diags, size_t from) {
  std::stable_sort(diags.begin() + static_cast<std::ptrdiff_t>(from), diags.end(),
                   [](const dsl::Diagnostic& a, const dsl::Diagnostic& b) {
                     if (a.path != b.path) return a.path < b.path;
                     return a.span.begin.offset < b.span.begin.offset;
                   });
}

dsl::Diagnostic Diag(dsl::Severity sev, const char* code, std::string message, const Origin& o,
                     std::string help = "") {
  return dsl::Diagnostic{sev, code, std::move(message), o.path, o.span, std::move(help)};
}

class Compilation {
 public:
  Compilation(const CompileOptions& opt, CompileResult& r) : opt_(opt), r_(r) {}

  void Run(const std::string& path, const std::string& text) {
    if (!LoadChain(path, text)) return;
    if (!Lower()) return;
    if (!Tighten()) return;
    Build();
  }

 private:
  // Phase 1 (+ extends resolution): parse the policy and each ancestor.
  bool LoadChain(const std::string& path, const std::string& text) {
    std::vector<std::string> chain_names;
    std::map<std::string, size_t> seen;  // file identity -> chain index
    std::string cur_path = path;
    std::string cur_text = text;
    while (true) {
      r_.sources[cur_path] = cur_text;
      Layer layer;
      layer.path = cur_path;
      layer.text = cur_text;
      layer.parsed = dsl::Parse(cur_path, cur_text);
      for (auto& d : layer.parsed.diagnostics) r_.diagnostics.push_back(d);
      if (!layer.parsed.ok()) return Ancestor(false);
      Diags d(cur_path, &r_.diagnostics);
      auto header = ReadPolicyHeader(layer.parsed.file, d);
      if (!header || d.errors()) return Ancestor(false);
      layer.header = *header;
      seen[Identity(cur_path)] = chain_.size();
      chain_names.push_back(header->name);
      chain_.push_back(std::move(layer));
      const Layer& child = chain_.back();
      if (!child.header.extends) break;

      const std::string& name = *child.header.extends;
      Origin at = MakeOrigin(child.path, child.header.extends_span);
      if (chain_.size() > opt_.max_extends_depth) {
        r_.diagnostics.push_back(Diag(
            dsl::Severity::kError, "E043",
            "`extends` chain deeper than " + std::to_string(opt_.max_extends_depth) + " policies",
            at));
        return false;
      }
      std::vector<std::string> dirs = opt_.search_path;
      if (dirs.empty()) dirs.push_back(Dirname(child.path));
      std::string found;
      for (const auto& dir : dirs) {
        std::string candidate = (dir == "/" ? "" : dir) + "/" + name + ".policy";
        if (access(candidate.c_str(), F_OK) == 0) {
          found = candidate;
          break;
        }
      }
      if (found.empty()) {
        std::string where;
        for (const auto& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
        r_.diagnostics.push_back(Diag(dsl::Severity::kError, "E040",
                                      "cannot find policy `" + name + "` (" + name + ".policy)", at,
                                      "searched: " + where));
        return false;
      }
      auto again = seen.find(Identity(found));
      if (again != seen.end()) {
        std::string cycle;
        for (size_t i = again->second; i < chain_names.size(); ++i)
          cycle += chain_names[i] + " -> ";
        cycle += chain_names[again->second];
        r_.diagnostics.push_back(
            Diag(dsl::Severity::kError, "E042", "`extends` cycle: " + cycle, at,
                 "a policy may not extend itself, directly or through others"));
        return false;
      }
      std::string err;
      auto parent_text = ReadSourceFile(found, &err);
      if (!parent_text) {
        r_.diagnostics.push_back(Diag(dsl::Severity::kError, "E044",
                                      "cannot read policy `" + name + "` at " + found + ": " + err,
                                      at));
        return false;
      }
      pending_extends_ = at;
      pending_name_ = name;
      cur_path = found;
      cur_text = std::move(*parent_text);
    }
    return true;
  }

  // Called when a file of the chain fails to parse: point at the `extends` that brought it in.
  bool Ancestor(bool ok) {
    if (!ok && pending_extends_) {
      r_.diagnostics.push_back(Diag(dsl::Severity::kError, "E044",
                                    "the extended policy `" + pending_name_ + "` has errors",
                                    *pending_extends_));
    }
    return ok;
  }

  // Phase 2: lower every layer, root ancestor first, keeping the plan as it stood after each.
  bool Lower() {
    size_t errors_before = r_.errors();
    draft_.policy_name = chain_.front().header.name;
    draft_.head = MakeOrigin(chain_.front().path, chain_.front().header.stmt->head[0].span);
    for (size_t i = chain_.size(); i-- > 0;) {
      const Layer& layer = chain_[i];
      Diags d(layer.path, &r_.diagnostics);
      LowerPolicy(layer.header, d, draft_, overrides_);
      snapshots_.push_back(Finalize(draft_));
      origins_.push_back(Origins(draft_));
    }
    CheckRequired();
    return r_.errors() == errors_before;
  }

  void CheckRequired() {
    const Origin& at = draft_.head;
    auto missing = [&](const std::string& what, const std::string& help) {
      std::string msg = "policy `" + draft_.policy_name + "` does not set " + what;
      if (chain_.size() > 1) msg += " (nor does any policy it extends)";
      r_.diagnostics.push_back(Diag(dsl::Severity::kError, "E024", msg, at, help));
    };
    const auto& said = draft_.mentioned;
    if (!draft_.trust && !said.count("trust"))
      missing("`trust`", "add `trust = untrusted` (or `trusted`)");
    if (!draft_.backend && !said.count("isolation"))
      missing("`isolation`", "add `isolation = gvisor` (or `microvm`, `native`)");
    static const std::pair<const char*, const char*> kLimits[] = {
        {"wall_time_ns", "wall_time = 30s"}, {"cpu_time_ns", "cpu_time = 20s"},
        {"memory_bytes", "memory = 512MiB"}, {"pids", "pids = 64"},
        {"open_files", "open_files = 256"},  {"output_bytes", "output = 1MiB"},
        {"disk_bytes", "disk = 64MiB"},      {"cpus", "cpus = 1"}};
    for (const auto& [field, example] : kLimits) {
      std::string key = std::string(example).substr(0, std::string(example).find(' '));
      if (!draft_.limits.count(field) && !said.count("limits." + key)) {
        missing("the `" + key + "` limit",
                std::string("add `") + example + "` to `limits { ... }`");
      }
    }
    bool has_output = false;
    for (const auto& m : draft_.mounts) has_output |= m.value.kind == plan::MountKind::kOutput;
    bool outputs_said = said.count("outputs.max_files") && said.count("outputs.max_total");
    if (has_output && (!draft_.outputs_max_files || !draft_.outputs_max_total) && !outputs_said) {
      missing("`outputs { max_files, max_total }`, which a policy with an output mount needs",
              "add `outputs { max_files = 16  max_total = 16MiB }`");
    }
  }

  // Phase 3: each layer against the one it extends.
  bool Tighten() {
    size_t errors_before = r_.errors();
    size_t first = r_.diagnostics.size();
    // snapshots_[0] is the root ancestor; layer k (k >= 1) is chain_[chain_.size() - 1 - k].
    for (size_t k = 1; k < snapshots_.size(); ++k) {
      const Layer& child = chain_[chain_.size() - 1 - k];
      const Layer& parent = chain_[chain_.size() - k];
      for (const Change& c : ComparePlans(snapshots_[k - 1], snapshots_[k])) {
        if (c.effect != Change::Effect::kLoosens) continue;
        const Origin& o =
            Lookup(origins_[k], c.field, MakeOrigin(child.path, child.header.stmt->span));
        auto mark = overrides_.by_loc.find(o.loc);
        if (mark != overrides_.by_loc.end()) {
          OverrideMark& m = overrides_.marks[mark->second];
          m.fields.push_back(c.field);
          plan_overrides_.push_back(plan::Override{c.field, m.reason, o.loc});
          r_.diagnostics.push_back(
              Diag(dsl::Severity::kWarning, "E053",
                   "override: " + c.description + " (loosens `" + parent.header.name + "`)", o,
                   "reason: " + m.reason));
          continue;
        }
        r_.diagnostics.push_back(
            Diag(dsl::Severity::kError, c.code.c_str(),
                 "`" + child.header.name + "` may only tighten `" + parent.header.name +
                     "`: " + c.description,
                 o, "tighten it, or mark a reviewed exception with `@override(\"reason\")`"));
      }
    }
    for (const auto& m : overrides_.marks) {
      if (m.fields.empty()) {
        r_.diagnostics.push_back(Diag(dsl::Severity::kWarning, "E054",
                                      "this `@override` loosens nothing; remove it", m.origin));
      }
    }
    SortFrom(r_.diagnostics, first);
    return r_.errors() == errors_before;
  }

  // Phase 4: the plan, verified.
  void Build() {
    plan::Plan p = snapshots_.back();
    std::string concat;
    for (const auto& layer : chain_) {
      std::string digest = Sha256Hex(layer.text);
      p.sources.push_back(plan::SourceFile{layer.path, digest});
      concat += digest;
    }
    p.source_digest = Sha256Hex(concat);
    p.overrides = plan_overrides_;
    const Origin& head = draft_.head;
    size_t errors_before = r_.errors();
    size_t first = r_.diagnostics.size();
    for (const auto& v : plan::Verify(p, opt_.ceilings)) {
      const Origin& o = Lookup(origins_.back(), v.field, head);
      r_.diagnostics.push_back(
          Diag(dsl::Severity::kError, v.code.c_str(), v.message, o, "plan field " + v.field));
    }
    SortFrom(r_.diagnostics, first);
    if (r_.errors() == errors_before) r_.plan = std::move(p);
  }

  const CompileOptions& opt_;
  CompileResult& r_;
  std::vector<Layer> chain_;  // the compiled policy first, then its ancestors
  std::optional<Origin> pending_extends_;
  std::string pending_name_;
  Draft draft_;
  OverrideTable overrides_;
  std::vector<plan::Plan> snapshots_;  // after each layer, root first
  std::vector<std::map<std::string, Origin>> origins_;
  std::vector<plan::Override> plan_overrides_;
};

}  // namespace

CompileResult CompileText(const std::string& path, const std::string& text,
                          const CompileOptions& options) {
  CompileResult r;
  Compilation(options, r).Run(path, text);
  return r;
}

CompileResult CompileFile(const std::string& path, const CompileOptions& options) {
  std::string err;
  auto text = ReadSourceFile(path, &err);
  if (!text) {
    CompileResult r;
    r.diagnostics.push_back(dsl::Diagnostic{
        dsl::Severity::kError, "E090", "cannot read " + path + ": " + err, path, dsl::Span{}, ""});
    return r;
  }
  return CompileText(path, *text, options);
}

std::string RenderAll(const CompileResult& result) {
  std::string out;
  for (const auto& d : result.diagnostics) {
    auto it = result.sources.find(d.path);
    out += dsl::RenderDiagnostic(d, it == result.sources.end() ? std::string_view() : it->second);
  }
  return out;
}

}  // namespace safex::compiler
