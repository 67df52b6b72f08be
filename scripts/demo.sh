#!/usr/bin/env bash
# Fresh machine -> the main job: installs everything, builds, and runs one untrusted program under
# the example policy (gVisor, no network, tight limits, audited). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh --target safex
./build/safex explain policies/examples/python-untrusted.policy
echo "+ safex run --policy policies/examples/python-untrusted.policy -- python3 -c 'print(6*7)'"
./build/safex run --policy policies/examples/python-untrusted.policy -- python3 -c 'print(6*7)'
