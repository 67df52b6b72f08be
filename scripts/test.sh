#!/usr/bin/env bash
# Fresh machine -> every test: installs everything, builds, runs the unit and integration tests,
# each fuzz target for a bounded time, the containment suite, and the unit tests again under
# ASan+UBSan.
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

# One clang build serves both: every library and unit test under ASan+UBSan (also instrumented for
# libFuzzer's coverage, harmless outside a fuzz target), and the libFuzzer targets on the same
# objects. It needs nothing of the machine's state, so it is built, and the fuzz targets run, in
# the background at the lowest priority while the integration tests run: those are serialized by
# the machine-wide leak checker (one core is mostly idle meanwhile), and a nice-19 compile takes
# almost nothing from them on a core they want. Its output is shown at the end (or on failure).
san_log=$(mktemp /tmp/sxtest-san.XXXXXX)
trap 'rm -f "$san_log"' EXIT  # on every way out, failures included (their tail is shown first)
# Its own session (setsid), so that a failure of the tests can stop it with everything it started.
setsid bash -c '
  set -e
  CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DSAFEX_SANITIZE=ON \
    -DSAFEX_FUZZ=ON -DSAFEX_TESTS=ON -DSAFEX_BENCH=OFF >/dev/null
  nice -n 19 cmake --build build-san -j"$1"
  nice -n 19 cmake --build build-san -j"$1" --target safex_fuzz_all
  echo "== fuzz targets"
  nice -n 19 bash tests/fuzz/run_all.sh build-san "$2"
' san "$jobs" "${SAFEX_FUZZ_SECONDS:-20}" >"$san_log" 2>&1 &
san=$!
stop_san() { kill -- -"$san" 2>/dev/null || true; wait "$san" 2>/dev/null || true; }

# A failed ctest run ends with why each test failed (scripts/test-failures.sh), so the reason is
# in the tail of the output even when the middle is cut.
run_ctest() {
  if ! (cd build && ctest --output-on-failure -j"$jobs" --timeout 900 "$@"); then
    bash scripts/test-failures.sh build
    return 1
  fi
}

stage "running all tests but the containment suite (the sanitizer build and the fuzz targets in the background)"
if ! run_ctest -LE containment; then
  stop_san
  exit 1
fi

stage "waiting for the sanitizer build and the fuzz targets"
if ! wait "$san"; then
  tail -n 200 "$san_log"
  echo "== the sanitizer build or a fuzz target FAILED"
  exit 1
fi
grep -E '^(fuzz: |Done |== )' "$san_log" || true

# The containment suite runs alone: among its host checks are the free space and free inodes of
# the host's filesystems and time bounds on its runs, which the sanitizer build (writing its
# objects into build-san on the same disk, on the otherwise idle core) would move.
stage "running the containment suite"
run_ctest -L containment

stage "running unit tests under ASan+UBSan"
(cd build-san && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs" -L unit)
stage "all tests passed"
