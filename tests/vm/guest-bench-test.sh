#!/bin/bash
# Run [Rao13]'s micro-benchmark (`numaplace bench`) in the 2-node test-bed
# guest, with remote memory, and its fig4a experiment; return the JSON.
#
# Usage: tests/vm/guest-bench-test.sh [OUT.json]
#
# Builds (release) numaplace, fetches the kernel (fetch-kernel.sh,
# idempotent), packs an initramfs with it (dynamically linked:
# mkinitramfs.sh --bin-with-libs) and a guest script that
#   a. takes the first CPU of node 1 (/sys/devices/system/node/node1/cpulist)
#      and runs `numaplace bench --threads 1 --cpus <it> --memory-node 0
#      --working-set 32MiB --loops 2 --json`: one thread on node 1 walking a
#      list bound to node 0 (remote memory);
#   b. runs `numaplace bench --experiment fig4a --quick`, as a table (for the
#      console) and as JSON;
#   c. prints {"node1_cpu": N, "single": <a>, "fig4a": <b's JSON>} between
#      @@NUMAPLACE-GUEST-BENCH-JSON-BEGIN@@ / -END@@ lines on the console.
# Boots `boot.sh --nodes 2` and writes the JSON found between the markers
# (`\r` stripped) to OUT.json, or to stdout. The guest console goes to
# stderr. The checks are made by the qemu_guest_bench test
# (crates/numaplace/tests/long/qemu_guest_bench.rs).
#
# Exit status: 0 with the JSON written; otherwise non-zero with the reason on
# stderr (build failure, guest failure: boot.sh's status, no JSON on the
# console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 600) bounds the boot;
# CARGO (default cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-600}

begin="@@NUMAPLACE-GUEST-BENCH-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-BENCH-JSON-END@@"

log "building numaplace (release)"
build_numaplace
fetch_kernel
make_tmp

# The guest side (busybox sh). Everything it prints lands on the console.
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
echo "guest: nodes online: \$(cat /sys/devices/system/node/online)"
list=\$(cat /sys/devices/system/node/node1/cpulist)
cpu=\${list%%[,-]*}
echo "guest: node 1 has CPUs \$list; the benchmark thread goes on CPU \$cpu"
rc=0
if ! numaplace bench --threads 1 --cpus "\$cpu" --memory-node 0 --working-set 32MiB \
    --loops 2 --json > /tmp/single.json 2> /tmp/single.err; then
  echo "guest: numaplace bench failed:"; cat /tmp/single.err; rc=3
fi
cat /tmp/single.json
start=\$(date +%s)
numaplace bench --experiment fig4a --quick 2>&1 || rc=4
echo "guest: fig4a --quick (table) took \$((\$(date +%s) - start)) s"
if ! numaplace bench --experiment fig4a --quick --json > /tmp/fig4a.json 2> /tmp/fig4a.err; then
  echo "guest: numaplace bench --experiment fig4a failed:"; cat /tmp/fig4a.err; rc=5
fi
echo "$begin"
printf '{"node1_cpu": %s, "single": ' "\$cpu"
cat /tmp/single.json
printf ', "fig4a": '
cat /tmp/fig4a.json
echo '}'
echo "$end"
exit "\$rc"
GUEST

initrd="$tmp/guest-bench.cpio.gz"
pack_initramfs "$initrd" "$numaplace"
boot_guest 2 "$timeout_s" "$initrd"
write_json "$begin" "$end"
