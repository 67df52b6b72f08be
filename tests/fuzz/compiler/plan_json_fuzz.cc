#include <cstdint>
#include <string>

#include "plan/ceilings.h"
#include "plan/plan_json.h"
#include "plan/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace safex::plan;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = PlanFromJson(text);
  if (!p.ok()) return 0;
  (void)Verify(*p, DefaultCeilings());
  // What the reader accepts, the writer reproduces and the reader accepts again, identically.
  std::string json = ToCanonicalJsonWithDigest(*p);
  auto again = PlanFromJson(json);
  if (!again.ok() || ToCanonicalJsonWithDigest(*again) != json) __builtin_trap();
  return 0;
}
