#!/usr/bin/env bash
# Every benchmark, on demand (never part of the tests): builds the release tree and runs each
# bench/ program, printing its figures. Run as root (most of them make real sandboxes, namespaces
# or VMs). Each benchmark reports its own anchor measured in the same run (raw `runsc run`, a bare
# QEMU boot, ...), so the ratios are the figures to compare across machines; absolute times depend
# on the machine and its load. docs/benchmarks.md records the last figures and what they mean.
#
#   sudo bash scripts/bench.sh            # all
#   sudo bash scripts/bench.sh run audit  # only the named areas (directories of bench/)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${SAFEX_BENCH_RUNS:-20}

bash scripts/build.sh >/dev/null

# area -> command line (relative to the repository root).
declare -A cmd=(
  [dsl]="build/bench/dsl/dsl_bench --benchmark_min_time=1"
  [compiler]="build/bench/compiler/compiler_bench --benchmark_min_time=1"
  [audit]="build/bench/audit/audit_bench --benchmark_min_time=2"
  [output]="build/bench/output/output_bench --benchmark_min_time=2"
  [gvisor]="build/bench/gvisor/gvisor_bench $RUNS"
  [gvisor_idle]="bench/gvisor/exec_after_idle.py 12 5"
  [gvisor_platforms]="bench/gvisor/platforms.py 10"
  [run]="build/bench/run/run_bench $RUNS"
  [net]="build/bench/net/net_bench 200"
  [net_gvisor]="build/bench/net/net_gvisor_bench $RUNS"
  [microvm]="build/bench/microvm/microvm_bench $RUNS"
  [native]="build/bench/native/native_bench $RUNS"
  [serve]="build/bench/serve/serve_bench $RUNS"
  [api]="build/bench/serve/api_bench 10"
  [pool]="build/bench/serve/pool_bench $RUNS"
  [pool_handover]="build/bench/gvisor/pool_handover_bench 10"
  [microvm_pool]="build/bench/microvm/microvm_pool_bench $RUNS"
  [session]="build/bench/serve/session_bench $RUNS"
  [fleet]="build/bench/fleet/fleet_bench"
  [oci]="bench/oci/oci_bench.py 10"
)
order=(dsl compiler audit output gvisor gvisor_idle gvisor_platforms run net net_gvisor microvm native serve api pool
  pool_handover microvm_pool session fleet oci)
if (($#)); then order=("$@"); fi

status=0
for area in "${order[@]}"; do
  line=${cmd[$area]:-}
  if [[ -z "$line" ]]; then echo "bench: unknown area '$area'" >&2; exit 2; fi
  read -r -a argv <<<"$line"
  if [[ ! -x "${argv[0]}" ]]; then echo "== $area: ${argv[0]} not built, skipped"; continue; fi
  echo "== $area: $line"
  "${argv[@]}" || { echo "== $area FAILED"; status=1; }
done
exit $status
