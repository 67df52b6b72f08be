#!/usr/bin/env bash
# Runs every fuzz target in BUILD/fuzz for SECONDS each, seeded from tests/fuzz/<area>/corpus/<target>
# when present. Fails if any target finds a crash, leak or timeout.
set -euo pipefail
build=${1:?build dir}
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
status=0
shopt -s nullglob
# The current target's work directory goes also when the script is stopped: scripts/test.sh kills
# this job's process group (SIGTERM) when another stage has failed.
work=""
remove_work() { if [[ -n "$work" ]]; then rm -rf "$work"; work=""; fi; }
trap remove_work EXIT
trap 'exit 143' TERM INT
for bin in "$build"/fuzz/*; do
  [[ -x "$bin" ]] || continue
  name=$(basename "$bin")
  # Not /tmp/safex-*: the leak checker of the integration tests, which may run meanwhile
  # (scripts/test.sh), counts those as the product's own temp dirs.
  work=$(mktemp -d /tmp/sxfuzz.XXXXXX)
  seeds=()
  for d in "$here"/*/corpus/"$name"; do seeds+=("$d"); done
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$work/" "$work" "${seeds[@]}" >"$work/log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -n 40 "$work/log"; status=1
    ls "$work"
  else
    tail -n 1 "$work/log"
  fi
  remove_work
done
exit $status
