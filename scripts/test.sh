#!/usr/bin/env bash
# Fresh machine -> every test: installs everything, builds, runs the unit, integration and
# containment suites, the unit tests again under ASan+UBSan, and each fuzz target for a bounded time.
# Run as root (integration tests use runsc, cgroups and namespaces). .ci/run calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
start=$(date +%s)
stage() { echo "== $* ($(( $(date +%s) - start ))s)"; }

stage "installing dependencies"
bash scripts/install-deps.sh

stage "building (release)"
bash scripts/build.sh

stage "running all tests"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

# One clang build serves both: every library and unit test under ASan+UBSan (also instrumented for
# libFuzzer's coverage, harmless outside a fuzz target), and the libFuzzer targets on the same
# objects. One sanitizer build instead of two keeps CI well under its time budget.
stage "building unit tests and fuzz targets under ASan+UBSan (clang)"
CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DSAFEX_SANITIZE=ON \
  -DSAFEX_FUZZ=ON -DSAFEX_TESTS=ON -DSAFEX_BENCH=OFF >/dev/null
cmake --build build-san -j"$jobs"
cmake --build build-san -j"$jobs" --target safex_fuzz_all
stage "running unit tests under ASan+UBSan"
(cd build-san && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs" -L unit)
stage "running fuzz targets"
bash tests/fuzz/run_all.sh build-san "${SAFEX_FUZZ_SECONDS:-20}"
stage "all tests passed"
