// The output files the service keeps for a run (docs/api.md, "Files"): delivered by the runner
// into <state_dir>/private/results/<run id>/ (all or nothing, never through a symlink, as
// `safex run --output` delivers them), listed once when the run ends, and read back for
// GET /v1/runs/ID/files/NAME.
//
// Why serving them is safe: the directory is below the state dir's private directory (root's,
// 0700, checked at start), only this service writes there, and a download opens exactly one of
// the names listed when the run ended, with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from the run's directory, then checks it is a regular
// file of the listed size. A name from a URL is checked before anything is opened: relative,
// '/'-separated, no empty, "." or ".." component, no NUL, valid UTF-8 (ValidResultFileName).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace safex::serve {

struct ResultFile {
  std::string name;  // relative path, '/'-separated
  uint64_t size = 0;
  std::string sha256;  // hex
};

struct ResultFileList {
  std::vector<ResultFile> files;
  uint64_t total_bytes = 0;
  // Files whose names cannot travel in JSON text (not UTF-8, control characters): not listed,
  // not served (the result's `files` report still names them, escaped).
  uint64_t unlisted = 0;
};

// Walks `dir` (no symlinks followed; the runner's delivery makes none) and hashes each file.
Result<ResultFileList> ListResultFiles(const std::string& dir);

bool ValidResultFileName(std::string_view name);

// Decodes a URL path segment's percent-escapes ("%2F" stays "/"); InvalidArgument on a bad
// escape or a NUL.
Result<std::string> PercentDecode(std::string_view text);

// Opens `name` below `dir` for reading as described above; NotFound when it is not there,
// FailedPrecondition when it is not a regular file.
Result<UniqueFd> OpenResultFile(const std::string& dir, const std::string& name);

}  // namespace safex::serve
