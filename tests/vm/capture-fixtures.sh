#!/bin/bash
# (Re)create the sysfs/procfs topology fixtures in tests/fixtures/.
#
# Usage: tests/vm/capture-fixtures.sh [--only qemu-2node|qemu-4node|host-1node]... [--timeout S]
#
# For each QEMU layout it boots tests/vm/boot.sh with an initramfs holding
# gather-topology.sh; the guest gathers into /tmp/cap, tars and gzips it and
# prints it base64-encoded between @@NUMAPLACE-CAPTURE-BEGIN@@ and
# @@NUMAPLACE-CAPTURE-END@@ on the serial console. This script cuts that out,
# decodes it and repacks it reproducibly as tests/fixtures/NAME.tar.xz with
# sys/ and proc/ at the top level. host-1node is the same gather run on this
# machine (its mount tables and cgroup paths trimmed to what topology readers
# use, see scrub_host). Beside each tarball it writes NAME.lstopo-console.txt
# (`lstopo-no-graphics -i DIR --of console`) and finally runs verify-fixtures.sh.
#
# Needs (host): qemu-system-x86, busybox-static, cpio, hwloc, xz-utils, GNU tar;
# fetch-kernel.sh is run first (idempotent) and may apt-get what is missing.
set -euo pipefail

die() { echo "capture-fixtures.sh: error: $*" >&2; exit 1; }
log() { echo "capture-fixtures.sh: $*" >&2; }

here=$(cd "$(dirname "$0")" && pwd)
fixtures=$(cd "$here/../fixtures" 2>/dev/null && pwd) || die "tests/fixtures/ not found next to tests/vm/"
work="$here/work"

only=()
timeout_s=300
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || die "--only needs a name"; only+=("$2"); shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ ${#only[@]} -gt 0 ] || only=(qemu-2node qemu-4node host-1node)
for n in "${only[@]}"; do
  case "$n" in qemu-2node|qemu-4node|host-1node) ;; *) die "unknown fixture '$n'" ;; esac
done

command -v lstopo-no-graphics >/dev/null || die "lstopo-no-graphics not found (apt-get install hwloc)"
command -v xz >/dev/null || die "xz not found (apt-get install xz-utils)"
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar is needed on the host"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/capture-fixtures.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# pack DIR NAME: reproducible NAME.tar.xz (sys/ proc/ at top level) + lstopo view.
pack() {
  local dir=$1 name=$2
  if [ ! -d "$dir/sys" ] || [ ! -d "$dir/proc" ]; then
    die "$name: capture has no sys/ or proc/"
  fi
  tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    --mode='u+rw,go+r,go-w' -cf - sys proc | xz -9 -T1 > "$fixtures/$name.tar.xz.tmp"
  mv "$fixtures/$name.tar.xz.tmp" "$fixtures/$name.tar.xz"
  lstopo-no-graphics -i "$dir" --of console > "$fixtures/$name.lstopo-console.txt"
  log "wrote tests/fixtures/$name.tar.xz ($(wc -c < "$fixtures/$name.tar.xz") bytes) and $name.lstopo-console.txt"
}

# scrub_host DIR: keep the host fixture free of this machine's unrelated names.
# Mount tables keep only / and the proc, sysfs, cgroup, cgroup2, cpuset and
# hugetlbfs mounts (all hwloc and numaplace look at); cgroup paths of controllers
# other than cpuset and the v2 hierarchy become /; proc/version is dropped.
scrub_host() {
  local dir=$1 keep='^(proc|sysfs|cgroup|cgroup2|cpuset|hugetlbfs)$'
  if [ -f "$dir/proc/mounts" ]; then
    awk -v keep="$keep" '$2 == "/" || $3 ~ keep' "$dir/proc/mounts" > "$dir/proc/mounts.new"
    mv "$dir/proc/mounts.new" "$dir/proc/mounts"
  fi
  if [ -f "$dir/proc/self/mountinfo" ]; then
    awk -v keep="$keep" '{ for (i = 7; i <= NF; i++) if ($i == "-") break }
                         $5 == "/" || $(i + 1) ~ keep' \
      "$dir/proc/self/mountinfo" > "$dir/proc/self/mountinfo.new"
    mv "$dir/proc/self/mountinfo.new" "$dir/proc/self/mountinfo"
  fi
  if [ -f "$dir/proc/self/cgroup" ]; then
    awk -F: 'BEGIN { OFS = ":" }
             $1 != "0" && $2 !~ /(^|,)cpuset(,|$)/ { $3 = "/" } { print }' \
      "$dir/proc/self/cgroup" > "$dir/proc/self/cgroup.new"
    mv "$dir/proc/self/cgroup.new" "$dir/proc/self/cgroup"
  fi
  rm -f "$dir/proc/version"
}

needs_vm=0
for n in "${only[@]}"; do case "$n" in qemu-*) needs_vm=1 ;; esac; done
if [ "$needs_vm" = 1 ]; then
  "$here/fetch-kernel.sh"
  cat > "$tmp/capture.sh" <<'GUEST'
set -e
rm -rf /tmp/cap
gather-topology.sh /tmp/cap
cd /tmp/cap
echo "@@NUMAPLACE-CAPTURE-BEGIN@@"
tar -cf - sys proc | gzip -9 | base64
echo "@@NUMAPLACE-CAPTURE-END@@"
GUEST
  "$here/mkinitramfs.sh" --script "$tmp/capture.sh" "$work/capture.cpio.gz" "$here/gather-topology.sh"
fi

for name in "${only[@]}"; do
  out="$tmp/$name"
  mkdir -p "$out"
  case "$name" in
    qemu-2node|qemu-4node)
      nodes=${name#qemu-}; nodes=${nodes%node}
      log "booting the ${nodes}-node guest (timeout ${timeout_s}s)"
      rc=0
      # nokaslr: with KASLR the kernel image lands on a random node, so per-node
      # MemTotal (and hwloc's view) would change from one capture to the next.
      "$here/boot.sh" --nodes "$nodes" --initrd "$work/capture.cpio.gz" \
        --append nokaslr --timeout "$timeout_s" > "$tmp/$name.console" || rc=$?
      [ "$rc" = 0 ] || { tail -n 30 "$tmp/$name.console" >&2; die "$name: boot.sh exited $rc"; }
      tr -d '\r' < "$tmp/$name.console" \
        | sed -n '/^@@NUMAPLACE-CAPTURE-BEGIN@@$/,/^@@NUMAPLACE-CAPTURE-END@@$/p' \
        | sed '1d;$d' > "$tmp/$name.b64"
      [ -s "$tmp/$name.b64" ] || die "$name: no capture between the markers on the console"
      base64 -d < "$tmp/$name.b64" | tar -xzf - -C "$out" \
        || die "$name: could not decode/extract the console capture"
      ;;
    host-1node)
      log "gathering this host"
      sh "$here/gather-topology.sh" "$out"
      scrub_host "$out"
      ;;
  esac
  pack "$out" "$name"
done

"$here/verify-fixtures.sh" "${only[@]}"
