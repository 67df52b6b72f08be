#!/usr/bin/env bash
# Fails when a library includes a header of a library it must not depend on
# (the dependency direction in docs/architecture.md).
set -u
root=${1:-.}
declare -A allowed=(
  [common]="common"
  [dsl]="dsl common"
  [plan]="plan common"
  [compiler]="compiler dsl plan common"
  [drivers]="drivers plan common"
  [audit]="audit common"
)
bad=0
for lib in "${!allowed[@]}"; do
  [[ -d "$root/$lib" ]] || continue
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -n 's/.*#include *"\([a-z_]*\)\/.*/\1/p' <<<"${line#*:}")
    [[ -z "$inc" ]] && continue
    ok=0
    for a in ${allowed[$lib]}; do [[ "$inc" == "$a" ]] && ok=1; done
    # tests/ and third-party-style relative includes are not library dependencies.
    if [[ $ok -eq 0 && -d "$root/$inc" && "$inc" != "tests" ]]; then
      echo "layering: $file includes $inc/ but $lib may only use: ${allowed[$lib]}"
      bad=1
    fi
  done < <(grep -rn '#include "' "$root/$lib" --include='*.h' --include='*.cc' 2>/dev/null)
done
exit $bad
