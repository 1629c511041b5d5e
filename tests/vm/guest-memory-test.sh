#!/bin/bash
# Boot the 2-node test-bed guest, allocate memory bound to node 1 there and
# capture what `numaplace tasks` reports for that process, as JSON.
#
# Usage: tests/vm/guest-memory-test.sh [OUT.json]
#
# Builds (release) numaplace and the numaplace-linux example alloc_on_node,
# fetches the kernel (fetch-kernel.sh, idempotent), packs an initramfs with
# both (dynamically linked: mkinitramfs.sh --bin-with-libs) and a guest script
# that runs `alloc_on_node 1 64` in the background, waits for its `ready <pid>`,
# runs `numaplace tasks --pid <pid> --interval 0 --json` and prints the JSON
# between @@NUMAPLACE-GUEST-JSON-BEGIN@@ / -END@@ lines on the console. Boots
# `boot.sh --nodes 2` and writes the JSON found between the markers (`\r`
# stripped) to OUT.json, or to stdout. The guest console goes to stderr.
#
# Exit status: 0 with the JSON written; otherwise non-zero with the reason on
# stderr (build failure, guest failure: boot.sh's status, no JSON on the console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 180) bounds the boot;
# NUMAPLACE_VM_NODES (2 or 4, default 2) picks the guest's layout and
# NUMAPLACE_VM_TARGET_NODE (default: the last node) where the memory goes;
# NUMAPLACE_VM_TOPOLOGY_OUT, if set, receives `numaplace topology --json` as
# the guest saw its machine; CARGO (default cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-180}
nodes=${NUMAPLACE_VM_NODES:-2}
case "$nodes" in 2|4) ;; *) die "NUMAPLACE_VM_NODES=$nodes: the test bed has layouts of 2 and 4 nodes" ;; esac
target_node=${NUMAPLACE_VM_TARGET_NODE:-$((nodes - 1))}
case "$target_node" in ''|*[!0-9]*) die "NUMAPLACE_VM_TARGET_NODE=$target_node: not a node number" ;; esac
[ "$target_node" -lt "$nodes" ] || die "NUMAPLACE_VM_TARGET_NODE=$target_node: the guest has nodes 0-$((nodes - 1))"

begin="@@NUMAPLACE-GUEST-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-JSON-END@@"
tbegin="@@NUMAPLACE-GUEST-TOPOLOGY-BEGIN@@"
tend="@@NUMAPLACE-GUEST-TOPOLOGY-END@@"

log "building numaplace and alloc_on_node (release)"
build_numaplace
build_examples "the alloc_on_node example" alloc_on_node
fetch_kernel
make_tmp

# The guest side (busybox sh). Everything it prints lands on the console.
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
echo "guest: nodes online: \$(cat /sys/devices/system/node/online)"
alloc_on_node $target_node 64 > /tmp/alloc.out 2> /tmp/alloc.err &
apid=\$!
i=0
until grep -q '^ready ' /tmp/alloc.out 2>/dev/null; do
  if ! kill -0 "\$apid" 2>/dev/null; then
    echo "guest: alloc_on_node exited before it was ready:"
    cat /tmp/alloc.err
    exit 3
  fi
  i=\$((i + 1))
  if [ "\$i" -gt 600 ]; then
    echo "guest: alloc_on_node not ready after 60 s"
    exit 4
  fi
  usleep 100000
done
pid=\$(sed -n 's/^ready //p' /tmp/alloc.out)
echo "guest: alloc_on_node ready, pid \$pid"
grep -H -e AnonPages -e MemUsed /sys/devices/system/node/node*/meminfo
numaplace tasks --pid "\$pid" --interval 0 --json > /tmp/np.json 2> /tmp/np.err
rc=\$?
if [ "\$rc" != 0 ]; then
  echo "guest: numaplace exited with \$rc:"
  cat /tmp/np.err
fi
echo "$begin"
cat /tmp/np.json
echo
echo "$end"
numaplace topology --json > /tmp/topo.json 2> /tmp/topo.err || { echo "guest: numaplace topology failed:"; cat /tmp/topo.err; rc=5; }
echo "$tbegin"
cat /tmp/topo.json
echo
echo "$tend"
kill "\$apid"
exit "\$rc"
GUEST

initrd="$tmp/guest-memory.cpio.gz"
pack_initramfs "$initrd" "$numaplace" "$examples/alloc_on_node"
boot_guest "$nodes" "$timeout_s" "$initrd"
write_json "$begin" "$end"
if [ -n "${NUMAPLACE_VM_TOPOLOGY_OUT:-}" ]; then
  console_between "$tbegin" "$tend" > "$NUMAPLACE_VM_TOPOLOGY_OUT" \
    || die "no $tbegin line on the console"
  log "wrote $NUMAPLACE_VM_TOPOLOGY_OUT"
fi
