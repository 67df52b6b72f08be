#!/usr/bin/env bash
# After a failed ctest run: the failure messages of each failed test, taken from ctest's own log,
# printed last. CI keeps only the head and the tail of a long run's output, and a failing test's
# --output-on-failure text lands in the middle (the containment suite prints hundreds of lines
# of cells before its failures), so without this the reason of a failure can be cut away.
# Usage: scripts/test-failures.sh BUILD_DIR
set -uo pipefail
log="$1/Testing/Temporary/LastTest.log"
failed="$1/Testing/Temporary/LastTestsFailed.log"
[ -r "$failed" ] && [ -r "$log" ] || exit 0
echo "== why each failed test failed (from $log)"
while IFS=: read -r _ name; do
  echo "-- $name"
  # The test's section runs from its "Testing: NAME" line to its end-time line. In it, print
  # gtest's failure messages (from each "file:line: Failure" up to the next line gtest or the
  # suite prints for a passing step), Python's tracebacks, and anything that names a failure.
  awk -v name="$name" '
    index($0, "Testing: ") && substr($0, index($0, "Testing: ") + 9) == name { inside = 1; next }
    inside && index($0, "\"" name "\" end time") == 1 { inside = 0 }
    !inside { next }
    /: Failure$/ || /^(FAIL|ERROR):/ || /^Traceback/ { showing = 1 }
    /^\[ [A-Z][0-9]+ \/ / || /^\[       OK \]/ || /^ok$/ { showing = 0 }
    showing || /FAILED|host: |not contained/ { print }
  ' "$log" | head -n 120
done <"$failed"
