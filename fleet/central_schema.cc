#include "fleet/central_schema.h"

#include <array>

namespace safex::fleet::internal {
namespace {

using audit::EventColumn;

// The node's INTEGER columns (audit/schema.cc); every other column is TEXT.
constexpr std::array kIntegerColumns = {
    audit::kColSeq,         audit::kColTimeNs,
    audit::kColUid,         audit::kColGid,
    audit::kColPid,         audit::kColExitCode,
    audit::kColSignal,      audit::kColWallNs,
    audit::kColCpuNs,       audit::kColPeakMemoryBytes,
    audit::kColStdoutBytes, audit::kColStdoutTruncated,
    audit::kColStderrBytes, audit::kColStderrTruncated,
};

// Valid UTF-8 (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) and no NUL: each
// byte that does not belong to such a sequence becomes U+FFFD.
std::string PostgresText(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto b = static_cast<unsigned char>(in[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool good = len > 0 && b != 0 && i + len <= in.size() && b != 0xc0 && b != 0xc1 && b <= 0xf4;
    for (size_t k = 1; good && k < len; ++k) {
      good = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
    }
    if (good && len > 2) {
      const auto b1 = static_cast<unsigned char>(in[i + 1]);
      good = !(b == 0xe0 && b1 < 0xa0) && !(b == 0xed && b1 >= 0xa0) && !(b == 0xf0 && b1 < 0x90) &&
             !(b == 0xf4 && b1 >= 0x90);
    }
    if (good) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out.append("\xef\xbf\xbd");
      ++i;
    }
  }
  return out;
}

}  // namespace

bool IsIntegerColumn(EventColumn c) {
  for (EventColumn k : kIntegerColumns) {
    if (k == c) return true;
  }
  return false;
}

audit::SqlValue ProjectValue(EventColumn c, const audit::SqlValue& v) {
  if (IsIntegerColumn(c)) {
    if (const auto* n = std::get_if<int64_t>(&v)) return *n;
    return std::monostate();
  }
  if (const auto* s = std::get_if<std::string>(&v)) return PostgresText(*s);
  return std::monostate();
}

std::string ProjectedColumnList() {
  std::string cols;
  const auto names = audit::EventColumnNames();
  for (size_t i = audit::kColKind; i < names.size(); ++i) {
    if (!cols.empty()) cols += ", ";
    cols += std::string(names[i]);
  }
  return cols;
}

}  // namespace safex::fleet::internal
