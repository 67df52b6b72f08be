// Help texts for malformed quantities. Internal to dsl/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace safex::dsl {

// "did you mean `MiB`?" for a mistyped unit (MB, mb, M, Mi, KB, GB, sec, mins, hrs, ...), a hint
// for units the language does not have (days), or a list of the known units.
std::string UnitHelp(std::string_view unknown_unit);

// The unit a common misspelling means ("MB" -> "MiB", "sec" -> "s", "MS" -> "ms"), or "".
std::string_view MeantUnit(std::string_view written);

// For a fractional quantity such as 1.5GiB (integer part, fraction digits, unit): the same amount
// in a smaller unit when it is a whole number there ("write `1536MiB`"), else generic help.
std::string FractionHelp(std::string_view integer_digits, std::string_view fraction_digits,
                         std::string_view unit);

}  // namespace safex::dsl
