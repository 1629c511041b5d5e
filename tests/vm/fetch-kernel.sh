#!/bin/sh
# Obtain a Debian kernel image for the QEMU test bed, idempotently.
#
# Resolves the real image package behind the `linux-image-amd64` metapackage
# (apt-cache depends), downloads it with `apt-get download`, unpacks it with
# `dpkg-deb -x` and leaves the kernel at tests/vm/work/vmlinuz.
# Everything downloaded stays inside tests/vm/work/ (gitignored).
#
# Usage: tests/vm/fetch-kernel.sh [--force]
#   --force   re-download and re-extract even if work/vmlinuz exists
#
# Needs Debian (apt). As root it installs its own missing host tools
# (qemu-system-x86 busybox-static cpio) after an `apt-get update`.
set -eu

die() { echo "fetch-kernel.sh: error: $*" >&2; exit 1; }
log() { echo "fetch-kernel.sh: $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
work="$here/work"
force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
  *) die "unknown argument '$1' (usage: $0 [--force])" ;;
esac

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script needs a Debian-like host"

# ---- host tools -------------------------------------------------------------
updated=0
apt_update() {
  if [ "$updated" = 0 ]; then
    log "running apt-get update"
    apt-get update -qq || die "apt-get update failed"
    updated=1
  fi
}

missing=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$missing qemu-system-x86"
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' \
  || missing="$missing busybox-static"
command -v cpio >/dev/null 2>&1 || missing="$missing cpio"
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || die "missing packages:$missing (run as root, or: apt-get install$missing)"
  apt_update
  log "installing:$missing"
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing \
    || die "apt-get install$missing failed"
fi

# ---- kernel -----------------------------------------------------------------
if [ "$force" = 0 ] && [ -s "$work/vmlinuz" ]; then
  log "kernel already present: $work/vmlinuz ($(cat "$work/kernel-package" 2>/dev/null || echo unknown package))"
  exit 0
fi

mkdir -p "$work"

resolve() {
  apt-cache depends linux-image-amd64 2>/dev/null \
    | sed -n 's/^ *Depends: *\(linux-image-[0-9][^ ]*\).*/\1/p' | head -n 1
}
pkg=$(resolve)
if [ -z "$pkg" ]; then
  apt_update
  pkg=$(resolve)
fi
[ -n "$pkg" ] || die "could not resolve the package behind linux-image-amd64 (apt-cache depends found nothing)"
log "linux-image-amd64 -> $pkg"

dl="$work/deb"
mkdir -p "$dl"
# apt-get download drops privileges to _apt; let it write here.
chmod 0777 "$dl" 2>/dev/null || true
deb=$(find "$dl" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
if [ -z "$deb" ]; then
  log "downloading $pkg"
  (cd "$dl" && apt-get download -q "$pkg") || {
    apt_update
    (cd "$dl" && apt-get download -q "$pkg") || die "apt-get download $pkg failed"
  }
  deb=$(find "$dl" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
fi
[ -n "$deb" ] || die "download of $pkg produced no .deb in $dl"

root="$work/kernel-root"
rm -rf "$root"
mkdir -p "$root"
log "extracting $(basename "$deb")"
dpkg-deb -x "$deb" "$root" || die "dpkg-deb -x $deb failed"

img=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' | head -n 1)
[ -n "$img" ] || die "no boot/vmlinuz-* inside $deb"
cp "$img" "$work/vmlinuz.tmp"
mv "$work/vmlinuz.tmp" "$work/vmlinuz"
echo "$pkg $(basename "$deb")" > "$work/kernel-package"
# The modules tree is large and not needed (the guest uses built-ins only).
rm -rf "$root"
log "kernel ready: $work/vmlinuz ($pkg)"
