// `safex audit list|show|verify|checkpoint|export`: the auditors' verbs over the audit library.
//
// Exit statuses: 0 ok; 1 verification failed (`verify`, or `checkpoint` of a log that does not
// verify: nothing is signed) or run not found; 2 usage (bad flag or argument);
// 3 the audit log (or its key) cannot be opened or read. Everything read from the log is hostile
// (argv and reasons come from requests) and is escaped before it reaches a terminal.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "audit/checkpoint.h"
#include "audit/json_bytes.h"
#include "audit/ocsf.h"
#include "audit/text_escape.h"
#include "audit/time_format.h"
#include "audit/verdict.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "supervisor/cli.h"
#include "supervisor/cli_audit_verbs.h"

namespace safex::cli {
namespace {

using audit::AuditLog;
using audit::AuditOptions;
using nlohmann::json;

using namespace audit_verbs;  // NOLINT: the verbs' exit statuses and PrintError

struct CommonArgs {
  std::string db = audit::kDefaultDbPath;
  std::string key = audit::kDefaultKeyPath;
  bool key_given = false;
};

std::unique_ptr<AuditLog> OpenLog(const CommonArgs& c, bool write, int* exit_code) {
  AuditOptions opts;
  opts.read_only = !write;
  opts.create = false;  // auditors' verbs never create a log
  opts.key_path = c.key;
  auto log = AuditLog::Open(c.db, opts);
  if (!log.ok()) {
    PrintError(log.status().message());
    *exit_code = kExitUnreadable;
    return nullptr;
  }
  return std::move(log).value();
}

std::string Str(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }

std::string Duration(const std::optional<int64_t>& ns) {
  if (!ns) return "-";
  char buf[32];
  if (*ns < 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fms", static_cast<double>(*ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fs", static_cast<double>(*ns) / 1e9);
  }
  return buf;
}

std::string ExitColumn(const audit::RunSummary& r) {
  if (r.signal) return "sig " + std::to_string(*r.signal);
  if (r.exit_code) return std::to_string(*r.exit_code);
  return "-";
}

json OptJson(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

json StreamJson(const std::optional<audit::StreamSummary>& s) {
  if (!s) return nullptr;
  return json{{"bytes", s->bytes}, {"sha256", s->sha256}, {"truncated", s->truncated}};
}

// The run's evidence as recorded (the writer made it JSON; a record that is not is shown as the
// text it is, never dropped).
json EnforcementJson(const std::string& recorded) {
  if (recorded.empty()) return nullptr;
  json j = json::parse(recorded, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return audit::JsonFromBytes(recorded);
  return j;
}

// One line per field of the evidence, for `safex audit show`.
std::vector<std::string> EnforcementLines(const std::string& recorded) {
  std::vector<std::string> out;
  json j = EnforcementJson(recorded);
  if (!j.is_object() || !j.contains("fields") || !j["fields"].is_array()) {
    if (!recorded.empty()) out.push_back(audit::EscapeForTerminal(recorded));
    return out;
  }
  auto text = [](const json& f, const char* key) {
    return f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : std::string();
  };
  for (const json& f : j["fields"]) {
    const std::string state = text(f, "state");
    std::string line = text(f, "name") + ": " + state;
    if (state == "matches" || state == "observed") line += " " + text(f, "observed");
    if (state == "differs") {
      line += ", plan " + text(f, "expected") + ", seen " + text(f, "observed");
    }
    line += " (" + text(f, "source") + ")";
    if (!text(f, "probe").empty()) line += "; probe: " + text(f, "probe");
    out.push_back(audit::EscapeForTerminal(line));
  }
  return out;
}

json RunJson(const audit::RunSummary& r) {
  json argv = json::array();
  for (const auto& a : r.argv) argv.push_back(audit::JsonFromBytes(a));
  json limits = json::array();
  for (const auto& l : r.limits_fired) limits.push_back(audit::JsonFromBytes(l));
  json validators = json::array();
  for (const auto& v : r.validator_results) {
    validators.push_back({{"name", audit::JsonFromBytes(v.name)},
                          {"outcome", audit::JsonFromBytes(v.outcome)},
                          {"detail", audit::JsonFromBytes(v.detail)}});
  }
  json egress = json::array();
  for (const auto& d : r.denied_egress) {
    egress.push_back({{"destination", audit::JsonFromBytes(d.destination)}, {"count", d.count}});
  }
  return json{
      {"run_id", r.run_id},
      {"state", r.state},
      {"verdict", r.verdict.empty() ? json(nullptr) : json(r.verdict)},
      {"started_at", audit::FormatIso8601(r.start_ns)},
      {"start_ns", r.start_ns},
      {"ended_at", r.end_ns ? json(audit::FormatIso8601(*r.end_ns)) : json(nullptr)},
      {"end_ns", OptJson(r.end_ns)},
      {"uid", r.requester.uid ? json(*r.requester.uid) : json(nullptr)},
      {"gid", r.requester.gid ? json(*r.requester.gid) : json(nullptr)},
      {"pid", r.requester.pid ? json(*r.requester.pid) : json(nullptr)},
      {"policy_name", audit::JsonFromBytes(r.policy_name)},
      {"policy_source_digest", audit::JsonFromBytes(r.policy_source_digest)},
      {"plan_digest", audit::JsonFromBytes(r.plan_digest)},
      {"backend", audit::JsonFromBytes(r.backend)},
      {"backend_mode", audit::JsonFromBytes(r.backend_mode)},
      {"argv", argv},
      {"exit_code", OptJson(r.exit_code)},
      {"signal", OptJson(r.signal)},
      {"limits_fired", limits},
      {"wall_ns", OptJson(r.wall_ns)},
      {"cpu_ns", OptJson(r.cpu_ns)},
      {"peak_memory_bytes", OptJson(r.peak_memory_bytes)},
      {"stdout", StreamJson(r.stdout_summary)},
      {"stderr", StreamJson(r.stderr_summary)},
      {"validator_results", validators},
      {"denied_egress", egress},
      {"reason", audit::JsonFromBytes(r.reason)},
      {"start_seq", r.start_seq},
      {"end_seq", OptJson(r.end_seq)},
      {"purpose", r.purpose.empty() ? json(nullptr) : audit::JsonFromBytes(r.purpose)},
      {"enforcement", EnforcementJson(r.enforcement)},
  };
}

// JsonFromBytes keeps every string valid UTF-8; `replace` is a second line of defence so that
// serialisation can never throw.
std::string Dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

// The CSV form of a value: NULL is an empty field, an empty string is "" (quoted).
std::string CsvValue(const audit::SqlValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return "";
  if (const auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  const auto& s = std::get<std::string>(v);
  return s.empty() ? "\"\"" : audit::CsvField(s);
}

std::string CsvText(const std::string& s) { return s.empty() ? "\"\"" : audit::CsvField(s); }

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  // Widths in code points (cells are escaped, so they are ASCII or printable UTF-8).
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  std::vector<size_t> w;
  for (const auto& row : rows) {
    if (w.size() < row.size()) w.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(w[i] - width(row[i]) + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// ---- list ----------------------------------------------------------------------------------

struct ListArgs {
  std::string since, until, policy, verdict, state;
  std::optional<uint32_t> uid;
  uint64_t limit = 100;
  bool json = false, csv = false;
};

int DoList(const CommonArgs& c, const ListArgs& a) {
  audit::RunFilter f;
  const int64_t now = audit::NowNs();
  for (auto [text, dest] : {std::pair{&a.since, &f.since_ns}, {&a.until, &f.until_ns}}) {
    if (text->empty()) continue;
    auto t = audit::ParseTimeArg(*text, now);
    if (!t.ok()) {
      PrintError(t.status().message());
      return kExitUsage;
    }
    *dest = *t;
  }
  if (!a.policy.empty()) f.policy = a.policy;
  if (!a.verdict.empty()) f.verdict = audit::ParseVerdict(a.verdict);  // checked by CLI11
  if (!a.state.empty()) f.state = a.state;
  f.uid = a.uid;
  f.limit = a.limit;
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  auto runs = log->ListRuns(f);
  if (!runs.ok()) {
    PrintError(runs.status().message());
    return kExitUnreadable;
  }
  if (a.json) {
    json arr = json::array();
    for (const auto& r : *runs) arr.push_back(RunJson(r));
    std::cout << Dump(arr, 2) << "\n";
  } else if (a.csv) {
    std::cout << "run_id,state,verdict,started_at,ended_at,uid,gid,pid,policy_name,plan_digest,"
                 "backend,backend_mode,exit_code,signal,limits_fired,wall_ns,cpu_ns,"
                 "peak_memory_bytes,stdout_bytes,stderr_bytes,reason,argv\r\n";
    for (const auto& r : *runs) {
      json argv = json::array();
      for (const auto& x : r.argv) argv.push_back(audit::JsonFromBytes(x));
      json limits = json::array();
      for (const auto& x : r.limits_fired) limits.push_back(audit::JsonFromBytes(x));
      auto u = [](const auto& o) { return o ? std::to_string(*o) : std::string(); };
      std::vector<std::string> fields = {
          CsvText(r.run_id),
          CsvText(r.state),
          r.verdict.empty() ? "" : CsvText(r.verdict),
          CsvText(audit::FormatIso8601(r.start_ns)),
          r.end_ns ? CsvText(audit::FormatIso8601(*r.end_ns)) : "",
          u(r.requester.uid),
          u(r.requester.gid),
          u(r.requester.pid),
          CsvText(r.policy_name),
          CsvText(r.plan_digest),
          CsvText(r.backend),
          CsvText(r.backend_mode),
          Str(r.exit_code),
          Str(r.signal),
          audit::CsvField(Dump(limits)),
          Str(r.wall_ns),
          Str(r.cpu_ns),
          Str(r.peak_memory_bytes),
          r.stdout_summary ? std::to_string(r.stdout_summary->bytes) : "",
          r.stderr_summary ? std::to_string(r.stderr_summary->bytes) : "",
          CsvText(r.reason),
          audit::CsvField(Dump(argv)),
      };
      std::string line;
      for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
      std::cout << line << "\r\n";
    }
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"RUN_ID", "STARTED", "POLICY", "VERDICT", "EXIT", "WALL", "UID", "ARGV"}};
    for (const auto& r : *runs) {
      rows.push_back({audit::EscapeForTerminal(r.run_id), audit::FormatIso8601(r.start_ns),
                      audit::EscapeForTerminal(r.policy_name.empty() ? "-" : r.policy_name),
                      r.verdict.empty() ? r.state : r.verdict, ExitColumn(r), Duration(r.wall_ns),
                      r.requester.uid ? std::to_string(*r.requester.uid) : "-",
                      audit::ArgvForDisplay(r.argv)});
    }
    PrintTable(rows);
  }
  return kExitOk;
}

// ---- sessions ------------------------------------------------------------------------------

json SessionJson(const AuditLog::SessionSummary& s) {
  json j = {{"session_id", s.session_id},
            {"opened_at", audit::FormatIso8601(s.opened_ns)},
            {"uid", s.uid ? json(*s.uid) : json(nullptr)},
            {"policy_name", audit::JsonFromBytes(s.policy_name)},
            {"plan_digest", s.plan_digest},
            {"backend", s.backend},
            {"closed_at", s.closed_ns ? json(audit::FormatIso8601(*s.closed_ns)) : json(nullptr)},
            {"closed_because", audit::JsonFromBytes(s.closed_because)},
            {"execs", s.execs},
            {"files_in", s.files_in},
            {"files_out", s.files_out}};
  return j;
}

// The agent sessions of the log, newest first: who, which policy, how many commands and files,
// when and why each ended (the `sessions` view; docs/audit.md, "Sessions").
int DoSessions(const CommonArgs& c, uint64_t limit, bool as_json) {
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  auto sessions = log->ListSessions(limit);
  if (!sessions.ok()) {
    PrintError(sessions.status().message());
    return kExitUnreadable;
  }
  if (as_json) {
    json arr = json::array();
    for (const auto& s : *sessions) arr.push_back(SessionJson(s));
    std::cout << Dump(arr, 2) << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"SESSION_ID", "OPENED", "UID", "POLICY", "EXECS", "FILES IN/OUT", "CLOSED", "WHY"}};
  for (const auto& s : *sessions) {
    rows.push_back({audit::EscapeForTerminal(s.session_id), audit::FormatIso8601(s.opened_ns),
                    s.uid ? std::to_string(*s.uid) : "-", audit::EscapeForTerminal(s.policy_name),
                    std::to_string(s.execs),
                    std::to_string(s.files_in) + "/" + std::to_string(s.files_out),
                    s.closed_ns ? audit::FormatIso8601(*s.closed_ns) : "open",
                    audit::EscapeForTerminal(s.closed_because.empty() ? "-" : s.closed_because)});
  }
  PrintTable(rows);
  return kExitOk;
}

// ---- show ----------------------------------------------------------------------------------

int DoShow(const CommonArgs& c, const std::string& id, bool as_json) {
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  auto detail = log->GetRun(id);
  if (!detail.ok()) {
    PrintError(detail.status().message());
    switch (detail.status().code()) {
      case Status::Code::kNotFound:
        return kExitFailed;
      case Status::Code::kInvalidArgument:
        return kExitUsage;
      default:
        return kExitUnreadable;
    }
  }
  const audit::RunSummary& r = detail->run;
  if (as_json) {
    json j = RunJson(r);
    json events = json::array();
    for (const auto& e : detail->events) {
      events.push_back({{"seq", e.seq()},
                        {"kind", std::string(e.text(audit::kColKind))},
                        {"time", audit::FormatIso8601(e.integer(audit::kColTimeNs).value_or(0))},
                        {"hash", e.hash}});
    }
    j["events"] = events;
    std::cout << Dump(j, 2) << "\n";
    return kExitOk;
  }
  auto esc = [](const std::string& s) { return s.empty() ? "-" : audit::EscapeForTerminal(s); };
  std::vector<std::vector<std::string>> rows = {
      {"run id:", esc(r.run_id)},
      {"state:", r.state},
      {"verdict:", r.verdict.empty() ? "-" : r.verdict},
      {"started:", audit::FormatIso8601(r.start_ns)},
      {"ended:", r.end_ns ? audit::FormatIso8601(*r.end_ns) : "-"},
      {"requester:", "uid " + (r.requester.uid ? std::to_string(*r.requester.uid) : "?") +
                         ", gid " + (r.requester.gid ? std::to_string(*r.requester.gid) : "?") +
                         ", pid " + (r.requester.pid ? std::to_string(*r.requester.pid) : "?")},
      {"policy:", esc(r.policy_name)},
      {"policy source:", esc(r.policy_source_digest)},
      {"plan digest:", esc(r.plan_digest)},
      {"backend:",
       esc(r.backend) + (r.backend_mode.empty() ? "" : " (" + esc(r.backend_mode) + ")")},
      {"argv:", audit::ArgvForDisplay(r.argv)},
  };
  // A run refused by its own evidence has a start and an end but no program to describe.
  if (r.state != "refused" && r.verdict != "refused") {
    rows.push_back({"exit:", ExitColumn(r)});
    std::string limits;
    for (const auto& l : r.limits_fired) limits += (limits.empty() ? "" : ", ") + esc(l);
    rows.push_back({"limits fired:", limits.empty() ? "-" : limits});
    rows.push_back({"wall / cpu:", Duration(r.wall_ns) + " / " + Duration(r.cpu_ns)});
    rows.push_back({"peak memory:",
                    r.peak_memory_bytes ? std::to_string(*r.peak_memory_bytes) + " bytes" : "-"});
    for (auto [name, s] :
         {std::pair{"stdout:", &r.stdout_summary}, {"stderr:", &r.stderr_summary}}) {
      if (*s) {
        rows.push_back({name, std::to_string((*s)->bytes) + " bytes, sha256 " + esc((*s)->sha256) +
                                  ((*s)->truncated ? ", truncated" : "")});
      }
    }
    for (const auto& v : r.validator_results) {
      rows.push_back({"validator:", esc(v.name) + ": " + esc(v.outcome) +
                                        (v.detail.empty() ? "" : " (" + esc(v.detail) + ")")});
    }
    for (const auto& d : r.denied_egress) {
      rows.push_back({"denied egress:", esc(d.destination) + " x" + std::to_string(d.count)});
    }
  }
  if (!r.reason.empty()) rows.push_back({"reason:", esc(r.reason)});
  if (!r.purpose.empty()) rows.push_back({"purpose:", esc(r.purpose)});
  if (r.state != "refused") {
    std::vector<std::string> lines = EnforcementLines(r.enforcement);
    if (lines.empty()) lines.push_back("- (not recorded)");
    for (std::string& l : lines) rows.push_back({"enforced:", std::move(l)});
  }
  for (const auto& e : detail->events) {
    const std::string kind(e.text(audit::kColKind));
    std::string line = kind + " at " +
                       audit::FormatIso8601(e.integer(audit::kColTimeNs).value_or(0)) + ", hash " +
                       esc(e.hash);
    // An access says who read what the run left (the service's downloads).
    if (kind == audit::kKindAccess) {
      line += ", by uid " + std::to_string(e.integer(audit::kColUid).value_or(-1)) + ": " +
              esc(std::string(e.text(audit::kColReason)));
    }
    rows.push_back({"event " + std::to_string(e.seq()) + ":", std::move(line)});
  }
  PrintTable(rows);
  return kExitOk;
}

// ---- verify --------------------------------------------------------------------------------

int DoVerify(const CommonArgs& c, const std::string& checkpoint_file, bool skip_integrity) {
  audit::VerifyOptions opts;
  opts.integrity_check = !skip_integrity;
  if (!checkpoint_file.empty()) {
    std::FILE* f = std::fopen(checkpoint_file.c_str(), "re");
    if (f == nullptr) {
      PrintError("cannot read checkpoint file " + checkpoint_file + ": " + std::strerror(errno));
      return kExitUsage;
    }
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1 << 20)) {
      text.append(buf, n);
    }
    std::fclose(f);
    auto cp = audit::Checkpoint::FromJson(text);
    if (!cp.ok()) {
      PrintError(checkpoint_file + ": " + cp.status().message());
      return kExitUsage;
    }
    opts.external = *cp;
  }
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  // The public key beside the signing key, when there is one, is the key checkpoints must carry.
  std::string trusted_note;
  auto pub = audit::LoadPublicKeyHex(c.key + ".pub");
  if (pub.ok()) {
    opts.trusted_public_key = *pub;
    trusted_note = "signed by " + c.key + ".pub";
  } else if (c.key_given) {
    // The first `safex audit checkpoint` makes the key: a log never checkpointed has no key yet
    // and no signature to hold to one, and its chain is still worth checking. (A log whose
    // checkpoints cannot be read is damaged: Verify reads them again and says how.)
    auto stored = log->Checkpoints();
    const bool anything_signed = opts.external || (stored.ok() && !stored->empty());
    if (pub.status().code() != Status::Code::kNotFound || anything_signed) {
      PrintError("cannot load the public key " + c.key + ".pub: " + pub.status().message());
      return kExitUnreadable;
    }
  } else {
    trusted_note = "signatures checked against the keys they carry (no " + c.key + ".pub)";
  }
  auto rep = log->Verify(opts);
  if (!rep.ok()) {
    PrintError(rep.status().message());
    return kExitUnreadable;
  }
  if (rep->ok && c.key_given && !opts.trusted_public_key && rep->checkpoints > 0) {
    // A checkpoint was signed between the look above and Verify's snapshot.
    PrintError("cannot load the public key " + c.key + ".pub: " + pub.status().message());
    return kExitUnreadable;
  }
  if (!rep->ok) {
    std::cout << "FAILED: " << audit::EscapeForTerminal(rep->problem) << "\n";
    if (rep->first_bad_seq > 0) {
      std::cout << "first bad event: " << rep->first_bad_seq << "\n";
    }
    return kExitFailed;
  }
  std::cout << "OK: " << rep->events << " events, head " << rep->head_hash << "\n";
  std::cout << "checkpoints verified: " << rep->checkpoints;
  if (rep->checkpoints > 0) std::cout << " (" << audit::EscapeForTerminal(trusted_note) << ")";
  std::cout << "\n";
  if (opts.external) {
    std::cout << "checkpoint file: the log still holds its " << opts.external->event_count
              << " events\n";
  }
  if (rep->checkpoints == 0) {
    std::cout << "note: no checkpoint; removal of the newest events would go unnoticed (run "
                 "`safex audit checkpoint --out FILE` and keep FILE elsewhere)\n";
  }
  return kExitOk;
}

// ---- checkpoint ----------------------------------------------------------------------------

int DoCheckpoint(const CommonArgs& c, const std::string& out) {
  int exit_code = kExitOk;
  auto log = OpenLog(c, true, &exit_code);
  if (!log) return exit_code;
  auto cp = log->MakeCheckpoint();
  if (!cp.ok()) {
    PrintError(cp.status().message());
    if (cp.status().code() == Status::Code::kDataLoss) {
      // MakeCheckpoint verified the log first and found it damaged.
      PrintError("no checkpoint was signed; `safex audit verify` shows what is wrong");
      return kExitFailed;
    }
    return kExitUnreadable;
  }
  if (!out.empty()) {
    std::string text = cp->ToJson();
    UniqueFd fd(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) {
      PrintError("cannot write " + out + ": " + std::strerror(errno));
      return kExitUnreadable;
    }
    if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        fsync(fd.get()) != 0) {
      PrintError("cannot write " + out + ": " + std::strerror(errno));
      return kExitUnreadable;
    }
  }
  std::cout << "checkpoint: " << cp->event_count << " events, head " << cp->head_hash << "\n"
            << "signed by " << cp->public_key << " at " << audit::FormatIso8601(cp->time_ns)
            << "\n";
  if (!out.empty()) std::cout << "written to " << audit::EscapeForTerminal(out) << "\n";
  return kExitOk;
}

// ---- export --------------------------------------------------------------------------------

int DoExport(const CommonArgs& c, bool as_json) {
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  const auto names = audit::EventColumnNames();
  if (!as_json) {
    std::string header;
    for (auto n : names) header += std::string(n) + ",";
    std::cout << header << "hash\r\n";
  }
  Status st = log->ForEachEvent([&](const audit::EventRow& e) {
    if (as_json) {
      json j = json::object();
      for (size_t i = 0; i < names.size(); ++i) {
        const auto& v = e.values[i];
        if (std::holds_alternative<std::monostate>(v)) {
          j[std::string(names[i])] = nullptr;
        } else if (const auto* n = std::get_if<int64_t>(&v)) {
          j[std::string(names[i])] = *n;
        } else {
          j[std::string(names[i])] = audit::JsonFromBytes(std::get<std::string>(v));
        }
      }
      j["hash"] = e.hash;
      std::cout << Dump(j) << "\n";
    } else {
      std::string line;
      for (const auto& v : e.values) line += CsvValue(v) + ",";
      std::cout << line << e.hash << "\r\n";
    }
    if (!std::cout) return Status::Unavailable("writing the export failed");
    return Status::Ok();
  });
  std::cout.flush();
  if (!st.ok()) {
    PrintError(st.message());
    return kExitUnreadable;
  }
  return kExitOk;
}

// device.hostname of the events: the log is this host's (the log does not name its host).
std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";  // left out rather than guessed
  return name;
}

// Every run as one OCSF event per line (JSON Lines), oldest first. Runs are a view over the
// events, not a stream, so they are all read before the first line is written.
int DoExportOcsf(const CommonArgs& c) {
  int exit_code = kExitOk;
  auto log = OpenLog(c, false, &exit_code);
  if (!log) return exit_code;
  auto runs = log->ListRuns(audit::RunFilter{});  // limit 0: all
  if (!runs.ok()) {
    PrintError(runs.status().message());
    return kExitUnreadable;
  }
  const audit::OcsfSource source{kSafexVersion, HostName()};
  // ListRuns is newest first; a SIEM ingests in time order, as the log was written.
  for (auto it = runs->rbegin(); it != runs->rend() && std::cout; ++it) {
    std::cout << Dump(audit::OcsfEventFromRun(*it, source)) << "\n";
  }
  std::cout.flush();
  if (!std::cout) {
    PrintError("writing the export to standard output failed");
    return kExitUnreadable;
  }
  return kExitOk;
}

struct ExportArgs {
  bool json = false;  // --json: alias of --format json
  bool csv = false;   // --csv: alias of --format csv
  std::string format;
};

// The one format the flags name, or nullopt after a usage message (none, or two that differ:
// `--json --format csv` is a mistake to report, not a choice to make for the user).
std::optional<std::string> ExportFormat(const ExportArgs& a) {
  std::vector<std::string> named;
  if (a.json) named.emplace_back("json");
  if (a.csv) named.emplace_back("csv");
  if (!a.format.empty()) named.push_back(a.format);
  if (named.empty()) {
    PrintError("export needs --format json|csv|ocsf (or --json, --csv)");
    return std::nullopt;
  }
  for (const auto& f : named) {
    if (f != named[0]) {
      PrintError("export: --json, --csv and --format name different formats (" + named[0] + ", " +
                 f + "); give one");
      return std::nullopt;
    }
  }
  return named[0];
}

void AddCommonOptions(CLI::App* sub, const std::shared_ptr<CommonArgs>& c) {
  sub->add_option("--audit-db", c->db, "the audit database (default /var/lib/safex/audit.db)");
  sub->add_option_function<std::string>(
      "--key",
      [c](const std::string& k) {
        c->key = k;
        c->key_given = true;
      },
      "the checkpoint signing key; its public half is KEY.pub (default /var/lib/safex/audit.key)");
}

}  // namespace

void RegisterAuditCommands(CLI::App& app, int* exit_code) {
  auto common = std::make_shared<CommonArgs>();
  CLI::App* audit_cmd = app.add_subcommand("audit", "query and verify the audit log");
  audit_cmd->require_subcommand(1);
  AddCommonOptions(audit_cmd, common);

  std::vector<std::string> verdicts;
  for (const auto& v : audit::AllVerdicts()) verdicts.emplace_back(v.name);

  auto list_args = std::make_shared<ListArgs>();
  CLI::App* list = audit_cmd->add_subcommand("list", "list runs, newest first");
  AddCommonOptions(list, common);
  list->add_option("--since", list_args->since,
                   "runs started at or after T (ISO-8601 like 2026-11-29T10:00Z, or 7d/12h/30m)");
  list->add_option("--until", list_args->until, "runs started before T");
  list->add_option("--policy", list_args->policy, "only runs of this policy");
  list->add_option("--verdict", list_args->verdict, "only runs with this verdict")
      ->check(CLI::IsMember(verdicts));
  list->add_option("--state", list_args->state, "running, finished, interrupted or refused")
      ->check(CLI::IsMember({"running", "finished", "interrupted", "refused"}));
  list->add_option("--uid", list_args->uid, "only runs requested by this uid");
  list->add_option("--limit", list_args->limit, "at most N runs (default 100; 0: all)");
  auto* json_flag = list->add_flag("--json", list_args->json, "one JSON array of run objects");
  list->add_flag("--csv", list_args->csv, "RFC 4180 CSV with a header row")->excludes(json_flag);
  list->callback([=] { *exit_code = DoList(*common, *list_args); });

  auto sessions_limit = std::make_shared<uint64_t>(100);
  auto sessions_json = std::make_shared<bool>(false);
  CLI::App* sessions = audit_cmd->add_subcommand("sessions", "list agent sessions, newest first");
  AddCommonOptions(sessions, common);
  sessions->add_option("--limit", *sessions_limit, "at most N sessions (default 100; 0: all)");
  sessions->add_flag("--json", *sessions_json, "one JSON array of session objects");
  sessions->callback(
      [=] { *exit_code = DoSessions(*common, *sessions_limit, *sessions_json); });

  auto show_id = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false);
  CLI::App* show = audit_cmd->add_subcommand("show", "everything recorded about one run");
  AddCommonOptions(show, common);
  show->add_option("RUN_ID", *show_id, "a run id or a unique prefix of one")->required();
  show->add_flag("--json", *show_json, "one JSON object");
  show->callback([=] { *exit_code = DoShow(*common, *show_id, *show_json); });

  auto cp_file = std::make_shared<std::string>();
  auto quick = std::make_shared<bool>(false);
  CLI::App* verify = audit_cmd->add_subcommand(
      "verify", "recompute the hash chain and check every checkpoint (exit 0 intact, 1 not)");
  AddCommonOptions(verify, common);
  verify->add_option("--checkpoint", *cp_file,
                     "a checkpoint file (from `checkpoint --out`) the log must still match");
  verify->add_flag("--no-integrity-check", *quick, "skip SQLite's PRAGMA integrity_check");
  auto central = std::make_shared<std::string>();
  auto central_host = std::make_shared<std::string>();
  auto verify_json = std::make_shared<bool>(false);
  verify->add_option("--central", *central,
                     "verify the fleet's central database instead (a libpq URI or connection "
                     "string): every enrolled log's chain and checkpoints");
  verify->add_option("--host", *central_host, "with --central: only this host's log");
  verify->add_flag("--json", *verify_json, "with --central: one JSON array of per-host reports");
  verify->callback([=] {
    if (central->empty()) {
      *exit_code = DoVerify(*common, *cp_file, *quick);
      return;
    }
    std::optional<std::string> host;
    if (!central_host->empty()) host = *central_host;
    *exit_code = VerifyCentralCommand(*central, host, *verify_json);
  });

  auto out_file = std::make_shared<std::string>();
  CLI::App* checkpoint = audit_cmd->add_subcommand(
      "checkpoint", "sign (event count, head hash) into the log; the key is made on first use");
  AddCommonOptions(checkpoint, common);
  checkpoint->add_option("--out", *out_file,
                         "also write the checkpoint to FILE (keep it elsewhere)");
  checkpoint->callback([=] { *exit_code = DoCheckpoint(*common, *out_file); });

  auto export_args = std::make_shared<ExportArgs>();
  CLI::App* exp = audit_cmd->add_subcommand(
      "export", "every event with its hash in log order, or every run as an OCSF event");
  AddCommonOptions(exp, common);
  exp->add_option("--format", export_args->format,
                  "json: JSON Lines, one event per line; csv: RFC 4180 with a header row; "
                  "ocsf: JSON Lines, one OCSF 1.1.0 Process Activity event per run, oldest first")
      ->check(CLI::IsMember({"json", "csv", "ocsf"}));
  exp->add_flag("--json", export_args->json, "same as --format json");
  exp->add_flag("--csv", export_args->csv, "same as --format csv");
  exp->callback([=] {
    std::optional<std::string> format = ExportFormat(*export_args);
    if (!format) {
      *exit_code = kExitUsage;
    } else if (*format == "ocsf") {
      *exit_code = DoExportOcsf(*common);
    } else {
      *exit_code = DoExport(*common, *format == "json");
    }
  });

  RegisterFleetCommands(audit_cmd, exit_code);
}

}  // namespace safex::cli
