#!/bin/bash
# numaplace placing libvirt's domains through libvirt, in the 2-node guest of
# guest-libvirt-bed.sh (its --guest-script; numaplace and packaging/numad
# given with --bin). Runs as root in the guest's chroot with libvirtd up.
#
#   a. /usr/bin/numad is numaplace's (packaging/numad in front of
#      /bed/bin/numaplace, over the read-only /usr/bin by an overlay), and
#      the domain `auto` (<vcpu placement='auto'>, <numatune><memory
#      mode='restrictive' placement='auto'>, 2 vCPUs, 64 MiB) starts:
#      libvirt asks numaplace where (numad -w 2:64), pins the domain to
#      that node's CPUs and binds its memory to that node (libvirt's
#      placement, as `virsh vcpupin` and `virsh numatune` show it).
#   b. `numaplace run --policy static` (every thread of vm:auto to the other
#      node's CPUs, its memory to the other node) re-places it through
#      libvirt: `virsh vcpupin`, `virsh emulatorpin` and `virsh numatune`
#      show numaplace's placement, and QEMU's pages are on the other node
#      (numa_maps); SIGTERM puts libvirt's back (virsh shows it again).
#   c. the same run killed with SIGKILL once it placed the domain; a restart
#      (`--policy default --rounds 1`) puts libvirt's back.
#   d. the domain `owned` (<vcpupin vcpu='0' cpuset='1'>, its owner's):
#      `numaplace advise --vms` leaves it alone and says why.
# Prints one JSON object between @@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@ and
# -END@@ lines: {"numad_node", "libvirt_cpus", "target", "placed",
# "after_sigterm", "placed_again", "after_restart" (each "PINS m:NODES",
# PINS as `pins` prints them, NODES `virsh numatune`'s nodeset),
# "pages_on_target_pct", "advise_owned", "journal", "failed": [...]};
# exits 1 if a check failed.
set -u
uri=${BED_URI:-qemu:///system}
np=/bed/bin/numaplace
virsh() { command virsh -c "$uri" "$@"; }
failures=()
fail() { failures+=("$1"); echo "np-test: FAILED: $1" >&2; }
js() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\010\013-\037')"
}
# `virsh vcpupin DOM` and `emulatorpin` as one line: "0:0-1 1:0-1 e:0-1".
pins() {
  local v e
  v=$(virsh vcpupin "$1" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ { printf "%s:%s ", $1, $2 }')
  e=$(virsh emulatorpin "$1" 2>/dev/null | awk '$1 == "*:" { print $2 }')
  printf '%se:%s' "$v" "$e"
}
# `pins DOM` and the domain's memory nodes: "0:0-1 1:0-1 e:0-1 m:0".
placement() {
  local m
  m=$(virsh numatune "$1" 2>/dev/null | awk '$1 == "numa_nodeset" { print $3 }')
  printf '%s m:%s' "$(pins "$1")" "$m"
}
# The percentage of process $1's pages (numa_maps) on node $2.
pages_on() {
  awk -v n="N$2=" '{ for (i = 2; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
      split($i, kv, "="); all += kv[2]; if (index($i, n) == 1) on += kv[2] } }
    END { if (all) printf "%d", 100 * on / all; else print 0 }' "/proc/$1/numa_maps"
}
# Waits up to $2 seconds (of the clock: each virsh call takes seconds
# here) for `placement DOM` to be $3, while the daemon $4 runs.
wait_placed() {
  local dom=$1 want=$3 daemon=$4 end=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$end" ]; do
    [ "$(placement "$dom")" = "$want" ] && return 0
    kill -0 "$daemon" 2>/dev/null || return 1
    sleep 2
  done
  return 1
}

# a. numaplace as numad.
mkdir -p /tmp/ub/up /tmp/ub/work /bed/lib/numaplace
cp /bed/bin/numad /bed/lib/numaplace/numad
chmod 755 /bed/lib/numaplace/numad
printf '#!/bin/sh\nexec /bed/lib/numaplace/numad "$@"\n' > /tmp/ub/up/numad
chmod 755 /tmp/ub/up/numad
mount -t overlay overlay -o lowerdir=/usr/bin,upperdir=/tmp/ub/up,workdir=/tmp/ub/work /usr/bin \
  || fail "overlay of /usr/bin for numad"
echo "np-test: numad -w 2:64 says node $(/usr/bin/numad -w 2:64) now"
# The bed's domain (a halting boot disk: idle vCPUs), as `auto`: its vCPUs
# and memory placed by libvirt through numad, its memory bound by cgroups
# (mode restrictive, which libvirt changes live).
sed -e "s|<name>[^<]*</name>|<name>auto</name>|" -e "/<uuid>/d" \
  -e "/<numatune>/,/<\/numatune>/d" \
  -e "s|<vcpu[^>]*>\([0-9]*\)</vcpu>|<vcpu placement='auto'>2</vcpu><numatune><memory mode='restrictive' placement='auto'/></numatune>|" \
  "$BED_XML" > /tmp/auto.xml
virsh define /tmp/auto.xml >/dev/null && virsh start auto || fail "start auto"
libvirt=$(placement auto)
echo "np-test: libvirt placed auto: $libvirt"
# numad's answer at the start is what libvirt placed the domain on: one
# node's CPUs and memory, or both nodes' where no node had two idle CPUs
# at that moment (numad's rule, and numaplace's: the guest is busy while
# libvirtd starts). It is read from libvirt, not asked again: the answer
# depends on the moment's load and free memory. numaplace then moves the
# domain to node 1, or to node 0 where libvirt chose node 1.
case "$libvirt" in
  "0:0-1 1:0-1 e:0-1 m:0") node=0 ;;
  "0:2-3 1:2-3 e:2-3 m:1") node=1 ;;
  "0:0-3 1:0-3 e:0-3 m:0-1") node=0-1 ;;
  *) fail "libvirt's placement of auto is $libvirt, not what numad -w could answer"; node=x ;;
esac
if [ "$node" = 1 ]; then target=0-1; tnode=0; else target=2-3; tnode=1; fi
grep -q "placement='auto'" /run/libvirt/qemu/auto.xml || fail "the domain's status says no automatic placement"
qemu=$(cat /run/libvirt/qemu/auto.pid)
echo "np-test: QEMU $qemu has $(pages_on "$qemu" "$tnode") % of its pages on node $tnode before numaplace"
placed_want="0:$target 1:$target e:$target m:$tnode"

# b. numaplace places it through libvirt; SIGTERM restores.
{
  printf 'state = "/tmp/np/state.json"\njournal = "/tmp/np/journal.jsonl"\ninterval = "1s"\n'
  printf '[scope]\nvms = true\n[policy]\nname = "static"\n'
  for t in 0 1 2 3 4 5 6 7 8 9 10 11; do
    printf '[[policy.pins]]\nprocess = "vm:auto"\nthread = %s\ncpus = "%s"\n' "$t" "$target"
  done
  printf '[[policy.memory]]\nprocess = "vm:auto"\nnode = %s\n' "$tnode"
} > /tmp/np.toml
mkdir -p /tmp/np
$np -v run --config /tmp/np.toml 2> /tmp/np/run1.err &
d=$!
wait_placed auto 300 "$placed_want" "$d"
placed=$(placement auto)
[ "$placed" = "$placed_want" ] || fail "not placed through libvirt: $placed"
pct=$(pages_on "$qemu" "$tnode")
echo "np-test: numaplace placed auto: $placed; $pct % of QEMU's pages on node $tnode"
[ "$pct" -ge 90 ] || fail "only $pct % of QEMU's pages on node $tnode after numatune"
kill -TERM "$d"; wait "$d"
after_sigterm=$(placement auto)
echo "np-test: after SIGTERM: $after_sigterm"
[ "$after_sigterm" = "$libvirt" ] || fail "SIGTERM left $after_sigterm, not libvirt's $libvirt"

# c. kill -9, then a restart restores.
$np -v run --config /tmp/np.toml 2> /tmp/np/run2.err &
d=$!
wait_placed auto 300 "$placed_want" "$d"
placed_again=$(placement auto)
[ "$placed_again" = "$placed_want" ] || fail "not placed again: $placed_again"
kill -KILL "$d"; wait "$d" 2>/dev/null
$np -v run --config /tmp/np.toml --policy default --rounds 1 2> /tmp/np/run3.err || fail "the restart failed"
after_restart=$(placement auto)
echo "np-test: after kill -9 and a restart: $after_restart"
[ "$after_restart" = "$libvirt" ] || fail "the restart left $after_restart, not libvirt's $libvirt"
grep -q "did not stop cleanly" /tmp/np/run3.err || fail "the restart did not say it restored"
virsh destroy auto >/dev/null

# d. An owner's <vcpupin> is the owner's.
sed -e "s|<name>[^<]*</name>|<name>owned</name>|" -e "/<uuid>/d" \
  -e "s|<vcpu[^>]*>\([0-9]*\)</vcpu>|<vcpu placement='static'>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/></cputune>|" \
  -e "/<numatune>/,/<\/numatune>/d" "$BED_XML" > /tmp/owned.xml
virsh define /tmp/owned.xml >/dev/null && virsh start owned || fail "start owned"
$np advise --policy numad-like --vms --interval 1s > /tmp/np/advise.out 2> /tmp/np/advise.err \
  || fail "advise on owned"
grep -q "libvirt domain owned holds its placement: its owner pinned it in libvirt's XML (<vcpupin vcpu='0' cpuset='1'>)" /tmp/np/advise.out \
  || fail "advise does not say why owned is left alone"
virsh destroy owned >/dev/null

if [ "${#failures[@]}" -ne 0 ]; then
  for f in /tmp/np/run1.err /tmp/np/run2.err /tmp/np/run3.err; do
    [ -f "$f" ] || continue
    echo "np-test: the last lines of $f:" >&2
    tail -n 25 "$f" | sed 's/^/np-test:   /' >&2
  done
fi
echo "@@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@"
printf '{"numad_node": %s, "libvirt_cpus": %s, "target": %s, "placed": %s, ' \
  "$(js "$node")" "$(js "$libvirt")" "$(js "$target")" "$(js "$placed")"
printf '"after_sigterm": %s, "placed_again": %s, "after_restart": %s, "pages_on_target_pct": %s, ' \
  "$(js "$after_sigterm")" "$(js "$placed_again")" "$(js "$after_restart")" "${pct:-0}"
printf '"advise_owned": %s, "run_log": %s, "journal": %s, "failed": [' \
  "$(js "$(cat /tmp/np/advise.out)")" "$(js "$(cat /tmp/np/run1.err)")" \
  "$(js "$(cat /tmp/np/journal.jsonl 2>/dev/null)")"
sep=""
for f in "${failures[@]}"; do printf '%s%s' "$sep" "$(js "$f")"; sep=", "; done
printf ']}\n'
echo "@@NUMAPLACE-LIBVIRT-BED-JSON-END@@"
[ "${#failures[@]}" -eq 0 ]
