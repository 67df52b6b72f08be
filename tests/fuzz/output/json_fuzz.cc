// The JSON checker against nlohmann::json::accept (an iterative, strict RFC 8259 parser). They must
// agree, except where we are stricter on purpose: duplicate keys, long numbers, a byte order mark,
// and the depth cap. Anything we accept, nlohmann must accept, except numbers beyond the range of
// a double, which nlohmann refuses ("number overflow") and RFC 8259 lets us accept. (nlohmann's
// lexer also takes a NUL byte for the end of the input, so it accepts '"0"\0junk'; a NUL is never
// valid JSON.)
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "supervisor/output/json_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  safex::output::JsonCheckOptions o;
  o.max_depth = 1u << 20;  // nlohmann has no depth cap
  const safex::output::JsonCheckResult r = safex::output::CheckJson(text, o);
  if (r.ok && r.offset != 0) abort();
  if (!r.ok && r.offset > size) abort();
  const bool theirs = nlohmann::json::accept(text);
  if (r.ok && !theirs) {
    try {
      (void)nlohmann::json::parse(text);
      abort();  // accept() and parse() disagree
    } catch (const nlohmann::json::exception& e) {
      if (std::string_view(e.what()).find("number overflow") == std::string_view::npos) abort();
    }
  }
  if (!r.ok && theirs) {
    const bool documented = r.message.find("duplicate key") != std::string::npos ||
                            r.message.find("characters, more than") != std::string::npos ||
                            r.message.find("byte order mark") != std::string::npos ||
                            text.find('\0') != std::string_view::npos;
    if (!documented) abort();
  }
  // A second run with a small cap must terminate and, when it accepts, agree.
  o.max_depth = 4;
  o.required = {{"a", "number"}};
  const safex::output::JsonCheckResult small = safex::output::CheckJson(text, o);
  if (small.ok && !r.ok) abort();
  return 0;
}
