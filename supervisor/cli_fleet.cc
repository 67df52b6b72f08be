// safex audit central init|enrol, safex audit ship, safex audit verify --central: the fleet
// audit (fleet/central.h, docs/audit.md "Fleet").
//
// Exit statuses: 0 done (verify: every log intact); 1 verify found a break, or ship shipped but
// the node's log is not what the central holds (the warning says what); 2 usage; 3 the node's
// log or the central database could not be read or written (nothing half-written: a ship keeps
// the batches it committed and resumes after them).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "audit/audit_log.h"
#include "audit/text_escape.h"
#include "fleet/central.h"
#include "supervisor/cli.h"
#include "supervisor/cli_audit_verbs.h"

namespace safex::cli {
namespace {

using nlohmann::json;

using namespace audit_verbs;  // NOLINT: the verbs' exit statuses and PrintError

struct FleetArgs {
  std::string url;
  std::string db = audit::kDefaultDbPath;
  std::string key = audit::kDefaultKeyPath;
  std::string host;
  std::string log_id;
  std::string public_key;
  std::string shipper;
  uint64_t batch = 5000;
  bool json = false;
};

// The node's log, read-only: shipping and enrolling never write it.
std::unique_ptr<audit::AuditLog> OpenNodeLog(const FleetArgs& a) {
  audit::AuditOptions opts;
  opts.read_only = true;
  opts.create = false;
  opts.key_path = a.key;
  auto log = audit::AuditLog::Open(a.db, opts);
  if (!log.ok()) {
    PrintError(log.status().message());
    return nullptr;
  }
  return std::move(log).value();
}

int DoInit(const FleetArgs& a) {
  auto rep = fleet::InitCentral(a.url);
  if (!rep.ok()) {
    PrintError(rep.status().message());
    return kExitUnreadable;
  }
  std::cout << (rep->created ? "made" : "already there:") << " the central audit schema, version "
            << rep->schema_version << "\n";
  return kExitOk;
}

// The enrolment from --log-id/--public-key when both are given, else from the node's log and
// key.
int DoEnrol(const FleetArgs& a) {
  fleet::Enrolment e{a.host, a.log_id, a.public_key, a.shipper};
  if (a.log_id.empty() != a.public_key.empty()) {
    PrintError("--log-id and --public-key go together (or neither: read from --audit-db, --key)");
    return kExitUsage;
  }
  if (a.log_id.empty()) {
    auto log = OpenNodeLog(a);
    if (!log) return kExitUnreadable;
    auto from_node = fleet::EnrolmentOf(*log, a.key, a.host);
    if (!from_node.ok()) {
      PrintError(from_node.status().message());
      return kExitUnreadable;
    }
    e = *from_node;
    e.shipper = a.shipper;
  }
  Status st = fleet::Enrol(a.url, e);
  if (!st.ok()) {
    PrintError(st.message());
    return st.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitUnreadable;
  }
  std::cout << "enrolled host " << e.host << ": log " << e.log_id << ", key " << e.public_key
            << (e.shipper.empty() ? "" : ", shipped by role " + e.shipper) << "\n";
  return kExitOk;
}

void PrintShip(const fleet::ShipReport& r, bool as_json) {
  if (as_json) {
    std::cout << json{{"host", r.host},
                      {"log_id", r.log_id},
                      {"events_shipped", r.events_shipped},
                      {"checkpoints_shipped", r.checkpoints_shipped},
                      {"central_seq_before", r.central_seq_before},
                      {"central_seq_after", r.central_seq_after},
                      {"local_head_seq", r.local_head_seq},
                      {"lag", r.lag()},
                      {"warning", r.warning}}
                     .dump()
              << "\n";
    return;
  }
  std::cout << "host " << r.host << " (log " << r.log_id << "): shipped " << r.events_shipped
            << " events and " << r.checkpoints_shipped << " checkpoints; the central holds 1.."
            << r.central_seq_after << ", the node " << r.local_head_seq << " (lag " << r.lag()
            << ")\n";
  if (!r.warning.empty()) std::cout << "WARNING: " << r.warning << "\n";
}

int DoShip(const FleetArgs& a) {
  auto log = OpenNodeLog(a);
  if (!log) return kExitUnreadable;
  fleet::ShipOptions opts;
  opts.batch_events = a.batch;
  auto rep = fleet::Ship(a.url, *log, opts);
  if (!rep.ok()) {
    PrintError(rep.status().message());
    return kExitUnreadable;
  }
  PrintShip(*rep, a.json);
  return rep->warning.empty() ? kExitOk : kExitFailed;
}

void AddUrl(CLI::App* cmd, FleetArgs* a) {
  cmd->add_option("--to", a->url,
                  "the central database: a libpq URI or connection string (keep passwords in "
                  ".pgpass, not here)")
      ->required();
}

void AddNodeOptions(CLI::App* cmd, FleetArgs* a) {
  cmd->add_option("--audit-db", a->db, "the node's audit log (default /var/lib/safex/audit.db)");
  cmd->add_option("--key", a->key,
                  "the node's checkpoint key; its public half is KEY.pub (default "
                  "/var/lib/safex/audit.key)");
}

}  // namespace

int VerifyCentralCommand(const std::string& url, const std::optional<std::string>& host,
                         bool as_json) {
  auto reports = fleet::VerifyCentral(url, host);
  if (!reports.ok()) {
    PrintError(reports.status().message());
    return kExitUnreadable;
  }
  bool all_ok = true;
  json out = json::array();
  for (const fleet::CentralLogReport& r : *reports) {
    all_ok = all_ok && r.ok;
    out.push_back({{"host", r.host},
                   {"log_id", r.log_id},
                   {"ok", r.ok},
                   {"events", r.events},
                   {"checkpoints", r.checkpoints},
                   {"head_seq", r.head_seq},
                   {"first_bad_seq", r.first_bad_seq},
                   {"problem", r.problem}});
    if (as_json) continue;
    if (r.ok) {
      std::cout << "host " << r.host << " (log " << r.log_id << "): intact: " << r.events
                << " events, " << r.checkpoints << " checkpoints signed by the pinned key\n";
    } else {
      std::cout << "host " << r.host << " (log " << r.log_id << "): BROKEN at seq "
                << r.first_bad_seq << ": " << audit::EscapeForTerminal(r.problem) << "\n";
    }
  }
  if (as_json) std::cout << out.dump() << "\n";
  if (!as_json)
    std::cout << (all_ok ? "central audit trail intact\n" : "central audit trail BROKEN\n");
  return all_ok ? kExitOk : kExitFailed;
}

void RegisterFleetCommands(CLI::App* audit_cmd, int* exit_code) {
  auto a = std::make_shared<FleetArgs>();
  CLI::App* central = audit_cmd->add_subcommand("central", "the fleet's central audit database");
  central->require_subcommand(1);

  CLI::App* init = central->add_subcommand(
      "init", "make the central schema, roles and views (as the database's owner)");
  AddUrl(init, a.get());
  init->callback([=] { *exit_code = DoInit(*a); });

  CLI::App* enrol = central->add_subcommand(
      "enrol", "enrol a node's log under a host name, pinning its checkpoint key");
  AddUrl(enrol, a.get());
  AddNodeOptions(enrol, a.get());
  enrol->add_option("--host", a->host, "the name auditors will see for this node")->required();
  enrol->add_option("--log-id", a->log_id, "the log's id (instead of reading --audit-db)");
  enrol->add_option("--public-key", a->public_key, "its checkpoint key, 64 hex digits");
  enrol->add_option("--shipper", a->shipper, "the only role that may ship this log");
  enrol->callback([=] { *exit_code = DoEnrol(*a); });

  CLI::App* ship = audit_cmd->add_subcommand(
      "ship", "send the node's unshipped events and checkpoints to the central database");
  AddUrl(ship, a.get());
  AddNodeOptions(ship, a.get());
  ship->add_option("--batch", a->batch, "events per transaction (default 5000)")
      ->check(CLI::Range(1, 1000000));
  ship->add_flag("--json", a->json, "one JSON object");
  ship->callback([=] { *exit_code = DoShip(*a); });
}

}  // namespace safex::cli
