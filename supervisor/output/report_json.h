// JSON forms of validation results, for `safex run --json` and the audit record. Every string in
// them is escaped (escape.h), so the JSON is valid UTF-8 whatever the program wrote.
#pragma once

#include <nlohmann/json.hpp>

#include "supervisor/output/collect.h"
#include "supervisor/output/output_files.h"
#include "supervisor/output/stream_validator.h"

namespace safex::output {

// {"subject","validator","validator_index" (null for outputs),"check","outcome","detail",
//  "offset"?, "line"?, "json_path"?}
nlohmann::json FindingToJson(const Finding& f);
// {"subject","rejected","total_bytes","captured_bytes","delivered_bytes","truncated",
//  "raw_sha256","delivered_sha256","findings":[...]}; delivered bytes are not included.
nlohmann::json ReportToJson(const ValidationReport& r);
// {"rejected","files":[{"path","size","read_sha256","report"}],"refusals":[{"path","reason",
//  "detail"}],"absent":[...],"fallback_walk":bool}
nlohmann::json OutputFilesToJson(const OutputFiles& files);

}  // namespace safex::output
