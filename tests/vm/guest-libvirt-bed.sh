#!/bin/bash
# Boot the 2-node test-bed guest with a real libvirtd (the host's Debian
# libvirt, run as root in the guest) managing a TCG domain, and run a test
# script against it there; by default the demo tests/vm/libvirt-bed-demo.sh
# (virsh vcpupin / emulatorpin / numatune --live on the domain, with what
# libvirt did to the cgroups, the affinities and the pages after each).
#
# Usage: tests/vm/guest-libvirt-bed.sh [--guest-script FILE] [--bin FILE]...
#                                      [--accel tcg|tcg-single] [--memory MIB]
#                                      [OUT.json]
#
#   --guest-script F  the bash script run in the guest once libvirtd answers
#                     and the domain `bed` is defined (not started); default
#                     tests/vm/libvirt-bed-demo.sh. It runs as root in the
#                     guest's root (below) with cwd /bed and
#                     PATH=/bed/bin:/usr/sbin:/usr/bin:/sbin:/bin, and must
#                     print its JSON between
#                     @@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@ / -END@@ lines; its
#                     exit status becomes the guest's. Environment: BED_DOMAIN
#                     (bed), BED_XML (/bed/bed.xml, the domain's definition),
#                     BED_URI (qemu:///system), BED_PHASES (/bed/phases: one
#                     `name seconds` line per phase of the setup, for the JSON).
#   --bin F           a program copied into the guest's /bed/bin (repeatable).
#                     Static or dynamic: the guest root has the host's /usr,
#                     so a binary built on this host finds its libraries.
#   --accel A         boot.sh's --accel (default tcg: one host thread per vCPU).
#   --memory M        guest RAM in MiB (default 2048: 1 GiB per node).
#
# The guest (boot.sh --nodes 2: node0 = CPUs 0-1, node1 = CPUs 2-3, TCG):
#   1. /init's busybox script loads the virtio, 9p and 9pnet modules from the
#      kernel package fetch-kernel.sh downloaded and mounts two read-only 9p
#      shares of the host (QEMU -virtfs, security_model=none): /usr (Debian 12
#      is merged-/usr: /bin, /sbin, /lib, /lib64 are links into it) and /etc.
#      Only these two directories of the host are shared: not its whole root
#      (checkouts, /root, other mounts).
#   2. builds a root on a tmpfs: /usr the 9p mount (read-only, cache=loose),
#      /etc a copy of the host's (writable), /var a fresh tree, /proc, /sys
#      (with /sys/fs/cgroup, cgroup v2), /dev, /run, /tmp; chroots into it
#      and runs bash there (the rest runs in the chroot).
#   3. adds the user and group libvirt-qemu to /etc/passwd and /etc/group
#      (libvirt's QEMU driver looks its compiled-in defaults up even when
#      qemu.conf says root: "Failed to parse user 'libvirt-qemu'" otherwise),
#      writes /etc/libvirt/libvirtd.conf (unix sockets without auth, log to
#      /var/log/libvirt/libvirtd.log) and qemu.conf (user/group root,
#      security_driver "none", stdio_handler "file": no virtlogd), starts
#      `libvirtd` in the background and waits for `virsh version`, which
#      waits for the drivers' start, QEMU capability probing included.
#      No systemd, no D-Bus, no machined: libvirt makes its own cgroups
#      under the root cgroup: /machine/qemu-N-NAME.libvirt-qemu (a "domain
#      threaded" cgroup) with threaded children emulator, vcpu0, vcpu1, ...
#      (it enables cpuset cpu io memory in the root's subtree_control).
#      No network is defined (the
#      domain has no NIC), no virtlogd, no dnsmasq.
#   4. defines the domain `bed` (BED_XML): type qemu (TCG inside the TCG
#      guest), 2 vCPUs, 64 MiB, <numatune><memory mode='strict' nodeset='0'/>
#      (libvirt 9.0 refuses `numatune --nodeset --live` unless the mode is
#      'restrictive': the demo switches it with --config and restarts),
#      no NIC, and one IDE disk, /var/lib/libvirt/images/bed-halt.img,
#      whose boot sector halts (`sti; hlt; jmp` to the hlt): the vCPUs idle.
#      (Without a bootable disk SeaBIOS busy-waits to retry the boot and
#      vCPU 0 takes a whole guest CPU, slowing everything else down.)
#   5. runs the guest script, killed by a watchdog 60 s before the boot's
#      timeout (dmesg and the stacks of D-state tasks printed first).
# On failure of a setup step the guest prints libvirtd's log and the domain's
# QEMU log. The console goes to stderr; the JSON between the markers (`\r`
# stripped) goes to OUT.json, or to stdout. Phase times are printed on the
# console as `bed: phase NAME S s` lines (boot, root, libvirtd_socket,
# libvirtd_ready, domcapabilities, setup go into the demo's JSON; guest_script
# only on the console). Measured on a 2-core host: ~2.5 min in all, boot 5 s,
# root 7 s, libvirtd ready 16 s (QEMU capability probing), a domain start 12 s.
#
# Needs on the host: qemu-system-x86, busybox-static, cpio (fetch-kernel.sh),
# and libvirt-daemon (libvirtd), libvirt-daemon-driver-qemu, libvirt-clients
# (virsh); this script does not install them. No cargo build.
#
# Exit status: 0 with the JSON written; otherwise non-zero with the reason on
# stderr (guest failure: boot.sh's status; no JSON on the console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 480) bounds the boot.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

guest_script="$here/libvirt-bed-demo.sh"
bins=()
accel=tcg
memory=2048
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) parse_out_arg --help ;;
    --guest-script) [ $# -ge 2 ] || die "--guest-script needs a FILE"; guest_script=$2; shift 2 ;;
    --bin) [ $# -ge 2 ] || die "--bin needs a FILE"; bins+=("$2"); shift 2 ;;
    --accel) [ $# -ge 2 ] || die "--accel needs tcg or tcg-single"; accel=$2; shift 2 ;;
    --memory) [ $# -ge 2 ] || die "--memory needs MiB"; memory=$2; shift 2 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$out" ] || die "too many arguments (see --help)"; out=$1; shift ;;
  esac
done
[ -f "$guest_script" ] || die "guest script '$guest_script' not found"
for b in "${bins[@]}"; do [ -f "$b" ] || die "--bin '$b' not found"; done
timeout_s=${NUMAPLACE_VM_TIMEOUT:-480}

begin="@@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@"
end="@@NUMAPLACE-LIBVIRT-BED-JSON-END@@"

missing=""
for p in /usr/sbin/libvirtd:libvirt-daemon /usr/bin/virsh:libvirt-clients \
    /usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so:libvirt-daemon-driver-qemu \
    /usr/bin/qemu-system-x86_64:qemu-system-x86; do
  [ -e "${p%%:*}" ] || missing="$missing ${p#*:}"
done
[ -z "$missing" ] || die "missing on the host:$missing (apt-get install --no-install-recommends$missing)"

fetch_kernel
make_tmp

# The modules the 9p shares need, in load order (Debian builds them as
# modules; `depends=` of each .ko).
mods=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
  9pnet 9pnet_virtio netfs fscache 9p overlay)
deb=$(find "$here/work/deb" -maxdepth 1 -name 'linux-image-*.deb' | head -n 1)
[ -n "$deb" ] || die "no kernel package in $here/work/deb (run tests/vm/fetch-kernel.sh --force)"
start=$(date +%s)
dpkg-deb --fsys-tarfile "$deb" \
  | tar -x -C "$tmp" --wildcards $(printf '*/%s.ko ' "${mods[@]}") \
  || die "could not take the modules ${mods[*]} out of $(basename "$deb")"
adds=()
for m in "${mods[@]}"; do
  ko=$(find "$tmp/lib/modules" -name "$m.ko" | head -n 1)
  [ -n "$ko" ] || die "$m.ko is not in $(basename "$deb")"
  adds+=(--add "$ko=/bed/modules/$m.ko")
done
for b in "${bins[@]}"; do adds+=(--add "$b=/bed/bin/$(basename "$b")"); done

# ---- stage 1: busybox sh, the initramfs's /test.sh ---------------------------
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
mods="${mods[*]}"
GUEST
cat >> "$tmp/guest.sh" <<'GUEST'
up() { cut -d' ' -f1 /proc/uptime; }
boot=$(up)
echo "bed: phase boot $boot s"
t0=$(up)
fail() { echo "bed: error: $*"; exit 1; }
for m in $mods; do
  insmod /bed/modules/$m.ko || fail "insmod $m failed"
done
i=0
until [ "$(cat /sys/bus/virtio/drivers/9pnet_virtio/virtio*/mount_tag 2>/dev/null | tr '\0' ' ' | wc -w)" -ge 2 ]; do
  i=$((i + 1)); [ $i -le 100 ] || fail "the 9p shares hostusr/hostetc did not appear"
  usleep 100000
done
r=/newroot
mkdir -p $r
mount -t tmpfs -o mode=0755 bedroot $r || fail "tmpfs on $r"
mkdir -p $r/usr $r/etc $r/proc $r/sys $r/dev $r/run $r/tmp $r/root $r/var $r/bed /mnt/hostetc
opts=trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro
mount -t 9p -o $opts hostusr $r/usr || fail "mount 9p hostusr"
mount -t 9p -o $opts hostetc /mnt/hostetc || fail "mount 9p hostetc"
cp -a /mnt/hostetc/. $r/etc/ || fail "copying the host's /etc"
umount /mnt/hostetc
for d in bin sbin lib lib64; do ln -s usr/$d $r/$d; done
mkdir -p $r/var/lib $r/var/cache $r/var/log $r/var/tmp
ln -s /run $r/var/run
ln -s /run/lock $r/var/lock
chmod 1777 $r/tmp $r/var/tmp
mount -t proc proc $r/proc
mount -o rbind /sys $r/sys
mount -o rbind /dev $r/dev
mount -t tmpfs -o mode=0755 tmpfs $r/run
mount -t tmpfs -o mode=1777 tmpfs $r/tmp
cp -a /bed/. $r/bed/
rm -rf $r/bed/modules
echo "boot $boot" > $r/bed/phases
echo "root $(awk -v a="$t0" '{ printf "%.2f", $1 - a }' /proc/uptime)" >> $r/bed/phases
echo "bed: phase root $(tail -n 1 $r/bed/phases | cut -d' ' -f2) s"
exec chroot $r /usr/bin/env -i PATH=/bed/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  TERM=dumb LANG=C.UTF-8 /bin/bash /bed/stage2.sh
GUEST

# ---- stage 2: bash in the chroot ----------------------------------------------
cat > "$tmp/stage2.sh" <<'STAGE2'
#!/bin/bash
# The guest's root is ready: configure and start libvirtd, define the domain,
# run the guest script.
set -u
script_timeout=@SCRIPT_TIMEOUT@
export BED_DOMAIN=bed BED_XML=/bed/bed.xml BED_URI=qemu:///system BED_PHASES=/bed/phases
now() { cut -d' ' -f1 /proc/uptime; }
phase() { # NAME START: the seconds since START as phase NAME
  local s
  s=$(awk -v a="$2" '{ printf "%.2f", $1 - a }' /proc/uptime)
  echo "bed: phase $1 $s s"
  echo "$1 $s" >> "$BED_PHASES"
}
dump_logs() {
  echo "bed: ---- /var/log/libvirt/libvirtd.log (last 80 lines) ----"
  tail -n 80 /var/log/libvirt/libvirtd.log 2>/dev/null
  echo "bed: ---- libvirtd's stderr ----"
  tail -n 40 /var/log/libvirt/libvirtd.stderr 2>/dev/null
  for f in /var/log/libvirt/qemu/*.log; do
    [ -f "$f" ] || continue
    echo "bed: ---- $f (last 40 lines) ----"
    tail -n 40 "$f"
  done
  echo "bed: ---- dmesg (last 30 lines) ----"
  dmesg | tail -n 30
}
fail() { echo "bed: error: $*"; dump_logs; exit 1; }
cd /bed

mkdir -p /var/lib/libvirt/qemu /var/cache/libvirt/qemu /var/log/libvirt/qemu /run/lock \
  /etc/libvirt
# The QEMU driver looks its compiled-in default user and group up before it
# reads qemu.conf (Debian's libvirt-daemon-system would create them).
grep -q '^libvirt-qemu:' /etc/passwd \
  || echo 'libvirt-qemu:x:64055:64055:libvirt qemu:/var/lib/libvirt:/usr/sbin/nologin' >> /etc/passwd
grep -q '^libvirt-qemu:' /etc/group || echo 'libvirt-qemu:x:64055:' >> /etc/group
cat > /etc/libvirt/libvirtd.conf <<'EOF'
# the test bed's (guest-libvirt-bed.sh): root only, no polkit, no TCP
auth_unix_ro = "none"
auth_unix_rw = "none"
unix_sock_rw_perms = "0700"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
EOF
cat > /etc/libvirt/qemu.conf <<'EOF'
# the test bed's (guest-libvirt-bed.sh)
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
EOF

echo "bed: libvirt $(libvirtd --version | awk '{ print $NF }'), $(qemu-system-x86_64 --version | head -n 1)"
echo "bed: root cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers); subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
t=$(now)
libvirtd > /var/log/libvirt/libvirtd.stderr 2>&1 &
libvirtd_pid=$!
echo "$libvirtd_pid" > /run/bed-libvirtd.pid
i=0
until [ -S /run/libvirt/libvirt-sock ]; do
  kill -0 "$libvirtd_pid" 2>/dev/null || fail "libvirtd exited"
  i=$((i + 1)); [ $i -le 1200 ] || fail "no /run/libvirt/libvirt-sock after 120 s"
  sleep 0.1
done
phase libvirtd_socket "$t"
virsh -c "$BED_URI" version > /tmp/version.out 2>&1 || { cat /tmp/version.out; fail "virsh version failed"; }
cat /tmp/version.out
phase libvirtd_ready "$t"
t2=$(now)
virsh -c "$BED_URI" domcapabilities --virttype qemu > /tmp/domcaps.xml 2>&1 \
  || { cat /tmp/domcaps.xml; fail "virsh domcapabilities failed"; }
phase domcapabilities "$t2"
echo "bed: QEMU capabilities cache: $(ls /var/cache/libvirt/qemu/capabilities/ 2>/dev/null | tr '\n' ' ')"

# The domain's disk: a boot sector that halts (sti; hlt; jmp back to the
# hlt). Without a bootable disk SeaBIOS spins in its boot-retry wait and
# vCPU 0 takes a whole guest CPU (nested TCG); with it the vCPUs idle.
mkdir -p /var/lib/libvirt/images
img=/var/lib/libvirt/images/bed-halt.img
printf '\373\364\353\375' > "$img"
printf '\125\252' | dd of="$img" bs=1 seek=510 conv=notrunc status=none
truncate -s 1M "$img"

cat > "$BED_XML" <<'EOF'
<domain type='qemu'>
  <name>bed</name>
  <memory unit='MiB'>64</memory>
  <vcpu placement='static'>2</vcpu>
  <numatune>
    <memory mode='strict' nodeset='0'/>
  </numatune>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
  </os>
  <cpu mode='custom' match='exact' check='none'>
    <model fallback='allow'>qemu64</model>
  </cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='/var/lib/libvirt/images/bed-halt.img'/>
      <target dev='hda' bus='ide'/>
    </disk>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
virsh -c "$BED_URI" define "$BED_XML" || fail "virsh define failed"
phase setup "$t"

t=$(now)
echo "bed: running the guest script (for at most $script_timeout s)"
bash /bed/guest-script.sh &
script_pid=$!
# A watchdog: a guest script stuck for too long is killed after the kernel's
# last messages and the stacks of the processes in D state are printed.
(
  sleep "$script_timeout"
  echo "bed: error: the guest script still runs after $script_timeout s; dmesg and D-state tasks:"
  dmesg | tail -n 60
  for p in /proc/[0-9]*; do
    [ "$(awk '/^State:/ { print $2 }' "$p/status" 2>/dev/null)" = D ] || continue
    echo "bed: D ${p#/proc/} $(cat "$p/comm") wchan $(cat "$p/wchan")"
    cat "$p/stack" 2>/dev/null
  done
  kill "$script_pid"
) &
watchdog_pid=$!
wait "$script_pid"
rc=$?
kill "$watchdog_pid" 2>/dev/null
phase guest_script "$t"
[ "$rc" = 0 ] || { echo "bed: the guest script exited $rc"; dump_logs; }
if grep -q ' error : ' /var/log/libvirt/libvirtd.log 2>/dev/null; then
  echo "bed: ---- errors in libvirtd.log ----"
  grep ' error : ' /var/log/libvirt/libvirtd.log | tail -n 30
fi
kill "$libvirtd_pid" 2>/dev/null
exit "$rc"
STAGE2

# The guest script's watchdog fires 60 s before boot.sh's timeout.
script_timeout=$((timeout_s - 60))
[ "$script_timeout" -ge 60 ] || script_timeout=60
sed -i "s/@SCRIPT_TIMEOUT@/$script_timeout/" "$tmp/stage2.sh"
log "guest script: $guest_script"
"$here/mkinitramfs.sh" --script "$tmp/guest.sh" "${adds[@]}" \
  --add "$tmp/stage2.sh=/bed/stage2.sh" --add "$guest_script=/bed/guest-script.sh" \
  "$tmp/guest-libvirt-bed.cpio.gz" || die "mkinitramfs.sh failed"
log "initramfs packed ($(($(date +%s) - start)) s with the modules)"

# shellcheck disable=SC2054  # the commas belong to QEMU option values
boot_guest 2 "$timeout_s" "$tmp/guest-libvirt-bed.cpio.gz" --accel "$accel" --memory "$memory" \
  --qemu-arg -virtfs --qemu-arg local,path=/usr,mount_tag=hostusr,security_model=none,readonly=on \
  --qemu-arg -virtfs --qemu-arg local,path=/etc,mount_tag=hostetc,security_model=none,readonly=on
write_json "$begin" "$end"
