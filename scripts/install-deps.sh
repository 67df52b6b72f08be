#!/usr/bin/env bash
# Installs everything safex needs to build, test and run, from Debian's archive only.
# Idempotent: safe to run again; it skips what is already present.
#
# runsc: bookworm's runsc is too old for current kernels (statx fails inside the sandbox), so we take
# Debian trixie's runsc package from the same mirror this machine already uses, verified by apt's
# signature checks, and install only its static binary. See docs/operating.md.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: must run as root (apt-get)" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive

BUILD_PKGS=(
  build-essential cmake pkg-config git
  tao-pegtl-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev sqlite3
  libseccomp-dev libnl-3-dev libnl-route-3-dev libnftables-dev libre2-dev libcap-dev
  clang libclang-rt-14-dev
  libpq-dev  # fleet/: shipping audit logs to PostgreSQL
  musl-tools  # launch/: the launcher, linked against musl (it starts in every gVisor sandbox)
)
RUN_PKGS=(
  nftables iproute2 python3 nodejs procps util-linux ca-certificates
  python3-yaml  # tests/serve/api_contract_test.py reads docs/openapi.yaml
  systemd  # systemd-analyze: tests/serve checks packaging/safex.service (nothing is started)
  bubblewrap  # bench/native measures the native backend against it (never used by safex)
  postgresql  # tests/fleet start a private cluster (initdb in a temp dir, its own socket)
  containerd  # tests/oci start their own containerd (temp config, socket) and drive safex-oci
)

missing=()
for p in "${BUILD_PKGS[@]}" "${RUN_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- runsc from Debian trixie ---------------------------------------------------------------
RUNSC_MIN_VERSION=20240729
runsc_ok() {
  local v
  [[ -x /usr/local/bin/runsc ]] || return 1
  v=$(/usr/local/bin/runsc --version 2>/dev/null | sed -n 's/^runsc version .*0\.0~\([0-9]\{8\}\).*/\1/p; s/^runsc version release-\([0-9]\{8\}\).*/\1/p' | head -n1)
  [[ -n "$v" && "$v" -ge "$RUNSC_MIN_VERSION" ]]
}

if ! runsc_ok; then
  echo "install-deps: fetching runsc from Debian trixie"
  tmp=$(mktemp -d /tmp/safex-runsc.XXXXXX)
  chmod 0755 "$tmp"  # apt drops to _apt for downloads
  trap 'rm -rf "$tmp"' EXIT
  # Reuse this machine's own Debian mirror (never a hard-coded host name).
  uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    uri=$(awk '/^URIs:/ {for (i=2;i<=NF;i++) if ($i !~ /security/) {print $i; exit}}' "$f")
    [[ -n "$uri" ]] && break
  done
  if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
    uri=$(awk '$1=="deb" && $0 !~ /security/ {for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list | head -n1)
  fi
  if [[ -z "$uri" ]]; then
    echo "install-deps: cannot find this machine's Debian mirror in apt sources" >&2
    exit 1
  fi
  mkdir -p "$tmp/lists/partial" "$tmp/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" >"$tmp/sources.list"
  aptopts=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$tmp/lists" -o Dir::Cache::Archives="$tmp/archives"
           -o APT::Get::List-Cleanup=0)
  apt-get "${aptopts[@]}" update -qq
  (cd "$tmp" && apt-get "${aptopts[@]}" download runsc >/dev/null)
  deb=$(ls "$tmp"/runsc_*.deb | head -n1)
  dpkg-deb -x "$deb" "$tmp/x"
  install -m 0755 "$tmp/x/usr/bin/runsc" /usr/local/bin/runsc
  rm -rf "$tmp"
  trap - EXIT
fi
if ! runsc_ok; then
  echo "install-deps: runsc at /usr/local/bin/runsc is missing or older than $RUNSC_MIN_VERSION" >&2
  exit 1
fi
echo "install-deps: ok ($(/usr/local/bin/runsc --version | head -n1))"
# The microVM guest (kernel, modules, initramfs with the agent): scripts/build-guest.sh, idempotent.
bash "$(dirname "$0")/build-guest.sh"
