#!/bin/bash
# `numaplace exec` in the 2-node test-bed guest: commands started placed,
# their CPUs and memory policy read from /proc, their pages counted per node;
# returns the JSON.
#
# Usage: tests/vm/guest-exec-test.sh [OUT.json]
#
# Builds (release) numaplace and the numaplace-linux example touch_memory (maps
# MIB MiB, touches every page under the policy it was started with, prints
# `ready <pid>` and sleeps), fetches the kernel (fetch-kernel.sh, idempotent),
# packs an initramfs with both and a guest script that runs, one at a time,
# `numaplace exec OPTIONS -- touch_memory 32` in the background for each case:
#   nodes1       --nodes 1                  (memory preferred on node 1)
#   membind1     --nodes 1 --membind
#   interleave   --nodes 0-1 --interleave
#   many         --nodes 0-1                (MPOL_PREFERRED_MANY, kernel 6.1)
#   advised      --cpus 1 --memory 32M      (numad's pre-placement)
#   confined     --nodes 1, started under `taskset -c 0,2` (never widened)
# and for each waits for `ready <pid>` with the pid of the background job (the
# command took numaplace's pid: no fork), then records the job's
# Cpus_allowed_list and Mems_allowed_list (/proc/<pid>/status), the
# numa_maps line of its largest anonymous mapping (the policy word and the
# N<node>= page counts), numaplace's stderr line, and kills it. Also: the
# advised case's `--dry-run --json`, and the exit statuses of `exec -- sh -c
# 'exit 7'`, of a command not found and of `--nodes 5`. Prints it all as
# one object between @@NUMAPLACE-GUEST-EXEC-JSON-BEGIN@@ / -END@@ lines.
# Boots `boot.sh --nodes 2` and writes the JSON found between the markers
# (`\r` stripped) to OUT.json, or to stdout. The guest console goes to
# stderr. The checks are made by the qemu_guest_exec test
# (crates/numaplace/tests/long/qemu_guest_exec.rs).
#
# Exit status: 0 with the JSON written; otherwise non-zero with the reason on
# stderr (build failure, guest failure: boot.sh's status, no JSON on the
# console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 300) bounds the boot;
# CARGO (default cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-300}

begin="@@NUMAPLACE-GUEST-EXEC-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-EXEC-JSON-END@@"

log "building numaplace and touch_memory (release)"
build_numaplace
build_examples "the touch_memory example" touch_memory
fetch_kernel
make_tmp

# The guest side (busybox sh). Everything it prints lands on the console.
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
. /guest-lib.sh
echo "guest: nodes online: \$(cat /sys/devices/system/node/online)"
rc=0
add "\"node_cpus\": {\"0\": \"\$(cat /sys/devices/system/node/node0/cpulist)\", \"1\": \"\$(cat /sys/devices/system/node/node1/cpulist)\"}"
add "\"kernel\": \"\$(uname -r)\""

# run_case NAME [PREFIX...] -- EXEC-OPTIONS...: numaplace exec, what it set.
run_case() {
  name=\$1
  shift
  prefix=""
  while [ "\$1" != "--" ]; do prefix="\$prefix \$1"; shift; done
  shift
  \$prefix numaplace exec "\$@" -- touch_memory 32 > /tmp/\$name.out 2> /tmp/\$name.err &
  pid=\$!
  if ! wait_ready /tmp/\$name.out "\$pid" "numaplace exec \$*"; then
    cat /tmp/\$name.out /tmp/\$name.err
    rc=3
    add "\"\$name\": null"
    return
  fi
  cpus=\$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/\$pid/status)
  mems=\$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/\$pid/status)
  # The largest anonymous mapping: touch_memory's 32 MiB.
  awk '{ for (i = 2; i <= NF; i++) if (\$i ~ /^anon=/) { n = substr(\$i, 6) + 0; if (n > best) { best = n; line = \$0 } } }
       END { print line }' /proc/\$pid/numa_maps > /tmp/\$name.maps
  echo "guest: \$name: pid \$pid, CPUs \$cpus, mems \$mems: \$(cat /tmp/\$name.maps)"
  cat /tmp/\$name.err
  add "\"\$name\": {\"pid\": \$pid, \"cpus\": \"\$cpus\", \"mems\": \"\$mems\", \"numa_maps\": \$(json_text /tmp/\$name.maps), \"stderr\": \$(json_text /tmp/\$name.err)}"
  kill "\$pid"
  wait "\$pid" 2>/dev/null
}

run_case nodes1 -- --nodes 1
run_case membind1 -- --nodes 1 --membind
run_case interleave -- --nodes 0-1 --interleave
run_case many -- --nodes 0-1
if numaplace exec --cpus 1 --memory 32M --dry-run --json -- touch_memory 32 > /tmp/dry.json 2> /tmp/dry.err; then
  add "\"advised_dry_run\": \$(cat /tmp/dry.json)"
else
  echo "guest: exec --dry-run failed:"; cat /tmp/dry.err; rc=4
fi
run_case advised -- --cpus 1 --memory 32M
run_case confined taskset -c 0,2 -- --nodes 1

numaplace exec --nodes 1 -q -- sh -c 'exit 7'
add "\"status_exit_7\": \$?"
numaplace exec --nodes 1 -- numaplace-no-such-command 2> /tmp/nf.err
add "\"status_not_found\": \$?"
numaplace exec --nodes 5 -- true 2> /tmp/bad.err
add "\"status_bad_nodes\": \$?"
add "\"bad_nodes_stderr\": \$(json_text /tmp/bad.err)"
cat /tmp/nf.err /tmp/bad.err

print_results "$begin" "$end"
exit "\$rc"
GUEST

initrd="$tmp/guest-exec.cpio.gz"
pack_initramfs "$initrd" "$numaplace" "$examples/touch_memory"
boot_guest 2 "$timeout_s" "$initrd"
write_json "$begin" "$end"
