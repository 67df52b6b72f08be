#!/usr/bin/env bash
# Installs safex as a host service from a build tree (docs/operating.md, "Install"):
#   sudo packaging/install.sh [BUILD_DIR]     (default: build)
# Idempotent: it never overwrites an existing host config or policy; it replaces the binary and
# the unit (that is an upgrade; restart the service afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

if [[ $(id -u) -ne 0 ]]; then
  echo "install: must run as root" >&2
  exit 2
fi
if [[ ! -x $build/safex || ! -f $build/libsafex-core.so ]]; then
  echo "install: $build/safex or $build/libsafex-core.so not found; build first (scripts/build.sh)" >&2
  exit 2
fi
if [[ ! -x /usr/local/bin/runsc ]]; then
  echo "install: /usr/local/bin/runsc missing; run scripts/install-deps.sh" >&2
  exit 2
fi

# The binary and its core (docs/architecture.md, "The executable and its core"): each a new inode
# (install removes the old file and writes a new one), so a running daemon keeps its old images
# until it is restarted. The core first: `safex submit` never loads it, and the other verbs of the
# old executable refuse the new core (exit 125, "another build") only until the next line.
install -D -m 0644 "$build/libsafex-core.so" /usr/local/lib/safex/libsafex-core.so
install -D -m 0755 "$build/safex" /usr/local/bin/safex
# safex-oci, the OCI runtime for containerd's runc shim (docs/kubernetes.md): the same binary,
# which acts by the name it was started as.
ln -sf safex /usr/local/bin/safex-oci
# The launcher (first process of every gVisor run; runs are refused without it) and the built-in
# probes of `safex test --builtin`: each alone in a root-owned directory, which is bind-mounted
# read-only into sandboxes.
install -D -m 0755 "$build/launch-bin/safex-launch" /usr/local/lib/safex/launch/safex-launch
if [[ -x "$build/probe-bin/safex-probe" ]]; then
  install -D -m 0755 "$build/probe-bin/safex-probe" /usr/local/lib/safex/probe/safex-probe
fi
install -D -m 0644 packaging/safex.service /etc/systemd/system/safex.service
install -D -m 0644 docs/operating.md /usr/local/share/doc/safex/operating.md

# Callers of the socket.
getent group safex >/dev/null || groupadd --system safex

# Configuration: root-owned and not writable by others (the daemon refuses a world-writable
# policy dir).
install -d -m 0755 /etc/safex /etc/safex/policies
if [[ ! -e /etc/safex/host.policy ]]; then
  install -m 0644 packaging/host.policy /etc/safex/host.policy
fi
# Two example policies to start from (python-untrusted extends base-untrusted); the others in
# policies/examples are for reading, and some need backends the example host config leaves out.
for p in base-untrusted python-untrusted; do
  [[ -e /etc/safex/policies/$p.policy ]] ||
    install -m 0644 "policies/examples/$p.policy" /etc/safex/policies/
done
/usr/local/bin/safex check /etc/safex/policies/*.policy >/dev/null ||
  echo "install: warning: a policy in /etc/safex/policies does not check (safex check)" >&2

if [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  echo "install: done; start with: systemctl enable --now safex"
else
  echo "install: done (systemd is not running here; start by hand: safex serve)"
fi
