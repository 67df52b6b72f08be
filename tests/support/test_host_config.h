// The backends section of every host config the tests write. Test hosts here have no usable KVM,
// and TCG is not a security boundary: a microVM plan for untrusted code is refused without KVM
// unless the host config opts in, as test hosts do (and the example host config does not).
// Native is offered as on a host that runs trusted in-house tools (only trusted plans use it).
#pragma once

namespace safex::testing {

inline constexpr const char* kTestBackends =
    "  backends {\n"
    "    gvisor { }\n"
    "    microvm { tcg_for_untrusted = true }\n"
    "    native { }\n"
    "  }\n";

}  // namespace safex::testing
