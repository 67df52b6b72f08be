#include "audit/json_bytes.h"

#include "audit/text_escape.h"
#include "common/sha256.h"
#include "common/strict_json.h"

namespace safex::audit {
namespace {

using nlohmann::json;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Serialises JSON that holds only valid UTF-8 strings (JsonFromBytes guarantees it), so the
// strict error handler never throws; the catch is the library boundary rule.
std::string Dump(const json& j) {
  try {
    return j.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    return "null";
  }
}

Result<json> Parse(std::string_view text, const char* what) {
  // safex writes these columns without duplicate keys or a BOM; anything else was not written by
  // it, and two readers (this one, SQLite's json_each in the views) could read it differently.
  auto j = ParseStrictJson(text);
  if (!j.ok()) {
    return Status::DataLoss(std::string("stored ") + what +
                            " is not strict JSON: " + j.status().message());
  }
  if (!j->is_array()) {
    return Status::DataLoss(std::string("stored ") + what + " is not a JSON array");
  }
  return j;
}

}  // namespace

json JsonFromBytes(std::string_view bytes) {
  if (IsValidUtf8(bytes)) return json(std::string(bytes));
  return json{{"hex", ToHex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())}};
}

Result<std::string> BytesFromJson(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1 && j.contains("hex") && j["hex"].is_string()) {
    const std::string& hex = j["hex"].get_ref<const std::string&>();
    if (hex.size() % 2 != 0) return Status::DataLoss("odd-length hex string");
    std::string out;
    out.reserve(hex.size() / 2);
    for (size_t i = 0; i < hex.size(); i += 2) {
      int hi = HexValue(hex[i]);
      int lo = HexValue(hex[i + 1]);
      if (hi < 0 || lo < 0) return Status::DataLoss("bad hex digit");
      out += static_cast<char>(hi * 16 + lo);
    }
    return out;
  }
  return Status::DataLoss("expected a string or {\"hex\": ...}");
}

std::string EncodeStringList(const std::vector<std::string>& list) {
  json j = json::array();
  for (const auto& s : list) j.push_back(JsonFromBytes(s));
  return Dump(j);
}

std::string EncodeValidatorResults(const std::vector<ValidatorResult>& list) {
  json j = json::array();
  for (const auto& v : list) {
    j.push_back(json{{"name", JsonFromBytes(v.name)},
                     {"outcome", JsonFromBytes(v.outcome)},
                     {"detail", JsonFromBytes(v.detail)}});
  }
  return Dump(j);
}

std::string EncodeDeniedEgress(const std::vector<DeniedEgress>& list) {
  json j = json::array();
  for (const auto& d : list) {
    j.push_back(json{{"destination", JsonFromBytes(d.destination)}, {"count", d.count}});
  }
  return Dump(j);
}

Result<std::vector<std::string>> DecodeStringList(std::string_view text) {
  SAFEX_ASSIGN_OR_RETURN(json j, Parse(text, "string list"));
  std::vector<std::string> out;
  for (const auto& e : j) {
    SAFEX_ASSIGN_OR_RETURN(std::string s, BytesFromJson(e));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<ValidatorResult>> DecodeValidatorResults(std::string_view text) {
  SAFEX_ASSIGN_OR_RETURN(json j, Parse(text, "validator results"));
  std::vector<ValidatorResult> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("name") || !e.contains("outcome") || !e.contains("detail")) {
      return Status::DataLoss("stored validator result lacks name/outcome/detail");
    }
    ValidatorResult v;
    SAFEX_ASSIGN_OR_RETURN(v.name, BytesFromJson(e["name"]));
    SAFEX_ASSIGN_OR_RETURN(v.outcome, BytesFromJson(e["outcome"]));
    SAFEX_ASSIGN_OR_RETURN(v.detail, BytesFromJson(e["detail"]));
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<DeniedEgress>> DecodeDeniedEgress(std::string_view text) {
  SAFEX_ASSIGN_OR_RETURN(json j, Parse(text, "denied egress"));
  std::vector<DeniedEgress> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("destination") || !e.contains("count") ||
        !e["count"].is_number_unsigned()) {
      return Status::DataLoss("stored denied-egress entry lacks destination/count");
    }
    DeniedEgress d;
    SAFEX_ASSIGN_OR_RETURN(d.destination, BytesFromJson(e["destination"]));
    d.count = e["count"].get<uint64_t>();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace safex::audit
