// Policy authoring verbs: check, compile, explain, fmt, diff. Unprivileged; they read policy files
// and the host config, and write only what `fmt` reformats.
//
// Exit statuses: 0 success; 1 policy errors (check/compile/explain), an unformatted file
// (fmt --check) or a loosening change (diff); 2 usage errors, unreadable files or a bad host
// config.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compare.h"
#include "compiler/compiler.h"
#include "compiler/explain.h"
#include "compiler/host_config.h"
#include "dsl/formatter.h"
#include "dsl/parser.h"
#include "plan/plan_json.h"
#include "supervisor/cli.h"

namespace safex::cli {
namespace {

struct PolicyFlags {
  std::string host_config = compiler::kDefaultHostConfigPath;
  std::vector<std::string> search_path;
  CLI::Option* host_config_opt = nullptr;
};

void AddCommonFlags(CLI::App* cmd, PolicyFlags* f) {
  f->host_config_opt =
      cmd->add_option("--host-config", f->host_config,
                      "operator host config with the ceilings (default /etc/safex/host.policy)");
  cmd->add_option("--search-path", f->search_path,
                  "directory searched for NAME.policy by `extends` (repeatable; default: the "
                  "policy's own directory)")
      ->take_all()
      ->allow_extra_args(false);
}

void Print(FILE* f, const std::string& s) { fwrite(s.data(), 1, s.size(), f); }

// Loads the options, or prints why not and returns false (exit 2).
bool Options(const PolicyFlags& f, compiler::CompileOptions* opt) {
  // An explicitly named host config must exist; the default one may be absent.
  if (f.host_config_opt->count() > 0 && access(f.host_config.c_str(), F_OK) != 0) {
    Print(stderr, "safex: host config " + f.host_config + " does not exist\n");
    return false;
  }
  auto ceilings = compiler::LoadHostConfig(f.host_config);
  if (!ceilings.ok()) {
    Print(stderr, "safex: " + ceilings.status().message() + "\n");
    return false;
  }
  opt->ceilings = *ceilings;
  opt->search_path = f.search_path;
  return true;
}

bool Readable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    Print(stderr, "safex: cannot read " + path + "\n");
    return false;
  }
  return true;
}

// Whether `path` holds a host config (`host { ... }` as its first statement) rather than a
// policy: `safex check` checks either.
bool LooksLikeHostConfig(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return false;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  std::string_view text(buf, n);
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '#') {
      size_t nl = text.find('\n', i);
      i = nl == std::string_view::npos ? text.size() : nl + 1;
    } else if (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
      ++i;
    } else {
      break;
    }
  }
  text.remove_prefix(i);
  return text.starts_with("host") &&
         (text.size() == 4 || text[4] == ' ' || text[4] == '{' || text[4] == '\n');
}

// Checks a host config on its own, as the operator would before `systemctl restart safex`:
// every diagnostic of its language, and the users and groups its allow rules name (the service
// refuses to start over an unknown one). Prints a one-line summary; returns the exit status.
int CheckHostConfig(const std::string& path) {
  auto host = compiler::LoadHostConfigFile(path);
  if (!host.ok()) {
    Print(stderr, host.status().message() + "\n");
    Print(stdout, path + ": host config with errors\n");
    return 1;
  }
  int status = 0;
  for (const compiler::AllowRule& rule : host->service.allow) {
    for (const compiler::Principal& p : rule.users) {
      if (!p.id && getpwnam(p.name.c_str()) == nullptr) {
        Print(stderr, path + ": allow \"" + rule.policy + "\": no user named '" + p.name +
                          "' on this host (safex serve would not start)\n");
        status = 1;
      }
    }
    for (const compiler::Principal& p : rule.groups) {
      if (!p.id && getgrnam(p.name.c_str()) == nullptr) {
        Print(stderr, path + ": allow \"" + rule.policy + "\": no group named '" + p.name +
                          "' on this host (safex serve would not start)\n");
        status = 1;
      }
    }
  }
  std::string backends;
  for (plan::Backend b : host->ceilings.allowed_backends) {
    backends += (backends.empty() ? "" : ", ") + std::string(plan::BackendName(b));
  }
  const compiler::ServiceSettings& svc = host->service;
  Print(stdout, path + (status == 0 ? ": ok, host config" : ": host config with errors") +
                    " (backends " + backends + "; service socket " + svc.socket + ", state " +
                    svc.state_dir + ", audit log " + svc.audit_db + ", " +
                    std::to_string(svc.allow.size()) + " allow rule" +
                    (svc.allow.size() == 1 ? "" : "s") + "; address leases " +
                    host->network.lease_dir + ")\n");
  return status;
}

std::string Summary(const compiler::CompileResult& r) {
  std::string s;
  if (r.errors()) s += std::to_string(r.errors()) + " error" + (r.errors() == 1 ? "" : "s");
  if (r.warnings()) {
    s += (s.empty() ? "" : ", ") + std::to_string(r.warnings()) + " warning" +
         (r.warnings() == 1 ? "" : "s");
  }
  return s;
}

// Compiles one policy and prints its diagnostics to stderr. nullopt when it has errors.
std::optional<plan::Plan> CompileAndReport(const std::string& path,
                                           const compiler::CompileOptions& opt) {
  auto r = compiler::CompileFile(path, opt);
  Print(stderr, compiler::RenderAll(r));
  if (!r.ok()) {
    Print(stderr, path + ": " + Summary(r) + "\n");
    return std::nullopt;
  }
  return r.plan;
}

// Writes `text` to `path` through a temporary file and rename, keeping the mode.
bool WriteAtomically(const std::string& path, const std::string& text) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  std::string tmp = path + ".safex-fmt.XXXXXX";
  std::vector<char> buf(tmp.begin(), tmp.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) return false;
  bool ok = fchmod(fd, st.st_mode & 07777) == 0;
  size_t off = 0;
  while (ok && off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ok = false;
    else
      off += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (ok && rename(buf.data(), path.c_str()) == 0) return true;
  unlink(buf.data());
  return false;
}

void RegisterCheck(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PolicyFlags>();
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "parse, compile and verify policies; check a host config (a FILE starting with `host`, "
      "or --host-config alone)");
  AddCommonFlags(cmd, flags.get());
  cmd->add_option("FILE", *files, "policy files, or host configs");
  cmd->callback([flags, files, exit_code] {
    // A host config named alone: check it, not a policy against it.
    if (files->empty()) {
      if (flags->host_config_opt->count() == 0) {
        Print(stderr, "safex check: name policy files, or a host config with --host-config\n");
        *exit_code = 2;
        return;
      }
      *exit_code = Readable(flags->host_config) ? CheckHostConfig(flags->host_config) : 2;
      return;
    }
    compiler::CompileOptions opt;
    if (!Options(*flags, &opt)) {
      *exit_code = 2;
      return;
    }
    int status = 0;
    for (const auto& path : *files) {
      if (!Readable(path)) {
        status = 2;
        continue;
      }
      if (LooksLikeHostConfig(path)) {
        int st = CheckHostConfig(path);
        if (st != 0 && status == 0) status = st;
        continue;
      }
      auto r = compiler::CompileFile(path, opt);
      Print(stderr, compiler::RenderAll(r));
      if (r.ok()) {
        std::string extra = r.warnings() ? " (" + Summary(r) + ")" : "";
        Print(stdout, path + ": ok, plan " + plan::PlanDigest(*r.plan) + extra + "\n");
      } else {
        Print(stdout, path + ": " + Summary(r) + "\n");
        if (status == 0) status = 1;
      }
    }
    *exit_code = status;
  });
}

void RegisterCompile(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PolicyFlags>();
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "compile a policy and print its verified plan as canonical JSON");
  AddCommonFlags(cmd, flags.get());
  cmd->add_option("POLICY", *file, "policy file")->required();
  cmd->callback([flags, file, exit_code] {
    compiler::CompileOptions opt;
    if (!Options(*flags, &opt) || !Readable(*file)) {
      *exit_code = 2;
      return;
    }
    auto plan = CompileAndReport(*file, opt);
    if (!plan) {
      *exit_code = 1;
      return;
    }
    Print(stdout, plan::ToCanonicalJsonWithDigest(*plan) + "\n");
    *exit_code = 0;
  });
}

void RegisterExplain(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PolicyFlags>();
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("explain", "say in plain English what a policy lets code do");
  AddCommonFlags(cmd, flags.get());
  cmd->add_option("POLICY", *file, "policy file")->required();
  cmd->callback([flags, file, exit_code] {
    compiler::CompileOptions opt;
    if (!Options(*flags, &opt) || !Readable(*file)) {
      *exit_code = 2;
      return;
    }
    auto plan = CompileAndReport(*file, opt);
    if (!plan) {
      *exit_code = 1;
      return;
    }
    Print(stdout, compiler::Explain(*plan));
    Print(stdout, "\nplan digest " + plan::PlanDigest(*plan) + "\n");
    *exit_code = 0;
  });
}

void RegisterFmt(CLI::App& app, int* exit_code) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto check = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("fmt", "rewrite policy files in the canonical layout");
  cmd->add_flag("--check", *check, "change nothing; exit 1 if a file is not formatted");
  cmd->add_option("FILE", *files, "policy files")->required();
  cmd->callback([files, check, exit_code] {
    int status = 0;
    for (const auto& path : *files) {
      std::string err;
      auto text = compiler::ReadSourceFile(path, &err);
      if (!text) {
        Print(stderr, "safex: cannot read " + path + ": " + err + "\n");
        status = 2;
        continue;
      }
      auto parsed = dsl::Parse(path, *text);
      if (!parsed.ok()) {
        for (const auto& d : parsed.diagnostics) Print(stderr, dsl::RenderDiagnostic(d, *text));
        if (status == 0) status = 1;
        continue;
      }
      std::string formatted = dsl::Format(parsed.file);
      if (formatted == *text) continue;
      if (*check) {
        Print(stdout, path + ": not formatted\n");
        if (status == 0) status = 1;
      } else if (!WriteAtomically(path, formatted)) {
        Print(stderr, "safex: cannot write " + path + "\n");
        status = 2;
      } else {
        Print(stdout, path + ": formatted\n");
      }
    }
    *exit_code = status;
  });
}

void RegisterDiff(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PolicyFlags>();
  auto old_file = std::make_shared<std::string>();
  auto new_file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "what a policy change loosens or tightens (exit 1 if it loosens anything)");
  AddCommonFlags(cmd, flags.get());
  cmd->add_option("OLD", *old_file, "the policy before")->required();
  cmd->add_option("NEW", *new_file, "the policy after")->required();
  cmd->callback([flags, old_file, new_file, exit_code] {
    compiler::CompileOptions opt;
    if (!Options(*flags, &opt) || !Readable(*old_file) || !Readable(*new_file)) {
      *exit_code = 2;
      return;
    }
    auto a = CompileAndReport(*old_file, opt);
    auto b = CompileAndReport(*new_file, opt);
    if (!a || !b) {
      *exit_code = 2;
      return;
    }
    auto changes = compiler::ComparePlans(*a, *b);
    if (changes.empty()) {
      Print(stdout, "no changes to what the code may do\n");
      *exit_code = 0;
      return;
    }
    Print(stdout, compiler::DescribeChanges(changes));
    size_t loosens = 0;
    for (const auto& c : changes) loosens += c.effect == compiler::Change::Effect::kLoosens;
    Print(stdout, loosens ? std::to_string(loosens) + " change" + (loosens == 1 ? "" : "s") +
                                " loosen the policy\n"
                          : "nothing is loosened\n");
    *exit_code = loosens ? 1 : 0;
  });
}

}  // namespace

void RegisterPolicyCommands(CLI::App& app, int* exit_code) {
  RegisterCheck(app, exit_code);
  RegisterCompile(app, exit_code);
  RegisterExplain(app, exit_code);
  RegisterFmt(app, exit_code);
  RegisterDiff(app, exit_code);
}

}  // namespace safex::cli
