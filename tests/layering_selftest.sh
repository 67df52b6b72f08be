#!/usr/bin/env bash
# The layering check can fail: a tree where drivers/microvm includes drivers/gvisor, or the
# supervisor includes a backend, is refused; the same tree without it passes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/sxtest-layering-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/drivers/microvm" "$tmp/drivers/gvisor" "$tmp/supervisor" "$tmp/common"
echo '#include "drivers/driver.h"' > "$tmp/drivers/microvm/a.h"
echo '#include "drivers/backends.h"' > "$tmp/supervisor/b.cc"
bash "$here/layering_test.sh" "$tmp" >/dev/null || { echo "a clean tree was refused"; exit 1; }
echo '#include "drivers/gvisor/gvisor_driver.h"' >> "$tmp/drivers/microvm/a.h"
if bash "$here/layering_test.sh" "$tmp" >/dev/null; then
  echo "drivers/microvm including drivers/gvisor was not refused"; exit 1
fi
sed -i '$d' "$tmp/drivers/microvm/a.h"
echo '#include "drivers/microvm/microvm_driver.h"' >> "$tmp/supervisor/b.cc"
if bash "$here/layering_test.sh" "$tmp" >/dev/null; then
  echo "the supervisor including a backend was not refused"; exit 1
fi
echo '#include "supervisor/runner.h"' > "$tmp/common/c.h"
sed -i '$d' "$tmp/supervisor/b.cc"
if bash "$here/layering_test.sh" "$tmp" >/dev/null; then
  echo "common including supervisor was not refused"; exit 1
fi
exit 0
