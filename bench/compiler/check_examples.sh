#!/usr/bin/env bash
# End-to-end cost of `safex check` per example policy (process start, host config, compile),
# the mean over N runs. Usage: bench/compiler/check_examples.sh BUILD_DIR [N]
set -euo pipefail
build=${1:?build dir}
n=${2:-50}
cd "$(dirname "$0")/../.."
for f in policies/examples/*.policy; do
  start=$(date +%s%N)
  for ((i = 0; i < n; i++)); do
    "$build/safex" check --host-config policies/host.policy "$f" >/dev/null
  done
  end=$(date +%s%N)
  printf '%-45s %6.2f ms per check\n' "$f" "$(echo "($end - $start) / $n / 1000000" | bc -l)"
done
