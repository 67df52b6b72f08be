#include "supervisor/serve/submit_request.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

#include "common/strict_json.h"
#include "supervisor/serve/base64.h"

namespace safex::serve {
namespace {

using nlohmann::json;

// {"files":[{...}]} is three levels deep.
constexpr size_t kMaxDepth = 3;

}  // namespace

bool ValidPolicyName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool ValidInputFileName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

size_t JsonNestingDepth(std::string_view text, size_t cap) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > cap) return SIZE_MAX;
      max_depth = std::max(max_depth, depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

namespace {

Status ReadPolicy(const json& v, SubmitRequest* req) {
  if (!v.is_string()) return Status::InvalidArgument("\"policy\" must be a string");
  req->policy = v.get<std::string>();
  if (!ValidPolicyName(req->policy)) {
    return Status::InvalidArgument("\"policy\" must be a policy name ([a-z0-9-], 1-128)");
  }
  return Status::Ok();
}

// Counted and summed while read: the caps hold before the copy is made.
Status ReadArgv(const json& v, const RequestLimits& limits, SubmitRequest* req) {
  if (!v.is_array()) return Status::InvalidArgument("\"argv\" must be an array of strings");
  if (v.empty()) return Status::InvalidArgument("\"argv\" is empty: nothing to run");
  if (v.size() > limits.max_argv) {
    return Status::ResourceExhausted("\"argv\" has " + std::to_string(v.size()) +
                                     " entries; the limit is " + std::to_string(limits.max_argv));
  }
  uint64_t total = 0;
  for (const json& a : v) {
    if (!a.is_string()) return Status::InvalidArgument("\"argv\" must hold only strings");
    const std::string& s = a.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) {
      return Status::InvalidArgument("an argv string holds a NUL byte");
    }
    total += s.size() + 1;
    if (total > limits.max_argv_bytes) {
      return Status::ResourceExhausted("\"argv\" is larger than " +
                                       std::to_string(limits.max_argv_bytes) + " bytes");
    }
    req->argv.push_back(s);
  }
  if (req->argv[0].empty()) return Status::InvalidArgument("argv[0] is empty");
  return Status::Ok();
}

// The decoded size is bounded from the text's length before anything is decoded.
Status ReadStdin(const json& v, const RequestLimits& limits, SubmitRequest* req) {
  if (!v.is_string()) return Status::InvalidArgument("\"stdin\" must be a base64 string");
  const std::string& text = v.get_ref<const std::string&>();
  const auto too_large = [&] {
    return Status::ResourceExhausted("\"stdin\" is larger than " +
                                     std::to_string(limits.max_stdin_bytes) + " bytes");
  };
  if (Base64DecodedBound(text.size()) > limits.max_stdin_bytes + 2) return too_large();
  auto data = Base64Decode(text);
  if (!data) return Status::InvalidArgument("\"stdin\" is not canonical base64");
  if (data->size() > limits.max_stdin_bytes) return too_large();
  req->stdin_data = std::move(*data);
  return Status::Ok();
}

// One `{"name": ..., "data": ...}` entry; `total` is the decoded size of the files so far.
Status ReadInputFile(const json& f, const RequestLimits& limits, std::set<std::string>* names,
                     uint64_t* total, SubmitRequest* req) {
  if (!f.is_object()) return Status::InvalidArgument("each file must be an object");
  const json* name = nullptr;
  const json* data = nullptr;
  for (auto fit = f.begin(); fit != f.end(); ++fit) {
    if (fit.key() == "name") {
      name = &fit.value();
    } else if (fit.key() == "data") {
      data = &fit.value();
    } else {
      return Status::InvalidArgument("unknown field \"" + fit.key() +
                                     "\" in a file (expected name, data)");
    }
  }
  if (name == nullptr || !name->is_string() || data == nullptr || !data->is_string()) {
    return Status::InvalidArgument("each file needs a string \"name\" and \"data\"");
  }
  const std::string& n = name->get_ref<const std::string&>();
  if (!ValidInputFileName(n)) {
    return Status::InvalidArgument(
        "file name must be 1-255 of [A-Za-z0-9._-], not starting with '.' (no paths)");
  }
  if (!names->insert(n).second) return Status::InvalidArgument("file \"" + n + "\" is given twice");
  const auto too_large = [&] {
    return Status::ResourceExhausted("input files are larger than " +
                                     std::to_string(limits.max_input_bytes) + " bytes");
  };
  const std::string& text = data->get_ref<const std::string&>();
  if (*total + Base64DecodedBound(text.size()) > limits.max_input_bytes + 2) return too_large();
  auto bytes = Base64Decode(text);
  if (!bytes) return Status::InvalidArgument("data of file \"" + n + "\" is not canonical base64");
  *total += bytes->size();
  if (*total > limits.max_input_bytes) return too_large();
  req->files.push_back({n, std::move(*bytes)});
  return Status::Ok();
}

Status ReadFiles(const json& v, const RequestLimits& limits, SubmitRequest* req) {
  if (!v.is_array()) return Status::InvalidArgument("\"files\" must be an array");
  if (v.size() > limits.max_input_files) {
    return Status::ResourceExhausted("\"files\" has " + std::to_string(v.size()) +
                                     " entries; the limit is " +
                                     std::to_string(limits.max_input_files));
  }
  std::set<std::string> names;
  uint64_t total = 0;
  for (const json& f : v) SAFEX_RETURN_IF_ERROR(ReadInputFile(f, limits, &names, &total, req));
  return Status::Ok();
}

}  // namespace

Result<SubmitRequest> ParseSubmitRequest(std::string_view body, const RequestLimits& limits,
                                         bool session_exec) {
  // The depth check first: a deeply nested document is refused before any tree is built.
  if (JsonNestingDepth(body, kMaxDepth) == SIZE_MAX) {
    return Status::InvalidArgument("request body nests deeper than the request schema");
  }
  // Also refuses invalid UTF-8, bytes outside the grammar, duplicate keys (which one would a
  // second reader of the body take?) and a leading byte order mark.
  StrictJsonOptions strict;
  strict.max_depth = kMaxDepth;
  auto parsed = ParseStrictJson(body, strict);
  if (!parsed.ok()) {
    return Status::InvalidArgument("request body is not strict JSON (UTF-8) text: " +
                                   parsed.status().message());
  }
  const json& j = *parsed;
  if (!j.is_object()) return Status::InvalidArgument("request body must be a JSON object");

  SubmitRequest req;
  bool have_policy = false, have_argv = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (session_exec && (key == "policy" || key == "files")) {
      return Status::InvalidArgument("\"" + key +
                                     "\" is not part of a session's command (the session has "
                                     "its policy; write files into the session)");
    }
    if (key == "policy") {
      SAFEX_RETURN_IF_ERROR(ReadPolicy(v, &req));
      have_policy = true;
    } else if (key == "argv") {
      SAFEX_RETURN_IF_ERROR(ReadArgv(v, limits, &req));
      have_argv = true;
    } else if (key == "stdin") {
      SAFEX_RETURN_IF_ERROR(ReadStdin(v, limits, &req));
    } else if (key == "files") {
      SAFEX_RETURN_IF_ERROR(ReadFiles(v, limits, &req));
    } else if (key == "wait") {
      if (!v.is_boolean()) return Status::InvalidArgument("\"wait\" must be true or false");
      req.wait = v.get<bool>();
    } else if (key == "wall_time_ms") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > 86400000) {
        return Status::InvalidArgument("\"wall_time_ms\" must be an integer 1..86400000");
      }
      req.wall_time_ms = v.get<uint64_t>();
    } else if (key == "env") {
      // Names and values are checked against the policy when the run starts (what it lets
      // callers set); here only their shape and size.
      if (!v.is_object() || v.size() > 64) {
        return Status::InvalidArgument("\"env\" must be an object of at most 64 strings");
      }
      for (auto e = v.begin(); e != v.end(); ++e) {
        if (!e.value().is_string() || e.key().empty() || e.key().size() > 256 ||
            e.value().get_ref<const std::string&>().size() > (32u << 10)) {
          return Status::InvalidArgument(
              "\"env\" maps names (1-256 bytes) to strings of at most 32KiB");
        }
        req.env[e.key()] = e.value().get<std::string>();
      }
    } else if (key == "cwd") {
      if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
          v.get_ref<const std::string&>().size() > 4096) {
        return Status::InvalidArgument("\"cwd\" must be a path (1-4096 bytes)");
      }
      req.cwd = v.get<std::string>();
    } else {
      return Status::InvalidArgument(
          "unknown field \"" + key +
          "\" (expected policy, argv, stdin, files, wait, wall_time_ms, env, cwd)");
    }
  }
  if (!have_policy && !session_exec) return Status::InvalidArgument("\"policy\" is required");
  if (!have_argv) return Status::InvalidArgument("\"argv\" is required");
  return req;
}

Result<std::string> EncodeSubmitRequest(const SubmitRequest& request) {
  json j;
  j["policy"] = request.policy;
  j["argv"] = request.argv;
  if (request.stdin_data) j["stdin"] = Base64Encode(*request.stdin_data);
  if (!request.files.empty()) {
    json files = json::array();
    for (const InputFile& f : request.files) {
      files.push_back({{"name", f.name}, {"data", Base64Encode(f.data)}});
    }
    j["files"] = std::move(files);
  }
  if (!request.wait) j["wait"] = false;
  if (request.wall_time_ms != 0) j["wall_time_ms"] = request.wall_time_ms;
  if (!request.env.empty()) j["env"] = request.env;
  if (!request.cwd.empty()) j["cwd"] = request.cwd;
  // argv strings are whatever the caller typed; invalid UTF-8 cannot travel in JSON text.
  try {
    return j.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    return Status::InvalidArgument("argv is not valid UTF-8; the service accepts UTF-8 text only");
  }
}

}  // namespace safex::serve
