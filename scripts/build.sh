#!/usr/bin/env bash
# Configures and builds safex into build/ (release-with-debug-info). Extra args go to cmake --build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs" "$@"
