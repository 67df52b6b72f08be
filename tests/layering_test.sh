#!/usr/bin/env bash
# Fails when a library includes a header of a library it must not depend on (the dependency
# direction in docs/architecture.md), and, inside drivers/, when a backend includes another
# backend's headers or anything above drivers/ names a backend instead of the registry.
set -u
root=${1:-.}
declare -A allowed=(
  [common]="common"
  [dsl]="dsl common"
  [plan]="plan common"
  [compiler]="compiler dsl plan common"
  [drivers]="drivers plan common"
  [audit]="audit common"
  [fleet]="fleet audit common"
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

# Inside drivers/: a backend folder uses the shared modules (driver.h, cgroup/, net/) and its own
# files, never another backend's; only the registry (drivers/backends.*) names them all.
backends="gvisor microvm native"
for b in $backends; do
  [[ -d "$root/drivers/$b" ]] || continue
  while IFS= read -r line; do
    file=${line%%:*}
    sub=$(sed -n 's/.*#include *"drivers\/\([a-z_]*\)\/.*/\1/p' <<<"${line#*:}")
    [[ -z "$sub" || "$sub" == "$b" ]] && continue
    for other in $backends; do
      if [[ "$sub" == "$other" ]]; then
        echo "layering: $file includes drivers/$other/: a backend never includes another backend"
        bad=1
      fi
    done
  done < <(grep -rn '#include "drivers/' "$root/drivers/$b" --include='*.h' --include='*.cc')
done
# Above drivers/ (the supervisor), backends are reached through drivers/backends.h only.
while IFS= read -r line; do
  file=${line%%:*}
  sub=$(sed -n 's/.*#include *"drivers\/\([a-z_]*\)\/.*/\1/p' <<<"${line#*:}")
  for other in $backends; do
    if [[ "$sub" == "$other" ]]; then
      echo "layering: $file includes drivers/$other/: the supervisor names no backend (use drivers/backends.h)"
      bad=1
    fi
  done
done < <(grep -rn '#include "drivers/' "$root/supervisor" --include='*.h' --include='*.cc' 2>/dev/null)
exit $bad
