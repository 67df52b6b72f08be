// Standard base64 (RFC 4648, with padding): how request bodies carry stdin and input files, and
// responses carry output that is not valid UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace safex::serve {

std::string Base64Encode(std::string_view bytes);
// Strict: the standard alphabet, padding to a multiple of 4, no whitespace, zero pad bits.
// nullopt on anything else.
std::optional<std::string> Base64Decode(std::string_view text);
// The decoded size of a well-formed text of this length (an upper bound before padding).
inline size_t Base64DecodedBound(size_t text_size) { return text_size / 4 * 3; }

}  // namespace safex::serve
