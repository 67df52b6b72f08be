// The host's TSC frequency, measured against CLOCK_MONOTONIC_RAW. Under TCG the guest's TSC is
// the host's (QEMU reads the host counter), and the guest is told the frequency (tsc_early_khz)
// because its own PIT calibration fails when the host is loaded, after which the boot hangs.
#pragma once

#include <cstdint>

namespace safex::microvm {

// kHz, measured over about 20 ms; 0 if the counter looks unusable (not monotonic, absurd rate).
uint64_t MeasureHostTscKhz();

}  // namespace safex::microvm
