#!/usr/bin/env bash
# Builds what the microVM backend boots: the Debian cloud kernel and an initramfs holding the
# virtio modules it needs and safex's static guest agent. Idempotent; run as root by
# scripts/install-deps.sh. See docs/microvm.md.
#
#   build-guest.sh [install] [--guest-dir DIR]
#       Installs into DIR (default /usr/local/lib/safex/guest):
#         vmlinuz          the kernel of linux-image-cloud-amd64's current version
#         modules/         the needed .ko files and load.order (dependency order)
#         initramfs.cpio   /init = safex-guest-agent, lib/modules/safex/ = modules/
#         MANIFEST         kernel package and version, sha256 of every installed file
#       The kernel package is fetched with `apt-get download` (apt checks it against the archive's
#       signed index) and unpacked with dpkg-deb -x into DIR: no kernel package is installed on the
#       host (no initramfs-tools or bootloader hooks run). The agent is built with CMake in
#       build-guest/ of this checkout.
#   build-guest.sh pack --agent FILE --guest-dir DIR --out FILE
#       Packs an initramfs from an agent binary and DIR/modules (used by the CMake target
#       safex_guest_initramfs for tests). Prints a notice and succeeds when DIR/modules is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
guest_dir=/usr/local/lib/safex/guest
mode=install
agent=""
out=""
if [[ $# -gt 0 && "$1" != --* ]]; then
  mode=$1
  shift
fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --guest-dir) guest_dir=$2; shift 2 ;;
    --agent) agent=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "build-guest: unknown argument $1" >&2; exit 2 ;;
  esac
done

# Modules the guest needs; their dependencies are added from each module's depends= field.
# virtio_mmio: microvm's transport; virtio_console: the host channel; virtio_blk + erofs: the
# read-only root and input images; virtio_net: egress (only used when a plan grants it).
WANTED_MODULES=(virtio_mmio virtio_console virtio_blk erofs virtio_net)

# pack AGENT MODULES_DIR OUT: a newc cpio with /init, lib/modules/safex/, and empty mount points.
pack() {
  local agent=$1 mods=$2 out=$3 stage
  stage=$(mktemp -d /tmp/safex-initramfs.XXXXXX)
  trap 'rm -rf "$stage" "$stage.cpio"' RETURN
  mkdir -p "$stage"/{dev,proc,sys,lib/modules/safex}
  install -m 0755 -s "$agent" "$stage/init"
  install -m 0644 "$mods"/*.ko "$mods/load.order" "$stage/lib/modules/safex/"
  # Fixed timestamps and sorted names: the same inputs give the same bytes.
  find "$stage" -exec touch -h -d @0 {} +
  # Packed outside the destination directory: an unchanged result must not touch it (a changed
  # directory under /usr invalidates the microVM rootfs image of /usr, docs/microvm.md).
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
     cpio --quiet -o -H newc --owner 0:0 --reproducible) >"$stage.cpio"
  if ! { [[ -f "$out" ]] && cmp -s "$out" "$stage.cpio"; }; then
    install -m 0644 "$stage.cpio" "$out.tmp.$$"
    mv -f "$out.tmp.$$" "$out"
  fi
  rm -f "$stage.cpio"
}

if [[ "$mode" == pack ]]; then
  [[ -n "$agent" && -n "$out" ]] || { echo "build-guest pack: --agent and --out are required" >&2; exit 2; }
  if [[ ! -f "$guest_dir/modules/load.order" ]]; then
    echo "build-guest: $guest_dir/modules not installed (run scripts/build-guest.sh as root); initramfs not packed"
    exit 0
  fi
  pack "$agent" "$guest_dir/modules" "$out"
  exit 0
fi
[[ "$mode" == install ]] || { echo "build-guest: unknown mode $mode" >&2; exit 2; }

if [[ $(id -u) -ne 0 ]]; then
  echo "build-guest: must run as root (apt-get, $guest_dir)" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive

# Host tools: the VMM, image builders, cpio, binutils (strings), libseccomp.a for the agent, and
# busybox-static (a static binary the microVM tests run in the guest).
PKGS=(qemu-system-x86 erofs-utils squashfs-tools cpio binutils libseccomp-dev busybox-static)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "build-guest: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- kernel -----------------------------------------------------------------------------------
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends:/ {print $2; exit}')
if [[ -z "$kpkg" ]]; then
  echo "build-guest: cannot resolve linux-image-cloud-amd64 (apt-get update?)" >&2
  exit 1
fi
kver_pkg=$(apt-cache policy "$kpkg" | awk '/Candidate:/ {print $2}')
mkdir -p "$guest_dir"
# chmod changes the ctime even when the mode is already right (see pack).
[[ $(stat -c %a "$guest_dir") == 755 ]] || chmod 0755 "$guest_dir"
if [[ ! -f "$guest_dir/kernel.stamp" ]] || [[ "$(cat "$guest_dir/kernel.stamp")" != "$kpkg $kver_pkg" ]]; then
  echo "build-guest: fetching $kpkg ($kver_pkg)"
  tmp=$(mktemp -d /tmp/safex-guest.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  chmod 0755 "$tmp"
  chown _apt "$tmp" 2>/dev/null || true  # apt drops to _apt for downloads
  (cd "$tmp" && apt-get download -qq "$kpkg" >/dev/null)
  deb=$(ls "$tmp"/*.deb | head -n1)
  dpkg-deb -x "$deb" "$tmp/x"
  kver=$(ls "$tmp/x/lib/modules" | head -n1)
  kmods="$tmp/x/lib/modules/$kver/kernel"

  declare -A path_of=()
  while IFS= read -r f; do
    n=$(basename "$f" .ko)
    path_of[${n//-/_}]=$f
  done < <(find "$kmods" -name '*.ko')
  order=()
  declare -A seen=()
  visit() {
    local m=$1 deps d
    [[ -n "${seen[$m]:-}" ]] && return
    seen[$m]=1
    [[ -n "${path_of[$m]:-}" ]] || { echo "build-guest: module $m not in $kpkg" >&2; exit 1; }
    deps=$(strings "${path_of[$m]}" | sed -n 's/^depends=//p' | head -n1)
    for d in ${deps//,/ }; do visit "${d//-/_}"; done
    order+=("$m")
  }
  for m in "${WANTED_MODULES[@]}"; do visit "$m"; done

  new="$guest_dir/.new.$$"
  rm -rf "$new"
  mkdir -p "$new/modules"
  install -m 0644 "$tmp/x/boot/vmlinuz-$kver" "$new/vmlinuz"
  for m in "${order[@]}"; do
    install -m 0644 "${path_of[$m]}" "$new/modules/$m.ko"
    echo "$m.ko" >>"$new/modules/load.order"
  done
  echo "$kver" >"$new/kernel.release"
  rm -rf "$guest_dir/modules"
  mv "$new/modules" "$guest_dir/modules"
  mv -f "$new/vmlinuz" "$guest_dir/vmlinuz"
  mv -f "$new/kernel.release" "$guest_dir/kernel.release"
  rm -rf "$new"
  echo "$kpkg $kver_pkg" >"$guest_dir/kernel.stamp"
  rm -rf "$tmp"
  trap - EXIT
fi

# --- agent and initramfs ------------------------------------------------------------------------
echo "build-guest: building the guest agent"
cmake -S "$here" -B "$here/build-guest" -DCMAKE_BUILD_TYPE=Release -DSAFEX_TESTS=OFF \
  -DSAFEX_BENCH=OFF >/dev/null
cmake --build "$here/build-guest" -j2 --target safex-guest-agent >/dev/null
pack "$here/build-guest/guest/safex-guest-agent" "$guest_dir/modules" "$guest_dir/initramfs.cpio"

manifest=$(mktemp /tmp/safex-guest-manifest.XXXXXX)
{
  echo "kernel_package=$kpkg"
  echo "kernel_version=$kver_pkg"
  echo "kernel_release=$(cat "$guest_dir/kernel.release")"
  (cd "$guest_dir" && sha256sum vmlinuz initramfs.cpio modules/*.ko modules/load.order)
} >"$manifest"
# Unchanged files are left alone: anything changed under /usr invalidates the microVM rootfs
# image of /usr (a rebuild of several GB, docs/microvm.md).
if ! cmp -s "$manifest" "$guest_dir/MANIFEST"; then
  install -m 0644 "$manifest" "$guest_dir/MANIFEST.tmp"
  mv -f "$guest_dir/MANIFEST.tmp" "$guest_dir/MANIFEST"
fi
rm -f "$manifest"
echo "build-guest: ok ($guest_dir: $(cat "$guest_dir/kernel.release"), initramfs $(stat -c %s "$guest_dir/initramfs.cpio") bytes)"
