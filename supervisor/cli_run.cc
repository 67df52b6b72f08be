// `safex run`: one untrusted run, as root. See supervisor/runner.h for the steps.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "common/unique_fd.h"
#include "compiler/host_config.h"
#include "supervisor/cli.h"
#include "supervisor/interrupt_watcher.h"
#include "supervisor/run_setup.h"
#include "supervisor/runner.h"

namespace safex::cli {
namespace {

// stdin for the sandbox is held in memory and fed through a pipe; it is bounded.
constexpr size_t kMaxStdinBytes = 64 << 20;

struct RunFlags {
  std::string policy;
  std::string input;
  std::string output;
  std::string stdin_file;
  bool json = false;
  std::vector<std::string> search_path;
  supervisor::RunSetupFlags setup;
  std::vector<std::string> argv;
};

// The whole --stdin file, read once into memory of its exact size (the run's only copy of it:
// it moves on into the driver's request). A regular file only: O_NONBLOCK keeps a FIFO from
// blocking the open, and the fstat refuses it.
Result<std::string> ReadBoundedFile(const std::string& path, size_t cap) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Status::Errno("open", path, errno);
  UniqueFd owner(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::Errno("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("stdin file " + path + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > cap) {
    return Status::InvalidArgument("stdin file " + path + " is larger than " +
                                   std::to_string(cap >> 20) + " MiB");
  }
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("read", path, errno);
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > cap) {
      return Status::InvalidArgument("stdin file " + path + " is larger than " +
                                     std::to_string(cap >> 20) + " MiB");
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

void WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the caller's stdout is gone (EPIPE): nothing more to say
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Prints the report the way the caller asked; returns the exit status.
int Report(const supervisor::RunReport& report, bool json) {
  if (json) {
    std::string text = supervisor::ReportToJson(report).dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
    WriteAll(STDOUT_FILENO, text);
    return report.exit_status;
  }
  if (report.result) {
    if (report.stdout_report) WriteAll(STDOUT_FILENO, report.stdout_report->delivered);
    if (report.stderr_report) WriteAll(STDERR_FILENO, report.stderr_report->delivered);
  }
  if (!report.diagnostics.empty()) WriteAll(STDERR_FILENO, report.diagnostics);
  if (report.verdict != supervisor::Verdict::kOk &&
      report.verdict != supervisor::Verdict::kNonzeroExit) {
    std::string line = "safex: " + std::string(supervisor::VerdictName(report.verdict));
    if (!report.limits_fired.empty()) line += " (limit: " + report.limits_fired.front() + ")";
    if (!report.reason.empty()) line += ": " + report.reason;
    if (!report.run_id.empty()) line += " [run " + report.run_id + "]";
    line += '\n';
    WriteAll(STDERR_FILENO, line);
  }
  return report.exit_status;
}

int RefuseEarly(const std::string& why, bool json) {
  supervisor::RunReport report;
  report.reason = why;
  return Report(report, json);
}

int DoRun(const RunFlags& f) {
  // Before any thread exists: SIGINT/SIGTERM/SIGHUP then cancel the run (the sandbox is killed,
  // removed and the run recorded as interrupted) instead of ending this process mid-run.
  auto interrupt = supervisor::InterruptWatcher::Start();
  // Fail closed on the audit log first: nothing runs without a record.
  supervisor::RunSetup setup;
  auto log = supervisor::OpenAuditLogForRuns(f.setup);
  if (!log.ok()) return RefuseEarly(log.status().message(), f.json);
  setup.log = std::move(*log);

  supervisor::RunSpec spec;
  spec.argv = f.argv;
  spec.input_dir = f.input;
  spec.output_dir = f.output;
  spec.requester.uid = getuid();
  spec.requester.gid = getgid();
  spec.requester.pid = getpid();
  if (interrupt.ok()) spec.cancel = (*interrupt)->flag();

  supervisor::RunReport refusal;
  auto refuse = [&](const std::string& why) {
    refusal.reason = why;
    supervisor::Runner::RecordRefusal(*setup.log, spec, &refusal).ok();  // said in the reason
    return Report(refusal, f.json);
  };
  refusal.run_id = audit::NewRunId();

  if (geteuid() != 0) return refuse("safex run needs root (cgroups, sandbox state)");
  if (!f.stdin_file.empty()) {
    auto data = ReadBoundedFile(f.stdin_file, kMaxStdinBytes);
    if (!data.ok()) return refuse(data.status().message());
    spec.stdin_data = std::move(data).value();
  }
  if (Status st = supervisor::PrepareRunSetup(f.setup, &setup); !st.ok()) {
    return refuse(st.message());
  }
  auto prepared = supervisor::PreparePlan(f.policy, f.search_path, setup.host.ceilings, &refusal);
  if (!prepared.ok()) {
    supervisor::Runner::RecordRefusal(*setup.log, spec, &refusal).ok();  // said in the reason
    return Report(refusal, f.json);
  }
  supervisor::RunReport report = setup.runner->Execute(*prepared, std::move(spec), *setup.log);
  return Report(report, f.json);
}

}  // namespace

void AddRunSetupOptions(CLI::App* cmd, supervisor::RunSetupFlags* f) {
  cmd->add_option("--host-config", f->host_config, "Operator ceilings (host.policy)");
  cmd->add_option("--audit-db", f->audit_db, "Audit log (SQLite)");
  cmd->add_option("--audit-key", f->audit_key, "Checkpoint signing key");
  cmd->add_option("--state-root", f->state_root, "Directory for per-run sandbox state");
  cmd->add_option("--runsc", f->runsc,
                  "runsc binary (overrides the host config's backends { gvisor { runsc } })");
}

void RegisterRunCommand(CLI::App& app, int* exit_code, const ProgramArgv* program) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run =
      app.add_subcommand("run", "Run a program in a fresh sandbox under a policy (root)");
  run->add_option("--policy", flags->policy, "Policy file (.policy)")->required();
  run->add_option("--input", flags->input,
                  "Directory mounted read-only at the policy's input mount");
  run->add_option("--output", flags->output,
                  "Directory that receives the validated files of the policy's output mount");
  run->add_option("--stdin", flags->stdin_file, "File fed to the program's standard input");
  run->add_flag("--json", flags->json, "Print one JSON object describing the run");
  run->add_option("--search-path", flags->search_path, "Directory searched for `extends`");
  AddRunSetupOptions(run, &flags->setup);
  run->footer(
      "The program and its arguments follow \"--\": safex run [OPTIONS] -- PROGRAM [ARGS...]");
  run->callback([flags, exit_code, program] {
    if (!program->has_value() || (*program)->empty()) {
      std::cerr << "safex run: give the program after \"--\": safex run --policy P -- PROGRAM "
                   "[ARGS...]\n";
      *exit_code = 2;
      return;
    }
    flags->argv = **program;
    *exit_code = DoRun(*flags);
  });
}

}  // namespace safex::cli
