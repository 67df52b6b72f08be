// JSON for byte strings that may not be UTF-8 (argv, validator details, hostile program output
// quoted in a reason). A valid UTF-8 string is a JSON string; anything else is {"hex": "<bytes>"}.
// The mapping is injective (a string never becomes an object) and reversible (BytesFromJson).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "audit/records.h"
#include "common/status.h"

namespace safex::audit {

nlohmann::json JsonFromBytes(std::string_view bytes);
Result<std::string> BytesFromJson(const nlohmann::json& j);

// The JSON text stored in the list columns. Deterministic: equal input, equal text.
std::string EncodeStringList(const std::vector<std::string>& list);
std::string EncodeValidatorResults(const std::vector<ValidatorResult>& list);
std::string EncodeDeniedEgress(const std::vector<DeniedEgress>& list);

// The reverse; DataLoss when the stored text is not what safex writes (e.g. edited by hand).
Result<std::vector<std::string>> DecodeStringList(std::string_view text);
Result<std::vector<ValidatorResult>> DecodeValidatorResults(std::string_view text);
Result<std::vector<DeniedEgress>> DecodeDeniedEgress(std::string_view text);

}  // namespace safex::audit
