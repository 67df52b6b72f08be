// `safex session`: agent sessions through the safex service (docs/api.md, "Sessions"), for
// scripts and the containment suite. A session's commands are `safex submit --session ID`.
//
//   safex session open --policy P      prints the session object (JSON); its id is session_id
//   safex session show ID              prints it again (state, commands run, limits)
//   safex session put ID PATH FILE     writes FILE's bytes to PATH inside the session
//   safex session get ID PATH          writes PATH's bytes (validated) to stdout
//   safex session close ID             ends it (its sandbox is destroyed)
//
// Exit status: 0 done, 125 refused or failed (the service's message on stderr), 2 usage.
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_id.h"
#include "supervisor/cli.h"
#include "supervisor/serve/client.h"
#include "supervisor/serve/submit_request.h"
#include "supervisor/verdict.h"

namespace safex::cli {
namespace {

using nlohmann::json;

constexpr size_t kMaxFileBytes = 16 << 20;  // the service's own cap on a session file

struct SessionFlags {
  std::string socket = "/run/safex/safex.sock";
  std::string policy;
  std::string id;
  std::string path;
  std::string file;
};

void Write(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

int Fail(const std::string& why) {
  Write(STDERR_FILENO, "safex session: " + why + "\n");
  return supervisor::kExitRefused;
}

// Percent-encodes a path inside the sandbox for the URL ('/' stays).
std::string UrlOf(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// One call; the answer's body when its status is 2xx, else the service's message.
Result<std::string> Call(const SessionFlags& f, const std::string& method, const std::string& path,
                         const std::string& body) {
  SAFEX_ASSIGN_OR_RETURN(serve::HttpResponse resp, serve::HttpCall(f.socket, method, path, body));
  if (!resp.complete) return Status::Unavailable("the connection ended before the answer");
  if (resp.status >= 200 && resp.status < 300) return std::move(resp.body);
  json j = json::parse(resp.body, nullptr, false);
  std::string why = "HTTP " + std::to_string(resp.status);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    why = j["error"]["message"].get<std::string>() + " (" + why + ")";
  }
  return Status::FailedPrecondition(why);
}

int Print(const Result<std::string>& answer) {
  if (!answer.ok()) return Fail(answer.status().message());
  Write(STDOUT_FILENO, *answer);
  if (!answer->empty() && answer->back() != '\n') Write(STDOUT_FILENO, "\n");
  return 0;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  FILE* fp = fopen(path.c_str(), "rb");
  if (fp == nullptr) return Status::Errno("open", path, errno);
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, fp)) > 0 && data.size() <= kMaxFileBytes) {
    data.append(buf, n);
  }
  fclose(fp);
  if (data.size() > kMaxFileBytes) return Status::ResourceExhausted(path + " is over 16 MiB");
  return data;
}

std::string SessionPath(const SessionFlags& f) { return "/v1/sessions/" + f.id; }

int Open(const SessionFlags& f) {
  if (!serve::ValidPolicyName(f.policy)) return Fail("--policy takes a policy name");
  return Print(Call(f, "POST", "/v1/sessions", json{{"policy", f.policy}}.dump()));
}

int Put(const SessionFlags& f) {
  auto data = ReadSmallFile(f.file);
  if (!data.ok()) return Fail(data.status().message());
  return Print(Call(f, "PUT", SessionPath(f) + "/files" + UrlOf(f.path), *data));
}

int Get(const SessionFlags& f) {
  auto data = Call(f, "GET", SessionPath(f) + "/files" + UrlOf(f.path), "");
  if (!data.ok()) return Fail(data.status().message());
  Write(STDOUT_FILENO, *data);
  return 0;
}

// One verb: its positional arguments and what it does.
void AddVerb(CLI::App* parent, const std::shared_ptr<SessionFlags>& f, int* exit_code,
             const char* name, const char* what, int (*action)(const SessionFlags&), bool with_path,
             bool with_file) {
  CLI::App* cmd = parent->add_subcommand(name, what);
  cmd->add_option("--socket", f->socket, "The service's Unix socket");
  cmd->add_option("id", f->id, "The session's id")->required();
  if (with_path) cmd->add_option("path", f->path, "A path inside the session")->required();
  if (with_file) cmd->add_option("file", f->file, "The host file to send")->required();
  cmd->callback([f, exit_code, action] {
    *exit_code = IsValidRunId(f->id) ? action(*f) : Fail("not a session id: " + f->id);
  });
}

}  // namespace

void RegisterSessionCommands(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SessionFlags>();
  CLI::App* session = app.add_subcommand("session", "Agent sessions through the safex service");
  session->require_subcommand(1);
  CLI::App* open = session->add_subcommand("open", "Open a session (prints it as JSON)");
  open->add_option("--policy", f->policy, "A policy that allows sessions")->required();
  open->add_option("--socket", f->socket, "The service's Unix socket");
  open->callback([f, exit_code] { *exit_code = Open(*f); });
  AddVerb(
      session, f, exit_code, "show", "Print a session's state (JSON)",
      [](const SessionFlags& s) { return Print(Call(s, "GET", SessionPath(s), "")); }, false,
      false);
  AddVerb(
      session, f, exit_code, "close", "End a session: its sandbox is destroyed",
      [](const SessionFlags& s) { return Print(Call(s, "DELETE", SessionPath(s), "")); }, false,
      false);
  AddVerb(session, f, exit_code, "put", "Write a host file's bytes to PATH in the session", Put,
          true, true);
  AddVerb(session, f, exit_code, "get", "Write PATH's bytes (validated) to stdout", Get, true,
          false);
}

}  // namespace safex::cli
