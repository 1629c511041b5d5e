#!/bin/bash
# Boot the 2-node test-bed guest with the kernel's automatic NUMA balancing
# ON and check that numaplace and the kernel do not fight over pages.
#
# Usage: tests/vm/guest-balancing-test.sh [OUT.json]
#
# Builds (release) numaplace and the numaplace-linux examples numa_hog and
# alloc_on_node, fetches the kernel (fetch-kernel.sh, idempotent), packs an
# initramfs and boots `boot.sh --nodes 2 --accel tcg-single` (one host thread
# for every vCPU, tests/vm/README.md; 4 CPUs: node 0 = 0-1, node 1 =
# 2-3). The guest:
#   a. turns kernel.numa_balancing to 1 and transparent huge pages off (base
#      pages move one by one at a steady pace; a 2 MiB page moves whole or not
#      at all), keeps this shell and what it starts (the sampling, the
#      daemon) on node 1's CPUs, so that nothing but numaplace draws the hog's
#      threads there: left alone, they run on idle node 0 beside their memory
#      and the kernel has no reason to move it;
#   b. starts `alloc_on_node 0 ALLOC_MIB` (memory under an explicit policy,
#      `bind:0`: the kernel's balancing never moves it) and `numa_hog HOG_MIB 2`
#      (memory first touched on node 0, threads allowed everywhere, started
#      with every CPU), and lets them run PRE_S (3) seconds;
#   c. runs `numaplace run` with the `static` policy (every thread of numa_hog
#      pinned to node 1's CPUs, both programs' memory to node 1) and the
#      default `[engine] memory_mover` ("where-kernel-cannot"), interval 1s;
#   d. samples every SAMPLE_S seconds for SAMPLES samples (0 = just before the
#      daemon starts): the uptime, both programs' pages per node (numa_maps),
#      and /proc/vmstat's numa_pages_migrated, pgmigrate_success and
#      numa_hint_faults;
#   e. records 2 rounds with `numaplace record` (the hinting faults per node
#      of each thread, the signal that needs no PMU), prints `numaplace
#      doctor` and keeps its JSON as "doctor", then stops the daemon with
#      SIGTERM;
#   g. runs `numaplace run` with `auto` (counters made up from CPU time by
#      --counters-from, every process in scope, interval 1s, its own state
#      file and journal) until it turns kernel.numa_balancing off as an
#      experiment (at most AUTO_WAIT_S, 120 s), records the state file then,
#      kills it with SIGKILL mid-trial, and starts `numaplace run` again on
#      the same state file, which puts the setting back at start; records
#      the setting after the crash and after the restart, both daemons'
#      stderr and auto's journal;
#   f. prints the results as one JSON object between
#      @@NUMAPLACE-GUEST-BALANCING-JSON-BEGIN@@ / -END@@ lines (the journal as
#      "journal", the daemon's stderr as "daemon_stderr", the recording's
#      lines, header and snapshots, as "recorded").
# The checks are made by the qemu_guest_balancing test
# (crates/numaplace/tests/long/qemu_guest_balancing.rs).
#
# Exit status: 0 with the JSON written (whatever it says); otherwise non-zero
# with the reason on stderr.
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 300) bounds the boot;
# NUMAPLACE_BALANCING_HOG_MIB (default 64), NUMAPLACE_BALANCING_SAMPLES
# (default 13), NUMAPLACE_BALANCING_SAMPLE_S (default 2); CARGO (default
# cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
# auto's trial of the kernel's setting comes after its other experiments,
# whose timing under emulation varies with the host's load (35 s to over
# 120 s seen): up to 240 s for it, within the guest's 480 s.
timeout_s=${NUMAPLACE_VM_TIMEOUT:-480}
hog_mib=${NUMAPLACE_BALANCING_HOG_MIB:-64}
samples=${NUMAPLACE_BALANCING_SAMPLES:-13}
sample_s=${NUMAPLACE_BALANCING_SAMPLE_S:-2}
alloc_mib=16
for v in "$hog_mib" "$samples" "$sample_s"; do
  case "$v" in ''|*[!0-9]*|0) die "NUMAPLACE_BALANCING_* must be whole numbers >= 1" ;; esac
done

begin="@@NUMAPLACE-GUEST-BALANCING-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-BALANCING-JSON-END@@"

log "building numaplace and the examples numa_hog, alloc_on_node (release)"
build_numaplace
build_examples "the numaplace-linux examples" numa_hog alloc_on_node
fetch_kernel
make_tmp

cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
HOG_MIB=$hog_mib
ALLOC_MIB=$alloc_mib
SAMPLES=$samples
SAMPLE_S=$sample_s
AUTO_WAIT_S=240
. /guest-lib.sh
ALL=\$(cat /sys/devices/system/cpu/online)
NODE0=\$(cat /sys/devices/system/node/node0/cpulist)
NODE1=\$(cat /sys/devices/system/node/node1/cpulist)
echo "guest: CPUs \$ALL, node 0 = \$NODE0, node 1 = \$NODE1"
# Pages of process \$1 per node, from numa_maps: {"0":N,"1":N}.
pages() {
  awk '{ for (i = 2; i <= NF; i++) if (\$i ~ /^N[0-9]+=/) { split(substr(\$i, 2), a, "="); s[a[1]] += a[2] } }
       END { printf "{\"0\":%d,\"1\":%d}", s[0], s[1] }' "/proc/\$1/numa_maps" 2>/dev/null || echo null
}
vm() { awk -v k="\$1" '\$1 == k { print \$2; f = 1 } END { if (!f) print 0 }' /proc/vmstat; }
sample() {
  printf '{"centis":%s,"hog":%s,"alloc":%s,"numa_pages_migrated":%s,"pgmigrate_success":%s,"numa_hint_faults":%s}' \
    "\$(centis)" "\$(pages \$HOG)" "\$(pages \$ALLOC)" "\$(vm numa_pages_migrated)" \
    "\$(vm pgmigrate_success)" "\$(vm numa_hint_faults)"
}

add "\"node_cpus\": {\"0\":\"\$NODE0\",\"1\":\"\$NODE1\"}"
add "\"hog_mib\": \$HOG_MIB"
add "\"alloc_mib\": \$ALLOC_MIB"
add "\"sample_s\": \$SAMPLE_S"
# a. the kernel balances; no huge pages; this shell on node 0.
echo 1 > /proc/sys/kernel/numa_balancing
add "\"numa_balancing\": \"\$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)\""
echo never > /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
add "\"thp\": \"\$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)\""
taskset -p -c "\$NODE1" \$\$ > /dev/null
mkdir -m 700 /tmp/np

# b. memory under an explicit policy, and the hog.
: > /tmp/alloc.out
alloc_on_node 0 \$ALLOC_MIB > /tmp/alloc.out 2> /tmp/alloc.err &
ALLOC=\$!
: > /tmp/hog.out
taskset -c "\$ALL" numa_hog \$HOG_MIB 2 > /tmp/hog.out 2> /tmp/hog.err &
HOG=\$!
if ! wait_ready /tmp/alloc.out "\$ALLOC" alloc_on_node || ! wait_ready /tmp/hog.out "\$HOG" numa_hog; then
  cat /tmp/alloc.err /tmp/hog.err
  add "\"error\": \"alloc_on_node or numa_hog did not start\""
else
  add "\"hog_pid\": \$HOG"
  add "\"alloc_pid\": \$ALLOC"
  add "\"hog_threads\": [\$(ls /proc/\$HOG/task | tr '\n' ',' | sed 's/,\$//')]"
  echo "guest: alloc_on_node \$ALLOC, numa_hog \$HOG: hog \$(pages \$HOG), alloc \$(pages \$ALLOC)"
  # Left alone a moment: where the kernel keeps the hog by itself.
  sleep 3
  echo "guest: after 3 s alone: hog \$(pages \$HOG), its threads last ran on CPUs \$(for t in /proc/\$HOG/task/*; do sed 's/.*) //' \$t/stat | cut -d' ' -f37; done | tr '\n' ' ')"

  # c. the daemon: numa_hog's threads to node 1, both programs' memory to
  # node 1; memory_mover left at its default.
  cat > /tmp/np/static.toml <<CONF
[policy]
name = "static"
[[policy.pins]]
process = "numa_hog"
thread = 0
cpus = "\$NODE1"
[[policy.pins]]
process = "numa_hog"
thread = 1
cpus = "\$NODE1"
[[policy.pins]]
process = "numa_hog"
thread = 2
cpus = "\$NODE1"
[[policy.memory]]
process = "numa_hog"
node = 1
[[policy.memory]]
process = "alloc_on_node"
node = 1
[scope]
pids = [\$HOG, \$ALLOC]
CONF
  S="\$(sample)"
  numaplace -v run --config /tmp/np/static.toml --interval 1s \
    --state /tmp/np/state.json --journal /tmp/np/journal.jsonl 2> /tmp/np/run.err &
  D=\$!
  echo "guest: numaplace run started (pid \$D)"

  # d. samples while it runs.
  i=1
  while [ \$i -lt \$SAMPLES ]; do
    sleep \$SAMPLE_S
    S="\$S,\$(sample)"
    echo "guest: sample \$i: hog \$(pages \$HOG), alloc \$(pages \$ALLOC), numa_pages_migrated \$(vm numa_pages_migrated)"
    i=\$((i + 1))
  done
  add "\"samples\": [\$S]"

  # e. the signal, recorded; then SIGTERM restores the affinities.
  numaplace record --interval 1s --duration 1s -o /tmp/np/rec.jsonl 2> /tmp/np/rec.err \
    || { echo "guest: numaplace record failed"; cat /tmp/np/rec.err; }
  add "\"recorded\": \$(json_lines /tmp/np/rec.jsonl)"
  add "\"record_stderr\": \$(json_text /tmp/np/rec.err)"
  # What numaplace can read and do here (balancing on, 2 nodes, no PMU).
  echo "guest: --- numaplace doctor ---"; numaplace doctor; echo "guest: ---"
  # Exit status 3: the default policy (auto) reads counters the guest lacks.
  numaplace doctor --json > /tmp/np/doctor.json 2> /tmp/np/doctor.err
  st=\$?
  [ "\$st" = 0 ] || [ "\$st" = 3 ] \
    || { echo "guest: numaplace doctor failed (\$st)"; cat /tmp/np/doctor.err; echo null > /tmp/np/doctor.json; }
  add "\"doctor\": \$(cat /tmp/np/doctor.json)"
  kill -TERM \$D
  i=0
  until ended \$D; do
    i=\$((i + 1))
    if [ \$i -gt 600 ]; then kill -9 \$D; break; fi
    usleep 100000
  done
  wait \$D
  add "\"daemon_status\": \$?"
  echo "guest: --- numaplace stderr ---"; cat /tmp/np/run.err; echo "guest: ---"
  add "\"daemon_stderr\": \$(json_text /tmp/np/run.err)"
  add "\"hog_allowed_after\": \"\$(awk '/^Cpus_allowed_list:/ { print \$2 }' /proc/\$HOG/status)\""

  # g. auto and the kernel's setting, a crash in the middle of its trial.
  cat > /tmp/np/rules.toml <<'RULES'
# counters numaplace cannot measure here, made up per thread from its CPU time
[[thread]]
comm = "hog-*"
llc_mpki = 40.0
ipc = 1.0
ghz = 2.0
RULES
  numaplace -v run --counters-from /tmp/np/rules.toml --all --interval 1s \
    --state /tmp/np/auto-state.json --journal /tmp/np/auto-journal.jsonl 2> /tmp/np/auto.err &
  A=\$!
  echo "guest: numaplace run (auto) started (pid \$A)"
  off=false
  i=0
  while [ \$i -lt \$((AUTO_WAIT_S * 10)) ]; do
    if [ "\$(cat /proc/sys/kernel/numa_balancing)" = 0 ]; then off=true; break; fi
    if ended \$A; then break; fi
    usleep 100000
    i=\$((i + 1))
  done
  echo "guest: auto turned kernel.numa_balancing off: \$off after \$((i / 10)) s"
  add "\"auto_turned_off\": \$off"
  add "\"auto_state_during\": \$(cat /tmp/np/auto-state.json 2>/dev/null || echo null)"
  kill -9 \$A
  wait \$A
  add "\"after_crash\": \"\$(cat /proc/sys/kernel/numa_balancing)\""
  numaplace -v run --policy numad-like --pid \$HOG --interval 5s \
    --state /tmp/np/auto-state.json 2> /tmp/np/restart.err &
  R=\$!
  i=0
  until grep -q "restored" /tmp/np/restart.err 2>/dev/null || ended \$R || [ \$i -gt 300 ]; do
    usleep 100000
    i=\$((i + 1))
  done
  kill -TERM \$R
  # Bounded: a daemon that does not stop is a failure with its stderr, not
  # a guest that runs into its timeout.
  i=0
  until ended \$R || [ \$i -gt 300 ]; do
    usleep 100000
    i=\$((i + 1))
  done
  if ! ended \$R; then
    echo "guest: the restarted daemon did not stop within 30 s of SIGTERM; its stderr:"
    cat /tmp/np/restart.err
    kill -9 \$R
  fi
  wait \$R
  add "\"restart_status\": \$?"
  add "\"after_restart\": \"\$(cat /proc/sys/kernel/numa_balancing)\""
  add "\"auto_stderr\": \$(json_text /tmp/np/auto.err)"
  add "\"restart_stderr\": \$(json_text /tmp/np/restart.err)"
  add "\"auto_journal\": \$(json_lines /tmp/np/auto-journal.jsonl)"
  kill -TERM \$HOG \$ALLOC
fi

# f. everything out.
print_results "$begin" "$end"
exit 0
GUEST

initrd="$tmp/guest-balancing.cpio.gz"
pack_initramfs "$initrd" "$numaplace" "$examples/numa_hog" "$examples/alloc_on_node"
boot_guest 2 "$timeout_s" "$initrd" --accel tcg-single
write_json "$begin" "$end"
