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

stage "building unit tests under ASan+UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSAFEX_SANITIZE=ON -DSAFEX_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
stage "running unit tests under ASan+UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs" -L unit)

if [[ -f tests/fuzz/CMakeLists.txt ]]; then
  stage "building fuzz targets (clang, libFuzzer)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DSAFEX_FUZZ=ON \
    -DSAFEX_TESTS=ON -DSAFEX_BENCH=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs" --target safex_fuzz_all
  stage "running fuzz targets"
  bash tests/fuzz/run_all.sh build-fuzz "${SAFEX_FUZZ_SECONDS:-20}"
fi
stage "all tests passed"
