// The units of the grammar, their scales, and help for mistyped units.
#include <cctype>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/diagnostics.h"
#include "dsl/parser.h"
#include "dsl/unit_help.h"

namespace safex::dsl {
namespace {

constexpr uint64_t kKi = 1024;
constexpr uint64_t kMicro = 1000;
constexpr uint64_t kMilli = 1000 * 1000;
constexpr uint64_t kSecond = 1000 * 1000 * 1000;

struct Alias {
  std::string_view written;  // lower case
  std::string_view meant;
};

// Spellings people reach for, matched after lower-casing (except the exact names of real units,
// which are checked case-sensitively first: `m` is minutes, so `M` and `mb` mean MiB).
// clang-format off
constexpr Alias kAliases[] = {
    {"b", "B"},           {"byte", "B"},         {"bytes", "B"},
    {"k", "KiB"},         {"kb", "KiB"},         {"ki", "KiB"},         {"kib", "KiB"},
    {"kilobyte", "KiB"},  {"kilobytes", "KiB"},  {"kibibyte", "KiB"},   {"kibibytes", "KiB"},
    {"mb", "MiB"},        {"mi", "MiB"},         {"mib", "MiB"},        {"megabyte", "MiB"},
    {"megabytes", "MiB"}, {"mebibyte", "MiB"},   {"mebibytes", "MiB"},
    {"g", "GiB"},         {"gb", "GiB"},         {"gi", "GiB"},         {"gib", "GiB"},
    {"gigabyte", "GiB"},  {"gigabytes", "GiB"},  {"gibibyte", "GiB"},   {"gibibytes", "GiB"},
    {"t", "TiB"},         {"tb", "TiB"},         {"ti", "TiB"},         {"tib", "TiB"},
    {"terabyte", "TiB"},  {"terabytes", "TiB"},
    {"nsec", "ns"},       {"nsecs", "ns"},       {"nanos", "ns"},       {"nanosecond", "ns"},
    {"nanoseconds", "ns"},
    {"µs", "us"},         {"usec", "us"},        {"usecs", "us"},       {"micros", "us"},
    {"microsecond", "us"}, {"microseconds", "us"},
    {"msec", "ms"},       {"msecs", "ms"},       {"millis", "ms"},      {"millisecond", "ms"},
    {"milliseconds", "ms"},
    {"sec", "s"},         {"secs", "s"},         {"second", "s"},       {"seconds", "s"},
    {"min", "m"},         {"mins", "m"},         {"minute", "m"},       {"minutes", "m"},
    {"hr", "h"},          {"hrs", "h"},          {"hour", "h"},         {"hours", "h"},
};
// clang-format on

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<UnitInfo>& Units() {
  static const std::vector<UnitInfo> kUnits = {
      {"B", UnitKind::kSize, 1},
      {"KiB", UnitKind::kSize, kKi},
      {"MiB", UnitKind::kSize, kKi * kKi},
      {"GiB", UnitKind::kSize, kKi * kKi * kKi},
      {"TiB", UnitKind::kSize, kKi * kKi * kKi * kKi},
      {"ns", UnitKind::kDuration, 1},
      {"us", UnitKind::kDuration, kMicro},
      {"ms", UnitKind::kDuration, kMilli},
      {"s", UnitKind::kDuration, kSecond},
      {"m", UnitKind::kDuration, 60 * kSecond},
      {"h", UnitKind::kDuration, 3600 * kSecond},
  };
  return kUnits;
}

const UnitInfo* FindUnit(std::string_view name) {
  for (const UnitInfo& u : Units()) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

bool ToBaseUnits(const Value& v, uint64_t* out) {
  if (v.kind != ValueKind::kQuantity) return false;
  const UnitInfo* u = FindUnit(v.unit);
  if (u == nullptr) return false;
  if (v.number > std::numeric_limits<uint64_t>::max() / u->scale) return false;
  *out = v.number * u->scale;
  return true;
}

std::string_view MeantUnit(std::string_view written) {
  if (written == "M") return "MiB";  // `m` (minutes) is the only case-sensitive clash
  const std::string lower = Lower(written);
  for (const Alias& a : kAliases) {
    if (a.written == lower) return a.meant;
  }
  if (FindUnit(lower) != nullptr) return FindUnit(lower)->name;  // "MS", "H"
  return "";
}

std::string UnitHelp(std::string_view unknown) {
  const std::string lower = Lower(unknown);
  if (lower == "d" || lower == "day" || lower == "days") {
    return "the largest duration unit is `h`: write days as hours, e.g. `24h`";
  }
  if (lower == "w" || lower == "week" || lower == "weeks") {
    return "the largest duration unit is `h`: write weeks as hours, e.g. `168h`";
  }
  const std::string_view meant = MeantUnit(unknown);
  if (meant.empty()) {
    std::vector<std::string_view> names;
    for (const UnitInfo& u : Units()) names.push_back(u.name);
    const std::string close = ClosestMatch(unknown, names);
    if (!close.empty()) return "did you mean `" + close + "`?";
    return "units are B, KiB, MiB, GiB, TiB (sizes) and ns, us, ms, s, m, h (durations)";
  }
  return "did you mean `" + std::string(meant) + "`?";
}

std::string FractionHelp(std::string_view integer_digits, std::string_view fraction_digits,
                         std::string_view unit) {
  const UnitInfo* u = FindUnit(unit);
  if (u == nullptr || fraction_digits.size() > 18 || integer_digits.size() > 18) {
    return "numbers are whole: use a smaller unit instead of a fraction";
  }
  // value = (integer * 10^k + fraction) / 10^k; look for the largest smaller unit in which the
  // value is whole. 128-bit arithmetic cannot overflow with at most 18+18 digits and scales
  // below 2^42.
  unsigned __int128 pow10 = 1;
  for (size_t i = 0; i < fraction_digits.size(); ++i) pow10 *= 10;
  unsigned __int128 numerator = 0;
  for (char c : integer_digits) numerator = numerator * 10 + static_cast<unsigned>(c - '0');
  for (char c : fraction_digits) numerator = numerator * 10 + static_cast<unsigned>(c - '0');
  const std::vector<UnitInfo>& units = Units();
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    if (it->kind != u->kind || it->scale >= u->scale) continue;
    const uint64_t ratio = u->scale / it->scale;
    const unsigned __int128 scaled = numerator * ratio;
    if (scaled % pow10 != 0) continue;
    const unsigned __int128 whole = scaled / pow10;
    if (whole > std::numeric_limits<uint64_t>::max()) break;
    return "numbers are whole: write `" + std::to_string(static_cast<uint64_t>(whole)) +
           std::string(it->name) + "`";
  }
  return "numbers are whole: use a smaller unit instead of a fraction";
}

}  // namespace safex::dsl
