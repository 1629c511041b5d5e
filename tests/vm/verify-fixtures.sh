#!/bin/bash
# Check the topology fixtures in tests/fixtures/ with hwloc.
#
# Usage: tests/vm/verify-fixtures.sh [NAME...]   (default: qemu-2node qemu-4node host-1node)
#
# Extracts each NAME.tar.xz into a temporary directory, runs
# `lstopo-no-graphics -i DIR` and checks the package / NUMA node / PU counts
# and, for the QEMU guests, the distance matrix set in boot.sh. host-1node is
# checked for one NUMA node and at least one PU. Also checks that the tarball
# has sys/ and proc/ at the top level and that NAME.lstopo-console.txt matches.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
fixtures="$here/../fixtures"
command -v lstopo-no-graphics >/dev/null || { echo "verify-fixtures.sh: error: lstopo-no-graphics not found (apt-get install hwloc)" >&2; exit 2; }

[ $# -gt 0 ] || set -- qemu-2node qemu-4node host-1node
tmp=$(mktemp -d "${TMPDIR:-/tmp}/verify-fixtures.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail=0
bad() { echo "FAIL $1: $2" >&2; fail=$((fail + 1)); }

# The distance matrix the 2- and 4-node layouts of boot.sh set.
dist2="10 21
21 10"
dist4="10 16 16 22
16 10 22 16
16 22 10 16
22 16 16 10"

for name in "$@"; do
  tarball="$fixtures/$name.tar.xz"
  [ -f "$tarball" ] || { bad "$name" "$tarball missing"; continue; }
  dir="$tmp/$name"
  mkdir -p "$dir"
  tar -xJf "$tarball" -C "$dir"
  top=$(tar -tJf "$tarball" | cut -d/ -f1 | sort -u | tr '\n' ' ')
  [ "$top" = "proc sys " ] || bad "$name" "top-level entries are '$top', expected 'proc sys '"

  count() { lstopo-no-graphics -i "$dir" --only "$1" | grep -c . || true; }
  pkgs=$(count package)
  numas=$(count numanode)
  pus=$(count pu)
  case "$name" in
    qemu-2node) want="2 2 4"; want_dist=$dist2 ;;
    qemu-4node) want="4 4 8"; want_dist=$dist4 ;;
    *) want=""; want_dist="" ;;
  esac
  if [ -n "$want" ]; then
    [ "$pkgs $numas $pus" = "$want" ] \
      || bad "$name" "packages/NUMA nodes/PUs = $pkgs/$numas/$pus, expected ${want// //}"
    # lstopo --distances prints a title, an ' index 0 1 ...' line, then one
    # row per node: its logical index followed by the distances.
    got_dist=$(lstopo-no-graphics -i "$dir" --distances \
      | awk '$1 == "index" { on = 1; next } on && NF > 1 { $1 = ""; sub(/^ +/, ""); print }' \
      | head -n "$numas")
    sys_dist=$(cat "$dir"/sys/devices/system/node/node*/distance)
    [ "$sys_dist" = "$want_dist" ] || bad "$name" "sysfs distances differ from boot.sh's: $sys_dist"
    [ "$got_dist" = "$want_dist" ] || bad "$name" "hwloc distances differ from boot.sh's: $got_dist"
  else
    if [ "$numas" != 1 ] || [ "$pus" -lt 1 ] || [ "$pkgs" -lt 1 ]; then
      bad "$name" "packages/NUMA nodes/PUs = $pkgs/$numas/$pus, expected >=1/1/>=1"
    fi
  fi
  if [ -f "$fixtures/$name.lstopo-console.txt" ]; then
    lstopo-no-graphics -i "$dir" --of console | cmp -s - "$fixtures/$name.lstopo-console.txt" \
      || bad "$name" "$name.lstopo-console.txt differs from hwloc's view of the tarball"
  else
    bad "$name" "$name.lstopo-console.txt missing"
  fi
  echo "ok   $name: $pkgs packages, $numas NUMA nodes, $pus PUs ($(wc -c < "$tarball") bytes)"
done
if [ "$fail" -gt 0 ]; then
  echo "verify-fixtures.sh: $fail check(s) failed" >&2
  exit 1
fi
