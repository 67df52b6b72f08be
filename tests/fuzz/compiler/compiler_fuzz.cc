#include <cstdint>
#include <cstdlib>
#include <string>

#include "compiler/compare.h"
#include "compiler/compiler.h"
#include "compiler/explain.h"
#include "compiler/host_config.h"
#include "plan/plan_json.h"
#include "plan/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace safex;
  std::string text(reinterpret_cast<const char*>(data), size);
  compiler::CompileOptions opt;
  opt.search_path = {SAFEX_FUZZ_POLICY_DIR};
  opt.max_extends_depth = 4;
  auto r = compiler::CompileText("fuzz.policy", text, opt);
  (void)compiler::RenderAll(r);
  if (r.ok()) {
    const plan::Plan& p = *r.plan;
    // A compiled plan verifies, round-trips byte for byte, and does not differ from itself.
    if (!plan::Verify(p, opt.ceilings).empty()) __builtin_trap();
    std::string json = plan::ToCanonicalJsonWithDigest(p);
    auto back = plan::PlanFromJson(json);
    if (!back.ok() || plan::ToCanonicalJsonWithDigest(*back) != json) __builtin_trap();
    if (!compiler::ComparePlans(p, *back).empty()) __builtin_trap();
    (void)compiler::Explain(p);
  }
  // The same text as a host config.
  compiler::HostConfig h;
  std::vector<dsl::Diagnostic> diags;
  (void)compiler::ParseHostConfig("fuzz-host.policy", text, &h, &diags);
  return 0;
}
