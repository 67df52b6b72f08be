// The body of POST /v1/runs, as JSON (docs/operating.md, "API"):
//
//   {"policy": "python-untrusted",              required: [a-z0-9-]{1,128}
//    "argv": ["python3", "main.py"],            required: 1..max_argv strings, no NUL
//    "stdin": "<base64>",                       optional: bytes fed to standard input
//    "files": [{"name": "main.py", "data": "<base64>"}],   optional: the run's input directory
//    "wait": false,                              optional (default true): answer at once (202)
//    "wall_time_ms": 2000,                       optional: a shorter wall time (1..86400000)
//    "env": {"SEED": "7"},                       optional: variables the policy lets callers set
//    "cwd": "/data/in"}                          optional: a working directory the policy allows
//
// Strict: unknown fields, wrong types, duplicate keys (at any depth), a leading byte order mark,
// duplicate file names, names with '/' or starting with '.', non-canonical base64, invalid UTF-8
// and nesting deeper than the schema are refused, so a client learns about a typo instead of
// having a field silently ignored. Pure code; fuzzed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace safex::serve {

struct RequestLimits {
  uint32_t max_argv = 256;
  uint64_t max_argv_bytes = 64ull << 10;  // all argv strings together
  uint64_t max_stdin_bytes = 1ull << 20;  // decoded
  uint32_t max_input_files = 64;
  uint64_t max_input_bytes = 4ull << 20;  // decoded, all files together
};

struct InputFile {
  std::string name;  // [A-Za-z0-9._-]{1,255}, not starting with '.'
  std::string data;
};

struct SubmitRequest {
  std::string policy;
  std::vector<std::string> argv;
  std::optional<std::string> stdin_data;
  std::vector<InputFile> files;
  bool wait = true;  // false: answered 202 at admission; the run goes on without the client
  uint64_t wall_time_ms = 0;  // 0: the policy's
  std::map<std::string, std::string> env;  // at most 64, each value at most 32KiB
  std::string cwd;                         // "" : the policy's
};

// InvalidArgument (-> 400) for malformed or invalid requests, ResourceExhausted (-> 413) for a
// limit exceeded. Never throws. `session_exec`: the body of POST /v1/sessions/ID/exec, which
// names no policy (the session's) and takes no files (they are written into the session).
Result<SubmitRequest> ParseSubmitRequest(std::string_view body, const RequestLimits& limits,
                                         bool session_exec = false);

// The JSON body for a request (the client's side). InvalidArgument when an argv string or the
// policy name is not valid UTF-8 (JSON cannot carry it).
Result<std::string> EncodeSubmitRequest(const SubmitRequest& request);

bool ValidPolicyName(std::string_view name);
bool ValidInputFileName(std::string_view name);
// Nesting depth of a JSON text (brackets outside strings); SIZE_MAX when it exceeds `cap`.
size_t JsonNestingDepth(std::string_view text, size_t cap);

}  // namespace safex::serve
