// libFuzzer target for the canonical event encoding (audit/canonical.h). Checks, for any input:
//  1. DecodeEvent never crashes; when it accepts bytes, EncodeEvent of the result gives back the
//     same bytes (each valid encoding has exactly one row);
//  2. two rows built from the input round-trip through Encode/Decode, and when they differ their
//     encodings differ (no two different events encode the same).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "audit/canonical.h"
#include "audit/event_row.h"

namespace {

safex::audit::EventRow RowFrom(FuzzedDataProvider& in) {
  safex::audit::EventRow row;
  for (auto& v : row.values) {
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        v = std::monostate{};
        break;
      case 1:
        v = in.ConsumeIntegral<int64_t>();
        break;
      default:
        v = in.ConsumeRandomLengthString(64);
        break;
    }
  }
  return row;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto decoded = safex::audit::DecodeEvent(bytes);
  if (decoded.ok() && safex::audit::EncodeEvent(*decoded) != bytes) abort();

  FuzzedDataProvider in(data, size);
  safex::audit::EventRow a = RowFrom(in);
  safex::audit::EventRow b = RowFrom(in);
  std::string ea = safex::audit::EncodeEvent(a);
  std::string eb = safex::audit::EncodeEvent(b);
  auto ra = safex::audit::DecodeEvent(ea);
  if (!ra.ok() || !(*ra == a)) abort();
  if (!(a == b) && ea == eb) abort();
  if (a == b && ea != eb) abort();
  return 0;
}
