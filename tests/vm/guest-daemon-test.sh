#!/bin/bash
# Boot the 2-node test-bed guest and run the daemon there on a real program:
# numad-like placement, restore on SIGTERM, restore after kill -9 + restart,
# auto (the default policy) in its counter-free fallback, and page-moving
# throughput of numaplace against numactl's migratepages.
#
# Usage: tests/vm/guest-daemon-test.sh [OUT.json]
#
# Builds (release) numaplace and the numaplace-linux examples numa_hog,
# alloc_on_node and move_memory, fetches the kernel (fetch-kernel.sh,
# idempotent), installs numactl on the host if /usr/bin/migratepages is
# missing (root: apt-get), packs an initramfs with all of them and
# migratepages (mkinitramfs.sh --bin-with-libs) and boots `boot.sh --nodes 2
# --accel tcg-single` (one host thread for every vCPU: with one each, the
# guest sat in a kernel soft lockup while numaplace moved pages; tests/vm/README.md).
# The guest (automatic NUMA balancing turned off, so that only numaplace
# moves pages):
#   a. starts `alloc_on_node 0 160` (ballast: node 0 gets less free memory
#      than node 1) and `numa_hog 200 2` (its pages on node 0, its threads allowed on
#      every CPU) and records its pages per node (numa_maps) and every
#      thread's Cpus_allowed_list;
#   b. runs `numaplace run --policy numad-like --pid P --interval 500ms` in the
#      background (it, and all but the hogs, on node 0's CPUs: their own CPU
#      use counts there in numad's choice) and waits (<= NUMAPLACE_GUEST_PLACE_WAIT s, default 90) until
#      every thread is allowed node 1's CPUs only and >= 90% of the pages are
#      on node 1;
#   c. SIGTERMs it, waits for it and records the affinities;
#   d. starts it again, waits until the threads are on node 1, kill -9s it,
#      records the affinities, then runs `numaplace run --policy default
#      --rounds 1` (which restores at start) and records them again;
#   e. kills the hog and starts a fresh `numa_hog 200 2` (pages on node 0
#      again), runs `numaplace run --pid P --interval 500ms` with no
#      --policy (auto, the default; the guest has no PMU, so auto makes
#      numad's placement unjudged and says so at start) with its own journal
#      (/tmp/np/auto.jsonl), waits as in b. until threads and pages are on
#      node 1, SIGTERMs it and records the affinities, its stderr and its
#      journal ("auto_*" keys);
#   f. kills that hog, then twice, alternately, times moving a fresh
#      `alloc_on_node 0 256` from node 0 to node 1 with `migratepages PID 0 1`
#      and with `move_memory PID 1` (numaplace's HostActuator::move_memory),
#      with /proc/uptime (10 ms) around each, pages counted from numa_maps;
#   h. (run after e., before f.) mounts cgroup v2, makes a cpuset cgroup
#      of node 1's CPUs and both nodes' memory, moves a fresh `numa_hog 120 2` (pages first touched on
#      node 0) into it and narrows one of its threads with taskset to the
#      cgroup's last CPU; runs `numaplace advise --policy numad-like` on it
#      and then `numaplace run --policy numad-like` until >= 90% of its pages
#      are on node 1, SIGTERMs it ("cgroup_*" keys);
#   g. prints the results as one JSON object (the journal of b.-d. included,
#      as "journal": [...]) between @@NUMAPLACE-GUEST-DAEMON-JSON-BEGIN@@ /
#      -END@@ lines, and that raw journal between
#      @@NUMAPLACE-GUEST-JOURNAL-BEGIN@@ / -END@@ lines.
# The JSON found between the markers (`\r` stripped) goes to OUT.json, or to
# stdout. The guest console goes to stderr. The checks are made by the
# qemu_guest_daemon test (crates/numaplace/tests/long/qemu_guest_daemon.rs).
#
# Exit status: 0 with the JSON written (whatever it says); otherwise non-zero
# with the reason on stderr (build failure, guest failure: boot.sh's status,
# no JSON on the console).
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 900) bounds the boot;
# NUMAPLACE_GUEST_PLACE_WAIT (seconds, default 90) bounds each wait for the
# placement; CARGO (default cargo); CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-900}
place_wait=${NUMAPLACE_GUEST_PLACE_WAIT:-90}
case "$place_wait" in ''|*[!0-9]*) die "NUMAPLACE_GUEST_PLACE_WAIT must be whole seconds" ;; esac

begin="@@NUMAPLACE-GUEST-DAEMON-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-DAEMON-JSON-END@@"

log "building numaplace and the examples numa_hog, alloc_on_node, move_memory (release)"
build_numaplace
build_examples "the numaplace-linux examples" numa_hog alloc_on_node move_memory

migratepages=/usr/bin/migratepages
if [ ! -x "$migratepages" ]; then
  log "$migratepages missing: installing Debian's numactl"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends numactl >&2 \
    || { "${sudo_cmd[@]}" apt-get update -q >&2 \
      && "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends numactl >&2; } \
    || die "cannot install numactl (needed for migratepages)"
  [ -x "$migratepages" ] || die "$migratepages still missing after installing numactl"
fi

fetch_kernel
make_tmp

# The guest side (busybox sh). Everything it prints lands on the console.
# Results are collected as `"key": value` fragments in /tmp/res (guest-lib.sh).
cat > "$tmp/guest.sh" <<GUEST
#!/bin/sh
NODE0=\$(cat /sys/devices/system/node/node0/cpulist)
NODE1=\$(cat /sys/devices/system/node/node1/cpulist)
ALL=\$(cat /sys/devices/system/cpu/online)
PLACE_WAIT=$place_wait
echo "guest: nodes online \$(cat /sys/devices/system/node/online); node0 CPUs \$NODE0, node1 CPUs \$NODE1"
. /guest-lib.sh
# A file's content as a JSON value (it must be JSON), or null.
json_file() { if [ -s "\$1" ]; then cat "\$1"; else echo null; fi; }
# Pages of process \$1 per node, from numa_maps: {"0":N,"1":N}.
pages() {
  awk '{ for (i = 2; i <= NF; i++) if (\$i ~ /^N[0-9]+=/) { split(substr(\$i, 2), a, "="); s[a[1]] += a[2] } }
       END { printf "{\"0\":%d,\"1\":%d}", s[0], s[1] }' "/proc/\$1/numa_maps" 2>/dev/null || echo null
}
# Percent of process \$1's pages that are on node 1.
node1_pct() {
  awk '{ for (i = 2; i <= NF; i++) if (\$i ~ /^N[0-9]+=/) { split(substr(\$i, 2), a, "="); s[a[1]] += a[2] } }
       END { t = s[0] + s[1]; if (t == 0) print 0; else printf "%d\n", 100 * s[1] / t }' "/proc/\$1/numa_maps" 2>/dev/null || echo 0
}
# Every thread's Cpus_allowed_list: {"tid":"list",...}.
affinity() {
  first=1
  printf '{'
  for st in /proc/\$1/task/*/status; do
    tid=\${st#/proc/\$1/task/}; tid=\${tid%/status}
    a=\$(awk '/^Cpus_allowed_list:/ { print \$2 }' "\$st" 2>/dev/null) || continue
    [ \$first = 1 ] || printf ','
    first=0
    printf '"%s":"%s"' "\$tid" "\$a"
  done
  printf '}'
}
# Whether every thread of process \$2 is allowed exactly CPUs \$1.
threads_on() {
  for st in /proc/\$2/task/*/status; do
    a=\$(awk '/^Cpus_allowed_list:/ { print \$2 }' "\$st" 2>/dev/null)
    [ "\$a" = "\$1" ] || return 1
  done
  return 0
}
placed() { threads_on "\$NODE1" "\$HOG" && [ "\$(node1_pct "\$HOG")" -ge 90 ]; }
# auto brings the threads to their memory on node 0: pinned there, the
# pages still there.
at_home() { threads_on "\$NODE0" "\$HOG" && [ "\$(node1_pct "\$HOG")" -le 10 ]; }
pinned() { threads_on "\$NODE1" "\$HOG"; }
# wait_for SECONDS CMD...: polls CMD every 0.5 s; prints the hundredths waited;
# status 0 when CMD succeeded in time.
wait_for() {
  lim=\$((\$1 * 100)); shift
  t0=\$(centis)
  while :; do
    if "\$@"; then echo \$((\$(centis) - t0)); return 0; fi
    if [ \$((\$(centis) - t0)) -gt \$lim ]; then echo \$((\$(centis) - t0)); return 1; fi
    usleep 500000
  done
}
# stop PID SIGNAL: sends it, waits (<= 60 s) for the exit; its status in STOP_RC.
stop() {
  kill -\$2 "\$1"
  i=0
  until ended "\$1"; do
    i=\$((i + 1))
    if [ \$i -gt 600 ]; then
      echo "guest: pid \$1 still running 60 s after SIG\$2; killing it" >&2
      kill -9 "\$1"
      break
    fi
    usleep 100000
  done
  wait "\$1"
  STOP_RC=\$?
}
daemon() {
  numaplace -v run --policy numad-like --pid "\$HOG" --interval 500ms \
    --state /tmp/np/state.json --journal /tmp/np/journal.jsonl 2> "/tmp/np/\$1.err" &
  D=\$!
}
show_log() { echo "guest: --- numaplace \$1 stderr ---"; cat "/tmp/np/\$1.err"; echo "guest: ---"; }

add "\"node_cpus\": {\"0\":\"\$NODE0\",\"1\":\"\$NODE1\"}"
add "\"all_cpus\": \"\$ALL\""
add "\"numa_balancing_was\": \"\$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)\""
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
add "\"numa_balancing\": \"\$(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)\""
add "\"thp\": \"\$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)\""
mkdir -m 700 /tmp/np
# Everything but the hogs runs on node 0's CPUs: this shell and what it
# starts, the daemons among them. numad's placement counts every thread's
# CPU use against the node it last ran on: other threads' use on node 1
# (under TCG the daemon's and this shell's polling are not small) once made
# node 0 look freer at the first round, and numad-like put the hog there
# for its first minute. On node 0 their use weighs where the ballast
# already does. The hogs are started on every CPU (numaplace leaves a
# narrower affinity alone; busybox taskset execs its program, so \$! is the
# hog's pid).
taskset -p -c "\$NODE0" \$\$ > /dev/null

# a. the hog: memory on node 0, threads anywhere.
# Another program holds BALLAST MiB of node 0 (bound there, out of scope), so
# node 1 has clearly more free memory: without it the hog's own 200 MiB make
# node 0 numad-like's best node, rightly, and nothing would move.
BALLAST=160
: > /tmp/ballast.out
alloc_on_node 0 \$BALLAST > /tmp/ballast.out 2> /tmp/ballast.err &
BAL=\$!
wait_ready /tmp/ballast.out "\$BAL" "alloc_on_node 0 \$BALLAST" || cat /tmp/ballast.err
add "\"ballast_mib_on_node0\": \$BALLAST"
: > /tmp/hog.out
taskset -c "\$ALL" numa_hog 200 2 > /tmp/hog.out 2> /tmp/hog.err &
HOG=\$!
if ! wait_ready /tmp/hog.out "\$HOG" numa_hog; then
  cat /tmp/hog.err
  add "\"error\": \"numa_hog did not start\""
  add "\"hog_stderr\": \$(json_text /tmp/hog.err)"
else
  echo "guest: numa_hog ready, pid \$HOG"
  add "\"hog_pid\": \$HOG"
  add "\"initial\": {\"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG)}"
  grep -H -e MemFree /sys/devices/system/node/node*/meminfo
  add "\"memfree_kb_at_start\": {\"0\": \$(awk '/MemFree/ { print \$4 }' /sys/devices/system/node/node0/meminfo), \"1\": \$(awk '/MemFree/ { print \$4 }' /sys/devices/system/node/node1/meminfo)}"

  # b. the daemon places it.
  daemon run1
  echo "guest: numaplace run started (pid \$D); waiting for the placement"
  waited=\$(wait_for \$PLACE_WAIT placed); ok=\$?
  echo "guest: placed=\$ok after \$waited hundredths: pages \$(pages \$HOG), affinity \$(affinity \$HOG)"
  add "\"after_place\": {\"ok\": \$([ \$ok = 0 ] && echo true || echo false), \"waited_centis\": \$waited, \"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG), \"state\": \$(json_file /tmp/np/state.json)}"

  # c. SIGTERM restores.
  stop \$D TERM; rc=\$STOP_RC
  show_log run1
  add "\"after_sigterm\": {\"daemon_status\": \$rc, \"affinity\": \$(affinity \$HOG), \"pages\": \$(pages \$HOG), \"state\": \$(json_file /tmp/np/state.json)}"

  # d. kill -9, then a restart restores.
  daemon run2
  echo "guest: numaplace run started again (pid \$D); waiting for the pinning"
  waited=\$(wait_for \$PLACE_WAIT pinned); ok=\$?
  add "\"after_repin\": {\"ok\": \$([ \$ok = 0 ] && echo true || echo false), \"waited_centis\": \$waited, \"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG)}"
  stop \$D 9; rc=\$STOP_RC
  show_log run2
  add "\"after_kill9\": {\"daemon_status\": \$rc, \"affinity\": \$(affinity \$HOG), \"state\": \$(json_file /tmp/np/state.json)}"
  numaplace -v run --policy default --pid "\$HOG" --state /tmp/np/state.json --rounds 1 \
    --interval 100ms --journal /tmp/np/journal.jsonl 2> /tmp/np/run3.err
  rc=\$?
  show_log run3
  add "\"after_restart\": {\"daemon_status\": \$rc, \"affinity\": \$(affinity \$HOG), \"state\": \$(json_file /tmp/np/state.json), \"stderr\": \$(json_text /tmp/np/run3.err)}"
  stop \$HOG TERM

  # e. auto, the default policy (no --policy), on a fresh hog whose pages
  # are on node 0 (first touched there) and whose threads were then moved
  # to node 1 and let run anywhere: its threads far from its memory. No
  # PMU here, so numad's placement, unjudged; auto's choice of node is the
  # one that holds the memory, so the threads go back to node 0.
  : > /tmp/hog.out
  taskset -c "\$NODE0" numa_hog 200 2 > /tmp/hog.out 2> /tmp/hog.err &
  HOG=\$!
  if ! wait_ready /tmp/hog.out "\$HOG" "numa_hog (auto)"; then
    cat /tmp/hog.err
    add "\"error\": \"numa_hog did not start for auto\""
    add "\"hog_stderr\": \$(json_text /tmp/hog.err)"
  else
    taskset -a -p -c "\$NODE1" \$HOG > /dev/null
    usleep 500000
    taskset -a -p -c "\$ALL" \$HOG > /dev/null
    add "\"auto_hog_pid\": \$HOG"
    add "\"auto_initial\": {\"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG)}"
    numaplace -v run --pid "\$HOG" --interval 500ms \
      --state /tmp/np/state.json --journal /tmp/np/auto.jsonl 2> /tmp/np/auto.err &
    D=\$!
    echo "guest: numaplace run with no --policy started (pid \$D); waiting for the placement"
    waited=\$(wait_for \$PLACE_WAIT at_home); ok=\$?
    echo "guest: auto placed=\$ok after \$waited hundredths: pages \$(pages \$HOG), affinity \$(affinity \$HOG)"
    add "\"auto_place\": {\"ok\": \$([ \$ok = 0 ] && echo true || echo false), \"waited_centis\": \$waited, \"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG), \"state\": \$(json_file /tmp/np/state.json)}"
    stop \$D TERM; rc=\$STOP_RC
    show_log auto
    echo "guest: --- auto's journal ---"; cat /tmp/np/auto.jsonl 2>/dev/null; echo "guest: ---"
    add "\"auto_sigterm\": {\"daemon_status\": \$rc, \"affinity\": \$(affinity \$HOG), \"pages\": \$(pages \$HOG), \"state\": \$(json_file /tmp/np/state.json), \"stderr\": \$(json_text /tmp/np/auto.err)}"
    add "\"auto_journal\": \$(json_lines /tmp/np/auto.jsonl)"
    stop \$HOG TERM
  fi
fi

# h. (after e.) a hog confined by a cpuset cgroup (v2) to node 1's CPUs, with the
# memory nodes of both, its pages first touched on node 0: numad-like
# places it within its cgroup's CPUs (its memory moves to node 1), and a
# thread narrowed inside the cgroup (taskset) is left alone, advise
# saying which and why.
[ -f /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup
echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/box
echo "\$NODE1" > /sys/fs/cgroup/box/cpuset.cpus
echo 0-1 > /sys/fs/cgroup/box/cpuset.mems
: > /tmp/hog.out
taskset -c "\$ALL" numa_hog 120 2 > /tmp/hog.out 2> /tmp/hog.err &
HOG=\$!
if ! wait_ready /tmp/hog.out "\$HOG" "numa_hog (cgroup)"; then
  cat /tmp/hog.err
  add "\"error\": \"numa_hog did not start for the cgroup case\""
else
  echo \$HOG > /sys/fs/cgroup/box/cgroup.procs
  NARROW=\$(ls /proc/\$HOG/task | grep -v "^\$HOG\$" | head -n 1)
  LAST=\$(echo "\$NODE1" | sed 's/.*[-,]//')
  taskset -p -c "\$LAST" "\$NARROW" > /dev/null
  echo "guest: cgroup box: CPUs \$(cat /sys/fs/cgroup/box/cpuset.cpus.effective), mems \$(cat /sys/fs/cgroup/box/cpuset.mems.effective); hog \$HOG, thread \$NARROW on CPU \$LAST"
  add "\"cgroup_initial\": {\"hog_pid\": \$HOG, \"narrowed_tid\": \$NARROW, \"cpus\": \"\$(cat /sys/fs/cgroup/box/cpuset.cpus.effective)\", \"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG)}"
  numaplace advise --policy numad-like --pid "\$HOG" --interval 500ms > /tmp/np/cg_advise.out 2> /tmp/np/cg_advise.err
  add "\"cgroup_advise\": {\"status\": \$?, \"stdout\": \$(json_text /tmp/np/cg_advise.out), \"stderr\": \$(json_text /tmp/np/cg_advise.err)}"
  numaplace -v run --policy numad-like --pid "\$HOG" --interval 500ms \
    --state /tmp/np/state.json --journal /tmp/np/cg.jsonl 2> /tmp/np/cg.err &
  D=\$!
  in_box() { [ "\$(node1_pct "\$HOG")" -ge 90 ]; }
  waited=\$(wait_for \$PLACE_WAIT in_box); ok=\$?
  echo "guest: cgroup placed=\$ok after \$waited hundredths: pages \$(pages \$HOG), affinity \$(affinity \$HOG)"
  add "\"cgroup_place\": {\"ok\": \$([ \$ok = 0 ] && echo true || echo false), \"waited_centis\": \$waited, \"pages\": \$(pages \$HOG), \"affinity\": \$(affinity \$HOG)}"
  stop \$D TERM; rc=\$STOP_RC
  show_log cg
  add "\"cgroup_sigterm\": {\"daemon_status\": \$rc, \"affinity\": \$(affinity \$HOG), \"stderr\": \$(json_text /tmp/np/cg.err)}"
  add "\"cgroup_journal\": \$(json_lines /tmp/np/cg.jsonl)"
  stop \$HOG TERM
fi
stop \$BAL TERM

# f. throughput: the same 256 MiB from node 0 to node 1, each tool twice.
runs=""
for rep in 1 2; do
  for tool in migratepages numaplace; do
    : > /tmp/alloc.out
    alloc_on_node 0 256 > /tmp/alloc.out 2> /tmp/alloc.err &
    A=\$!
    if ! wait_ready /tmp/alloc.out "\$A" alloc_on_node; then
      cat /tmp/alloc.err
      runs="\$runs\${runs:+,}{\"tool\":\"\$tool\",\"rep\":\$rep,\"error\":\"alloc_on_node did not start\"}"
      continue
    fi
    before=\$(pages \$A)
    : > /tmp/move.out
    t0=\$(centis)
    if [ \$tool = migratepages ]; then
      migratepages "\$A" 0 1 > /tmp/move.err 2>&1
      mrc=\$?
    else
      move_memory "\$A" 1 > /tmp/move.out 2> /tmp/move.err
      mrc=\$?
    fi
    t1=\$(centis)
    after=\$(pages \$A)
    echo "guest: \$tool rep \$rep: status \$mrc, \$((t1 - t0)) hundredths, pages \$before -> \$after \$(cat /tmp/move.out /tmp/move.err)"
    runs="\$runs\${runs:+,}{\"tool\":\"\$tool\",\"rep\":\$rep,\"status\":\$mrc,\"centis\":\$((t1 - t0)),\"before\":\$before,\"after\":\$after,\"detail\":\$(json_file /tmp/move.out),\"stderr\":\$(json_text /tmp/move.err)}"
    stop \$A TERM
  done
done
add "\"throughput\": {\"mib\": 256, \"runs\": [\$runs]}"

# g. everything out.
print_results "$begin" "$end"
exit 0
GUEST

initrd="$here/work/guest-daemon.cpio.gz"
pack_initramfs "$initrd" "$numaplace" "$examples/numa_hog" "$examples/alloc_on_node" \
  "$examples/move_memory" "$migratepages"
boot_guest 2 "$timeout_s" "$initrd" --accel tcg-single
write_json "$begin" "$end"
