#!/bin/bash
# numaplace placing libvirt's domains through libvirt, in the 2-node guest of
# guest-libvirt-bed.sh (its --guest-script; numaplace and packaging/numad
# given with --bin). Runs as root in the guest's chroot with libvirtd up.
#
#   a. /usr/bin/numad is numaplace's (packaging/numad in front of
#      /bed/bin/numaplace, over the read-only /usr/bin by an overlay), and
#      the domain `auto` (<vcpu placement='auto'>, 2 vCPUs, 64 MiB) starts:
#      libvirt asks numaplace where (numad -w 2:64) and pins the domain to
#      that node's CPUs (libvirt's placement, as `virsh vcpupin` shows it).
#   b. `numaplace run --policy static` (every thread of vm:auto to the other
#      node's CPUs) re-places it through libvirt: `virsh vcpupin` and
#      `virsh emulatorpin` show numaplace's CPUs; SIGTERM puts libvirt's
#      back (virsh shows them again).
#   c. the same run killed with SIGKILL once it placed the domain; a restart
#      (`--policy default --rounds 1`) puts libvirt's back.
#   d. the domain `owned` (<vcpupin vcpu='0' cpuset='1'>, its owner's):
#      `numaplace advise --vms` leaves it alone and says why.
# Prints one JSON object between @@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@ and
# -END@@ lines: {"numad_node", "libvirt_cpus", "target", "placed",
# "after_sigterm", "placed_again", "after_restart", "advise_owned",
# "journal": [...], "failed": [...]}; exits 1 if a check failed.
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
# Waits up to $2 seconds for `pins DOM` to be $3.
wait_pins() {
  local dom=$1 secs=$2 want=$3 i=0
  while [ "$i" -lt "$secs" ]; do
    [ "$(pins "$dom")" = "$want" ] && return 0
    sleep 2
    i=$((i + 2))
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
# placed by libvirt through numad.
sed -e "s|<name>[^<]*</name>|<name>auto</name>|" -e "/<uuid>/d" \
  -e "s|<vcpu[^>]*>\([0-9]*\)</vcpu>|<vcpu placement='auto'>2</vcpu>|" \
  -e "/<numatune>/,/<\/numatune>/d" "$BED_XML" > /tmp/auto.xml
virsh define /tmp/auto.xml >/dev/null && virsh start auto || fail "start auto"
libvirt=$(pins auto)
echo "np-test: libvirt placed auto: $libvirt"
# numad's answer at the start is what libvirt pinned the domain to: one
# node's CPUs (numaplace's answer depends on the moment's free memory, so
# it is read from libvirt, not asked again).
case "$libvirt" in
  "0:0-1 1:0-1 e:0-1") node=0; home=0-1; target=2-3 ;;
  "0:2-3 1:2-3 e:2-3") node=1; home=2-3; target=0-1 ;;
  *) fail "libvirt's placement of auto is $libvirt, not one node's CPUs"; home=x; target=0-1 ;;
esac
grep -q "placement='auto'" /run/libvirt/qemu/auto.xml || fail "the domain's status says no automatic placement"
placed_want="0:$target 1:$target e:$target"

# b. numaplace places it through libvirt; SIGTERM restores.
{
  printf 'state = "/tmp/np/state.json"\njournal = "/tmp/np/journal.jsonl"\ninterval = "1s"\n'
  printf '[scope]\nvms = true\n[policy]\nname = "static"\n'
  for t in 0 1 2 3 4 5 6 7 8 9 10 11; do
    printf '[[policy.pins]]\nprocess = "vm:auto"\nthread = %s\ncpus = "%s"\n' "$t" "$target"
  done
} > /tmp/np.toml
mkdir -p /tmp/np
$np -v run --config /tmp/np.toml 2> /tmp/np/run1.err &
d=$!
if wait_pins auto 150 "$placed_want"; then placed=$(pins auto); else placed=$(pins auto); fail "not placed through libvirt: $placed"; fi
echo "np-test: numaplace placed auto: $placed"
kill -TERM "$d"; wait "$d"
after_sigterm=$(pins auto)
echo "np-test: after SIGTERM: $after_sigterm"
[ "$after_sigterm" = "$libvirt" ] || fail "SIGTERM left $after_sigterm, not libvirt's $libvirt"

# c. kill -9, then a restart restores.
$np -v run --config /tmp/np.toml 2> /tmp/np/run2.err &
d=$!
if wait_pins auto 150 "$placed_want"; then placed_again=$(pins auto); else placed_again=$(pins auto); fail "not placed again: $placed_again"; fi
kill -KILL "$d"; wait "$d" 2>/dev/null
$np -v run --config /tmp/np.toml --policy default --rounds 1 2> /tmp/np/run3.err || fail "the restart failed"
after_restart=$(pins auto)
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

echo "@@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@"
printf '{"numad_node": %s, "libvirt_cpus": %s, "target": %s, "placed": %s, ' \
  "$(js "$node")" "$(js "$libvirt")" "$(js "$target")" "$(js "$placed")"
printf '"after_sigterm": %s, "placed_again": %s, "after_restart": %s, ' \
  "$(js "$after_sigterm")" "$(js "$placed_again")" "$(js "$after_restart")"
printf '"advise_owned": %s, "run_log": %s, "journal": %s, "failed": [' \
  "$(js "$(cat /tmp/np/advise.out)")" "$(js "$(cat /tmp/np/run1.err)")" \
  "$(js "$(cat /tmp/np/journal.jsonl 2>/dev/null)")"
sep=""
for f in "${failures[@]}"; do printf '%s%s' "$sep" "$(js "$f")"; sep=", "; done
printf ']}\n'
echo "@@NUMAPLACE-LIBVIRT-BED-JSON-END@@"
[ "${#failures[@]}" -eq 0 ]
