// `safex submit`: one run through the safex service, with the exit statuses of `safex run`
// (docs/cli.md). Prints the program's output as the service validates it (the run's event
// stream), then what `safex run` prints after it; or the JSON result (--json).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/run_id.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "supervisor/cli.h"
#include "supervisor/output/delivery.h"
#include "supervisor/serve/base64.h"
#include "supervisor/serve/client.h"
#include "supervisor/serve/submit_request.h"
#include "supervisor/verdict.h"

namespace safex::cli {
namespace {

using nlohmann::json;

// Client-side bounds: the service enforces its own (smaller) limits; these only keep the client
// from reading unbounded files into memory.
constexpr size_t kMaxStdinBytes = 64 << 20;
constexpr size_t kMaxInputBytes = 256 << 20;
constexpr size_t kMaxInputFiles = 10000;

struct SubmitFlags {
  std::string policy;
  std::string session;  // --session ID: the run is that session's next command
  std::string socket = "/run/safex/safex.sock";
  std::string stdin_file;
  std::string input;
  std::string output;
  bool json = false;
  std::vector<std::string> argv;
};

void WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

Result<std::string> ReadFileBounded(const std::string& path, size_t cap) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Status::Errno("open", path, errno);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Errno("read", path, errno);
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > cap) {
      return Status::InvalidArgument(path + " is larger than " + std::to_string(cap) + " bytes");
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

// The service takes a flat directory of plain files (names travel in the request).
Status ReadInputDir(const std::string& dir, std::vector<serve::InputFile>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Status::Errno("opendir", dir, errno);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxInputFiles) return Status::InvalidArgument("too many input files");
  size_t total = 0;
  for (const std::string& n : names) {
    std::string path = dir + "/" + n;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return Status::Errno("lstat", path, errno);
    if (!S_ISREG(st.st_mode)) {
      return Status::InvalidArgument("input " + path +
                                     " is not a plain file (the service takes a flat directory "
                                     "of plain files)");
    }
    if (!serve::ValidInputFileName(n)) {
      return Status::InvalidArgument("input file name '" + n +
                                     "' is not accepted (1-255 of [A-Za-z0-9._-], not starting "
                                     "with '.')");
    }
    SAFEX_ASSIGN_OR_RETURN(std::string data, ReadFileBounded(path, kMaxInputBytes - total));
    total += data.size();
    out->push_back({n, std::move(data)});
  }
  return Status::Ok();
}

int Refuse(const std::string& why, bool as_json) {
  if (as_json) {
    json j = {{"verdict", "refused"},
              {"exit_status", supervisor::kExitRefused},
              {"reason", why},
              {"run_id", ""}};
    WriteAll(STDOUT_FILENO, j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  } else {
    WriteAll(STDERR_FILENO, "safex: refused: " + why + "\n");
  }
  return supervisor::kExitRefused;
}

// The request was sent whole but no complete answer came: the program may have run, may still
// be running, or may not have started. Said as such, with its own exit status, never as a
// refusal ("nothing ran").
int UnknownOutcome(const std::string& socket, const std::string& run_id, bool as_json) {
  std::string why =
      "the connection to the service at " + socket + " ended before the result arrived; ";
  why += run_id.empty()
             ? "the request may or may not have run"
             : "run " + run_id + " was admitted and may have run: look it up with `safex audit " +
                   "show " + run_id + "` or GET /v1/runs/" + run_id;
  if (as_json) {
    json j = {{"verdict", "unknown"},
              {"exit_status", supervisor::kExitUnknownOutcome},
              {"reason", why},
              {"run_id", run_id}};
    WriteAll(STDOUT_FILENO, j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  } else {
    WriteAll(STDERR_FILENO, "safex: outcome unknown: " + why + "\n");
  }
  return supervisor::kExitUnknownOutcome;
}

std::string StreamBytes(const json& stream) {
  if (!stream.is_object()) return "";
  if (auto it = stream.find("delivered_base64"); it != stream.end() && it->is_string()) {
    if (auto raw = serve::Base64Decode(it->get<std::string>())) return *raw;
  }
  if (auto it = stream.find("text"); it != stream.end() && it->is_string()) {
    return it->get<std::string>();
  }
  return "";
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Percent-encodes a kept file's name for its URL ('/' stays: it separates directories).
std::string UrlPath(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// --output DIR: the run's kept output files (GET /v1/runs/ID/files), each checked against the
// listed size and SHA-256, then written below DIR all or nothing, never through a symlink and
// never over an existing name (output/delivery.h, as `safex run --output` delivers).
Status FetchOutputs(const SubmitFlags& f, const std::string& run_id, size_t* count) {
  auto list = serve::HttpCall(f.socket, "GET", "/v1/runs/" + run_id + "/files", "");
  if (!list.ok()) return list.status();
  json j = json::parse(list->body, nullptr, false);
  if (list->status == 409 || list->status == 404) {
    return Status::FailedPrecondition("the service keeps no files for run " + run_id);
  }
  if (list->status != 200 || !j.is_object() || !j.contains("files") || !j["files"].is_array()) {
    return Status::Unavailable("the service answered HTTP " + std::to_string(list->status) +
                               " to the file list");
  }
  std::vector<std::string> data;
  std::vector<std::string> names;
  for (const json& e : j["files"]) {
    const std::string name = Str(e, "name");
    auto got =
        serve::HttpCall(f.socket, "GET", "/v1/runs/" + run_id + "/files/" + UrlPath(name), "");
    if (!got.ok()) return got.status().With(name);
    if (got->status != 200) {
      return Status::Unavailable(name + ": the service answered HTTP " +
                                 std::to_string(got->status));
    }
    if (Sha256Hex(got->body) != Str(e, "sha256")) {
      return Status::DataLoss(name + ": the bytes received do not match the listed SHA-256");
    }
    names.push_back(name);
    data.push_back(std::move(got->body));
  }
  std::vector<output::DeliveryItem> items;
  for (size_t i = 0; i < names.size(); ++i) items.push_back({names[i], data[i]});
  UniqueFd dir(open(f.output.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return Status::Errno("open", f.output, errno);
  auto delivered = output::Delivery::Write(dir.get(), items);
  if (!delivered.ok()) return delivered.status();
  *count = items.size();
  return Status::Ok();
}

// What the event stream printed so far (human mode): the result's streams are whole, so only
// what they hold beyond this is written at the end.
struct Printed {
  std::string out, err;
};

// One line of the run's event stream: validated output is written as it comes; the result
// event's object is kept for the end.
void OnEvent(std::string_view line, Printed* printed, json* result) {
  json ev = json::parse(line, nullptr, false);
  if (!ev.is_object()) return;
  const std::string type = Str(ev, "type");
  if (type == "result" && ev.contains("result") && ev["result"].is_object()) {
    *result = std::move(ev["result"]);
    return;
  }
  if (type != "stdout" && type != "stderr") return;
  std::string bytes = Str(ev, "data");
  if (auto it = ev.find("data_base64"); it != ev.end() && it->is_string()) {
    bytes = serve::Base64Decode(it->get<std::string>()).value_or("");
  }
  const bool out = type == "stdout";
  WriteAll(out ? STDOUT_FILENO : STDERR_FILENO, bytes);
  (out ? printed->out : printed->err) += bytes;
}

// The rest of a stream: what the whole validated stream holds beyond what was printed live.
// A stream that does not continue what was printed (a rejection found at the end) adds nothing.
void WriteRest(int fd, const std::string& whole, const std::string& printed) {
  if (whole.size() >= printed.size() && whole.compare(0, printed.size(), printed) == 0) {
    WriteAll(fd, std::string_view(whole).substr(printed.size()));
  }
}

// The POST. --json: the answer once the run has ended. Otherwise the run's event stream
// (`Accept: application/x-ndjson`), its output printed as the service validates it and the
// result object taken from the last event, as the body of the answer. Either way the service
// names the run at admission (a 102 interim response), so that a connection lost afterwards is an
// unknown outcome of a known run, never a "refused" for a run that went on.
Result<serve::HttpResponse> Post(const SubmitFlags& f, const std::string& body, Printed* printed) {
  serve::HttpCallOptions call;
  call.headers = {"Prefer: safex-run-id"};
  const std::string path = f.session.empty() ? "/v1/runs" : "/v1/sessions/" + f.session + "/exec";
  if (f.json) return serve::HttpCall(f.socket, "POST", path, body, call);
  call.headers.push_back("Accept: application/x-ndjson");
  json result;
  SAFEX_ASSIGN_OR_RETURN(
      serve::HttpResponse resp,
      serve::HttpStream(
          f.socket, "POST", path, body,
          [&](std::string_view line) { OnEvent(line, printed, &result); }, call));
  if (resp.content_type.starts_with("application/x-ndjson")) {
    if (!result.is_object()) resp.complete = false;  // the stream ended before its result
    resp.body = result.is_object() ? result.dump(-1, ' ', false, json::error_handler_t::replace)
                                   : "";
  }
  return resp;
}

// What the flags ask, checked before anything is read or sent.
std::string CheckSubmitFlags(const SubmitFlags& f) {
  if (f.session.empty() == f.policy.empty()) {
    return "give --policy (a run) or --session (a session's command), one of them";
  }
  if (!f.session.empty()) {
    if (!IsValidRunId(f.session)) return "--session takes a session id, not '" + f.session + "'";
    if (!f.input.empty() || !f.output.empty()) {
      return "a session's command takes no --input or --output (use `safex session put` and "
             "`safex session get`)";
    }
    return "";
  }
  if (!serve::ValidPolicyName(f.policy)) {
    return "--policy takes a policy name ([a-z0-9-]), not a path: '" + f.policy + "'";
  }
  return "";
}

// The request body: a run's, or a session command's (no policy: the session's).
Result<std::string> SubmitBody(const SubmitFlags& f, const serve::SubmitRequest& req) {
  SAFEX_ASSIGN_OR_RETURN(std::string body, serve::EncodeSubmitRequest(req));
  if (f.session.empty()) return body;
  json j = json::parse(body);
  j.erase("policy");
  return j.dump(-1, ' ', false, json::error_handler_t::strict);
}

int DoSubmit(const SubmitFlags& f) {
  serve::SubmitRequest req;
  req.policy = f.session.empty() ? f.policy : "session";
  req.argv = f.argv;
  if (std::string why = CheckSubmitFlags(f); !why.empty()) return Refuse(why, f.json);
  if (!f.stdin_file.empty()) {
    auto data = ReadFileBounded(f.stdin_file, kMaxStdinBytes);
    if (!data.ok()) return Refuse("stdin: " + data.status().message(), f.json);
    req.stdin_data = std::move(data).value();
  }
  if (!f.input.empty()) {
    if (Status st = ReadInputDir(f.input, &req.files); !st.ok()) {
      return Refuse("input: " + st.message(), f.json);
    }
  }
  auto body = SubmitBody(f, req);
  if (!body.ok()) return Refuse(body.status().message(), f.json);
  Printed printed;
  auto resp = Post(f, *body, &printed);
  if (!resp.ok()) return Refuse(resp.status().message(), f.json);
  if (!resp->complete) return UnknownOutcome(f.socket, resp->run_id, f.json);
  json j = json::parse(resp->body, nullptr, false);
  if (j.is_object() && !j.contains("exit_status") && j.contains("error") &&
      j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return Refuse(
        j["error"]["message"].get<std::string>() + " (HTTP " + std::to_string(resp->status) + ")",
        f.json);
  }
  if (j.is_discarded() || !j.is_object() || !j.contains("exit_status") ||
      !j["exit_status"].is_number_integer()) {
    return Refuse("the service answered HTTP " + std::to_string(resp->status) + " without a result",
                  f.json);
  }
  int exit_status = j["exit_status"].get<int>();
  if (exit_status < 0 || exit_status > 255) exit_status = supervisor::kExitRefused;
  // A run that ran and was not rejected has its output files delivered; a failed delivery is
  // its own outcome (delivery-failed), never a success.
  const std::string verdict0 = Str(j, "verdict");
  if (!f.output.empty() && j.contains("files") && verdict0 != "refused" &&
      verdict0 != "validator-rejected" && verdict0 != "setup-error") {
    size_t count = 0;
    if (Status st = FetchOutputs(f, Str(j, "run_id"), &count); !st.ok()) {
      j["verdict"] = "delivery-failed";
      j["exit_status"] = supervisor::kExitDeliveryFailed;
      j["reason"] = "output files could not be delivered to " + f.output + ": " + st.message();
      exit_status = supervisor::kExitDeliveryFailed;
      resp->body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  if (f.json) {
    WriteAll(STDOUT_FILENO, resp->body + "\n");
    return exit_status;
  }
  // As `safex run` prints a report (cli_run.cc): the program's output (what the stream did not
  // already print), diagnostics, then one line about anything but a plain exit.
  if (j.contains("stdout")) WriteRest(STDOUT_FILENO, StreamBytes(j["stdout"]), printed.out);
  if (j.contains("stderr")) WriteRest(STDERR_FILENO, StreamBytes(j["stderr"]), printed.err);
  std::string diagnostics = Str(j, "diagnostics_text");
  if (!diagnostics.empty()) WriteAll(STDERR_FILENO, diagnostics);
  std::string verdict = Str(j, "verdict");
  if (verdict != "ok" && verdict != "nonzero-exit") {
    std::string line = "safex: " + (verdict.empty() ? std::string("refused") : verdict);
    if (auto it = j.find("limits_fired");
        it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
      line += " (limit: " + (*it)[0].get<std::string>() + ")";
    }
    std::string reason = Str(j, "reason");
    if (!reason.empty()) line += ": " + reason;
    std::string run_id = Str(j, "run_id");
    if (!run_id.empty()) line += " [run " + run_id + "]";
    WriteAll(STDERR_FILENO, line + "\n");
  }
  return exit_status;
}

}  // namespace

void RegisterSubmitCommand(CLI::App& app, int* exit_code, const ProgramArgv* program) {
  auto flags = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit", "Run a program through the safex service");
  cmd->add_option("--policy", flags->policy, "Policy name (from the service's policy directory)");
  cmd->add_option("--session", flags->session,
                  "Run as the next command of this session (safex session open) instead");
  cmd->add_option("--socket", flags->socket, "The service's Unix socket");
  cmd->add_option("--stdin", flags->stdin_file, "File fed to the program's standard input");
  cmd->add_option("--input", flags->input,
                  "Flat directory of plain files that becomes the run's input directory");
  cmd->add_option("--output", flags->output,
                  "Directory that receives the run's output files (fetched from the service)");
  cmd->add_flag("--json", flags->json, "Print one JSON object describing the run");
  cmd->footer(
      "The program and its arguments follow \"--\": safex submit [OPTIONS] -- PROGRAM [ARGS...]");
  cmd->callback([flags, exit_code, program] {
    if (!program->has_value() || (*program)->empty()) {
      WriteAll(STDERR_FILENO,
               "safex submit: give the program after \"--\": safex submit --policy P -- PROGRAM "
               "[ARGS...]\n");
      *exit_code = 2;
      return;
    }
    flags->argv = **program;
    *exit_code = DoSubmit(*flags);
  });
}

}  // namespace safex::cli
