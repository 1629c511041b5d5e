#!/bin/bash
# Boot the 4-node test-bed guest and run the dino policy there on two real
# memory-hungry programs, with counters made up by --counters-from (the guest
# has no PMU, so LLC misses cannot be measured).
#
# Usage: tests/vm/guest-dino-test.sh [OUT.json]
#
# Builds (release) numaplace and the numaplace-linux example numa_hog, fetches
# the kernel (fetch-kernel.sh, idempotent), packs an initramfs and boots
# `boot.sh --nodes 4 --accel tcg-single` (8 CPUs, 2 per node, all run by one
# host thread: see boot.sh). The guest (automatic NUMA
# balancing turned off, so that only numaplace moves pages):
#   a. starts `numa_hog MIB 1` twice (NUMAPLACE_DINO_HOG_MIB, default 48): each
#      pins itself to node 0, touches its memory there (first touch), puts
#      every thread's affinity back to the whole machine and then has its one
#      worker thread (`hog-0`) read the memory in a loop; records each one's
#      pages per node (numa_maps) and every thread's Cpus_allowed_list and
#      last CPU;
#   b. writes /tmp/rules.toml, one rule: threads named `hog-*` miss the LLC 40
#      times per 1000 instructions at IPC 1 and 2 GHz, and runs
#      `numaplace run --policy dino --counters-from /tmp/rules.toml --all
#      --interval 1s --rounds NUMAPLACE_DINO_ROUNDS (default 40)` in the
#      background;
#   c. polls (every 0.25 s, until the daemon ends, at most 90 s) until both
#      worker threads are each allowed the CPUs of one node only, on
#      different nodes, and >= 90% of each program's pages are on its
#      worker's node; records that state. How long that takes depends on how
#      fast the host emulates the guest (5 s here, a loaded CI machine more):
#      the rounds are a bound, not the expected time;
#   d. stops the daemon with SIGTERM once placed (or waits <= 120 s for it
#      to end its rounds), which restores the affinities it changed, and
#      records the threads and pages again;
#   e. prints the results as one JSON object (the journal as "journal": [...],
#      the daemon's stderr as "daemon_stderr") between
#      @@NUMAPLACE-GUEST-DINO-JSON-BEGIN@@ / -END@@ lines, and the raw journal
#      between @@NUMAPLACE-GUEST-JOURNAL-BEGIN@@ / -END@@ lines.
# The JSON found between the markers (`\r` stripped) goes to OUT.json, or to
# stdout. The guest console goes to stderr. The checks are made by the
# qemu_guest_dino test (crates/numaplace/tests/long/qemu_guest_dino.rs).
#
# Exit status: 0 with the JSON written (whatever it says); otherwise non-zero
# with the reason on stderr (build failure, guest failure: boot.sh's status,
# no JSON on the console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 600) bounds the boot;
# NUMAPLACE_DINO_ROUNDS, NUMAPLACE_DINO_HOG_MIB as above; CARGO (default
# cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-600}
rounds=${NUMAPLACE_DINO_ROUNDS:-40}
hog_mib=${NUMAPLACE_DINO_HOG_MIB:-48}
case "$rounds" in ''|*[!0-9]*|0) die "NUMAPLACE_DINO_ROUNDS must be a whole number >= 1" ;; esac
case "$hog_mib" in ''|*[!0-9]*|0) die "NUMAPLACE_DINO_HOG_MIB must be a whole number >= 1" ;; esac

begin="@@NUMAPLACE-GUEST-DINO-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-DINO-JSON-END@@"

log "building numaplace and the example numa_hog (release)"
build_numaplace
build_examples "numa_hog" numa_hog
fetch_kernel
make_tmp

# The guest side (busybox sh). Everything it prints lands on the console.
# Results are collected as `"key": value` fragments in /tmp/res (guest-lib.sh).
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
ROUNDS=$rounds
HOG_MIB=$hog_mib
ALL=\$(cat /sys/devices/system/cpu/online)
echo "guest: nodes online \$(cat /sys/devices/system/node/online), CPUs \$ALL"
. /guest-lib.sh

# CPU -> node, from the cpuN/nodeM links: "0:0 1:0 2:1 ...".
CPUNODE=""
NODE_CPUS=""
for d in /sys/devices/system/node/node[0-9]*; do
  n=\${d##*/node}
  NODE_CPUS="\$NODE_CPUS\${NODE_CPUS:+,}\"\$n\":\"\$(cat \$d/cpulist)\""
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  cpu=\${c##*/cpu}
  for l in \$c/node[0-9]*; do
    [ -e "\$l" ] && CPUNODE="\$CPUNODE \$cpu:\${l##*/node}"
  done
done
# The nodes of a CPU list ("0-1,4" -> "0,2"), ascending.
list_nodes() {
  echo "\$1" | awk -v map="\$CPUNODE" '
    BEGIN { n = split(map, m, " "); for (i = 1; i <= n; i++) { split(m[i], kv, ":"); node[kv[1]] = kv[2] } }
    { k = split(\$0, parts, ",")
      for (i = 1; i <= k; i++) {
        if (parts[i] == "") continue
        lo = parts[i]; hi = parts[i]
        if (index(parts[i], "-")) { split(parts[i], r, "-"); lo = r[1]; hi = r[2] }
        for (c = lo + 0; c <= hi + 0; c++) if (c in node) seen[node[c]] = 1
      } }
    END { out = ""; for (x = 0; x < 1024; x++) if (x in seen) out = out (out == "" ? "" : ",") x; print out }'
}
# Pages of process \$1 per node, from numa_maps: {"0":N,"1":N,...}.
pages() {
  awk '{ for (i = 2; i <= NF; i++) if (\$i ~ /^N[0-9]+=/) { split(substr(\$i, 2), a, "="); s[a[1]] += a[2] } }
       END { printf "{"; f = 1; for (x = 0; x < 1024; x++) if (x in s) { printf "%s\"%d\":%d", (f ? "" : ","), x, s[x]; f = 0 } printf "}" }' \
    "/proc/\$1/numa_maps" 2>/dev/null || echo null
}
# Percent of process \$1's pages that are on node \$2.
pct_on() {
  awk -v want="\$2" '{ for (i = 2; i <= NF; i++) if (\$i ~ /^N[0-9]+=/) { split(substr(\$i, 2), a, "="); t += a[2]; if (a[1] == want) s += a[2] } }
       END { if (t == 0) print 0; else printf "%d\n", 100 * s / t }' "/proc/\$1/numa_maps" 2>/dev/null || echo 0
}
allowed() { awk '/^Cpus_allowed_list:/ { print \$2 }' "/proc/\$1/task/\$2/status" 2>/dev/null; }
# The CPU thread \$2 of process \$1 last ran on (stat field 39).
last_cpu() { sed 's/.*) //' "/proc/\$1/task/\$2/stat" 2>/dev/null | cut -d' ' -f37; }
# The worker thread (comm hog-0) of numa_hog \$1.
worker() {
  for t in /proc/\$1/task/*; do
    [ "\$(cat \$t/comm 2>/dev/null)" = hog-0 ] && { echo \${t##*/}; return 0; }
  done
  return 1
}
# Process \$1 as JSON: its pages per node and every thread's comm, allowed
# CPUs and their nodes, last CPU and its node.
proc_json() {
  printf '{"pid":%s,"pages":%s,"threads":[' "\$1" "\$(pages \$1)"
  first=1
  for t in /proc/\$1/task/*; do
    tid=\${t##*/}
    a=\$(allowed \$1 \$tid); lc=\$(last_cpu \$1 \$tid)
    [ \$first = 1 ] || printf ','
    first=0
    printf '{"tid":%s,"comm":"%s","allowed":"%s","allowed_nodes":"%s","last_cpu":%s,"last_node":"%s"}' \
      "\$tid" "\$(cat \$t/comm)" "\$a" "\$(list_nodes "\$a")" "\${lc:-null}" "\$(list_nodes "\$lc")"
  done
  printf ']}'
}
# Whether both workers are on one node each, different ones, with >= 90% of
# their process's pages there.
placed() {
  na=\$(list_nodes "\$(allowed \$A \$WA)"); nb=\$(list_nodes "\$(allowed \$B \$WB)")
  case "\$na\$nb" in *,*|"") return 1 ;; esac
  [ \${#na} -ge 1 ] && [ \${#nb} -ge 1 ] && [ "\$na" != "\$nb" ] || return 1
  [ "\$(pct_on \$A \$na)" -ge 90 ] && [ "\$(pct_on \$B \$nb)" -ge 90 ]
}

add "\"node_cpus\": {\$NODE_CPUS}"
add "\"all_cpus\": \"\$ALL\""
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
add "\"numa_balancing\": \"\$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)\""
add "\"hog_mib\": \$HOG_MIB"
add "\"rounds\": \$ROUNDS"
mkdir -m 700 /tmp/np

# a. two hogs, memory on node 0, threads allowed everywhere.
start_hog() {
  : > /tmp/hog\$1.out
  numa_hog \$HOG_MIB 1 > /tmp/hog\$1.out 2> /tmp/hog\$1.err &
  H=\$!
  if ! wait_ready /tmp/hog\$1.out "\$H" "numa_hog \$1"; then
    cat /tmp/hog\$1.err
    add "\"error\": \"numa_hog \$1 did not start: \$(tr -d '"\\\\' < /tmp/hog\$1.err | head -c 300)\""
    return 1
  fi
}
if start_hog a && A=\$H && start_hog b && B=\$H && WA=\$(worker \$A) && WB=\$(worker \$B); then
  echo "guest: numa_hog a = \$A (worker \$WA), b = \$B (worker \$WB)"
  # Let the workers run a moment where the scheduler puts them.
  sleep 1
  add "\"before\": {\"a\": \$(proc_json \$A), \"b\": \$(proc_json \$B)}"
  echo "guest: before: a \$(pages \$A), b \$(pages \$B)"
  grep -H MemFree /sys/devices/system/node/node*/meminfo

  # b. the daemon, with made-up counters for the workers.
  cat > /tmp/rules.toml <<'RULES'
# counters numaplace cannot measure here, made up per thread from its CPU time
[[thread]]
comm = "hog-*"   # numa_hog's worker threads (the main thread only waits)
llc_mpki = 40.0  # a devil: at least 2, at most 100
ipc = 1.0
ghz = 2.0
RULES
  t0=\$(centis)
  numaplace -v run --policy dino --counters-from /tmp/rules.toml --all --interval 1s \
    --rounds \$ROUNDS --state /tmp/np/state.json --journal /tmp/np/journal.jsonl \
    2> /tmp/np/dino.err &
  D=\$!
  echo "guest: numaplace run --policy dino started (pid \$D)"

  # c. wait for the placement while the daemon runs.
  ok=1
  j=0
  while ! ended \$D; do
    if placed; then ok=0; break; fi
    j=\$((j + 1))
    # A daemon that neither places nor ends within 90 s has failed: go on
    # to stop it and print what it said.
    if [ \$j -gt 360 ]; then echo "guest: nothing placed after 90 s"; break; fi
    usleep 250000
  done
  waited=\$((\$(centis) - t0))
  echo "guest: placed=\$ok after \$waited hundredths: a \$(pages \$A) on CPUs \$(allowed \$A \$WA), b \$(pages \$B) on CPUs \$(allowed \$B \$WB)"
  add "\"placed\": {\"ok\": \$([ \$ok = 0 ] && echo true || echo false), \"waited_centis\": \$waited, \"a\": \$(proc_json \$A), \"b\": \$(proc_json \$B)}"

  # d. the daemon stops (SIGTERM once placed: the rounds are only a bound)
  # and restores the affinities.
  [ \$ok = 0 ] && kill -TERM \$D
  i=0
  until ended \$D; do
    i=\$((i + 1))
    if [ \$i -gt 1200 ]; then echo "guest: numaplace still running after 120 s; SIGTERM"; kill -TERM \$D; fi
    if [ \$i -gt 1800 ]; then kill -9 \$D; break; fi
    usleep 100000
  done
  wait \$D
  rc=\$?
  echo "guest: numaplace exited with status \$rc after \$(((\$(centis) - t0))) hundredths"
  echo "guest: --- numaplace stderr ---"; cat /tmp/np/dino.err; echo "guest: ---"
  add "\"after_exit\": {\"daemon_status\": \$rc, \"a\": \$(proc_json \$A), \"b\": \$(proc_json \$B)}"
  add "\"daemon_stderr\": \$(json_text /tmp/np/dino.err)"
  kill -TERM \$A \$B
fi

# e. everything out.
print_results "$begin" "$end"
exit 0
GUEST

initrd="$here/work/guest-dino.cpio.gz"
pack_initramfs "$initrd" "$numaplace" "$examples/numa_hog"
boot_guest 4 "$timeout_s" "$initrd" --accel tcg-single
write_json "$begin" "$end"
