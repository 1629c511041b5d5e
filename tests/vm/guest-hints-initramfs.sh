#!/bin/bash
# Pack the initramfs of the guest-hints QEMU test (crates/numaplace/tests/
# qemu_guest_hints.rs): numaplace (release), the virtio modules a
# virtio-serial port needs (Debian builds them as modules; taken from the
# kernel package fetch-kernel.sh downloaded), and a guest script that
#   1. loads the modules and waits for the port org.numaplace.hints.0;
#   2. starts `numaplace -v guest --interval 500ms` (the agent);
#   3. starts `taskset -c 1 busybox sh -c 'while :; do :; done'` (a user
#      program pinned to vCPU 1) and prints @@HINTS-PINNED@@;
#   4. waits for a line on the console (the host's test writes it), ends
#      the pinned program and prints @@HINTS-UNPINNED@@;
#   5. waits for another line, stops the agent (a port has one writer at a
#      time) and floods the port with /dev/urandom (megabytes of garbage),
#      printing @@HINTS-FLOODING@@;
#   6. waits for another line, stops the flood and exits 0.
#
# Usage: tests/vm/guest-hints-initramfs.sh OUT.cpio.gz
# The kernel is tests/vm/work/vmlinuz afterwards.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 1 ] || die "usage: $0 OUT.cpio.gz"
initrd=$1

build_numaplace
fetch_kernel
make_tmp

deb=$(find "$here/work/deb" -maxdepth 1 -name 'linux-image-*.deb' | head -n 1)
[ -n "$deb" ] || die "no kernel package in $here/work/deb (run tests/vm/fetch-kernel.sh --force)"
dpkg-deb -x "$deb" "$tmp/kernel" || die "dpkg-deb -x $deb failed"
mods=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_console)
adds=()
for m in "${mods[@]}"; do
  ko=$(find "$tmp/kernel/lib/modules" -name "$m.ko" | head -n 1)
  [ -n "$ko" ] || die "$m.ko is not in $(basename "$deb")"
  adds+=(--add "$ko=/lib/modules/$m.ko")
done

cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
set -u
for m in ${mods[*]}; do
  insmod /lib/modules/\$m.ko || { echo "guest: insmod \$m failed"; exit 1; }
done
i=0
until grep -qx org.numaplace.hints.0 /sys/class/virtio-ports/*/name 2>/dev/null; do
  i=\$((i + 1))
  [ \$i -le 200 ] || { echo "guest: no port org.numaplace.hints.0"; exit 1; }
  sleep 0.1
done
numaplace -v guest --interval 500ms &
agent=\$!
taskset -c 1 busybox sh -c 'while :; do :; done' &
spin=\$!
sleep 1
echo "guest: spinner \$spin allowed CPUs \$(grep Cpus_allowed_list /proc/\$spin/status)"
echo "@@HINTS-PINNED@@"
read -r _go
kill \$spin
wait \$spin 2>/dev/null
echo "@@HINTS-UNPINNED@@"
read -r _flood
# virtio_console lets one process at a time open a port: the agent goes,
# a hostile writer takes its place.
kill \$agent
wait \$agent
echo "guest: agent stopped (status \$?)"
port=\$(dirname "\$(grep -lx org.numaplace.hints.0 /sys/class/virtio-ports/*/name)")
port=/dev/\${port##*/}
cat /dev/urandom > "\$port" &
flood=\$!
echo "@@HINTS-FLOODING \$port@@"
read -r _done
kill \$flood
exit 0
GUEST

"$here/mkinitramfs.sh" --script "$tmp/guest.sh" "${adds[@]}" --bin-with-libs "$numaplace" "$initrd" \
  || die "mkinitramfs.sh failed"
log "wrote $initrd"
