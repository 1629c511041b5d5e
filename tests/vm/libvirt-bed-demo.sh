#!/bin/bash
# The default guest script of guest-libvirt-bed.sh (bash, run as root in the
# guest's chroot once libvirtd answers and the domain $BED_DOMAIN is defined):
# libvirt's live tuning commands on a running TCG domain, and what they did.
#
# Steps (each a `virsh` command; after most, a snapshot, below):
#   start               `virsh start` (2 vCPUs, 64 MiB, numatune strict
#                       nodeset 0, a boot sector that halts: idle vCPUs)
#   vcpupin             `virsh vcpupin DOM 0 3 --live`
#   emulatorpin         `virsh emulatorpin DOM 2-3 --live`
#   numatune_strict     `virsh numatune DOM --nodeset 1 --live` on the strict
#                       domain: a probe (libvirt 9.0 refuses it: "change of
#                       nodeset for running domain requires restrictive numa
#                       mode"); its failure is data, not a failure
#   destroy_strict      `virsh destroy`
#   config_restrictive  `virsh numatune DOM --mode restrictive --nodeset 0
#                       --config` (cgroup cpuset.mems only, no memory policy)
#   start_restrictive   `virsh start`
#   numatune            `virsh numatune DOM --nodeset 1 --live` (snapshot
#                       after 3 s: whether the pages went to node 1)
#   probe_outside_cpuset
#                       a probe: the domain's own cgroup narrowed by hand to
#                       cpuset.cpus 0-1 (as another manager might), then
#                       `virsh vcpupin DOM 1 3 --live`, a CPU outside it;
#                       the cgroup's cpuset.cpus is written back afterwards
#                       (empty is refused for a populated cgroup: then the
#                       parent's effective CPUs)
#   probe_restored      no command: a snapshot after that write-back (the
#                       vCPU's cgroup keeps the cpuset.cpus libvirt wrote
#                       before its affinity call failed)
#   destroy             `virsh destroy`, and whether the domain's cgroup
#                       directory went with it
# A snapshot: one virsh run of `vcpuinfo`, `vcpupin`, `emulatorpin`,
# `numatune`, `qemu-monitor-command {"execute":"query-cpus-fast"}` (the vCPU
# thread ids) and `qemu-monitor-command --hmp 'info registers'` (vCPU 0's IP
# and HLT: the boot sector's hlt), QEMU's pid, every QEMU thread's
# comm, cgroup, Cpus_allowed_list and Mems_allowed_list, the domain's cgroup
# (QEMU's, without the trailing /emulator) and the cgroups from its parent
# down (cgroup.type, cpuset.cpus[.effective], cpuset.mems[.effective]), and
# QEMU's pages per node in /proc/PID/numa_maps (all, anonymous only) with the
# number of mappings per memory policy; QEMU's command line after a start.
#
# Prints one JSON object between @@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@ and
# -END@@ lines:
#   {"libvirt_version", "qemu_version", "kernel", "phases": {NAME: seconds},
#    "root_cgroup": {"controllers", "subtree_control"},
#    "steps": [{"name", "command", "rc", "seconds", "stdout", "stderr",
#               "probe": bool, "snapshot": SNAPSHOT or null, ...}],
#    "failed": [the commands that failed, probes excepted]}
# SNAPSHOT = {"qemu_pid", "domain_cgroup", "vcpuinfo", "vcpupin",
#   "emulatorpin", "numatune", "vcpu_threads": {"0": tid, ...}, "vcpu0_ip",
#   "vcpu0_halted",
#   "threads": [{"tid", "comm", "cgroup", "cpus_allowed_list",
#   "mems_allowed_list"}], "cgroups": [{"path", "type", "cpus",
#   "cpus_effective", "mems", "mems_effective"}], "pages": {"N0": n, ...},
#   "anon_pages": {...}, "policies": {"default": mappings, ...},
#   "qemu_cmdline" (start steps only)}.
# Extra step members: destroy steps "cgroup_before", "cgroup_gone"; the
# outside-cpuset probe "domain_cgroup_cpus_before", "domain_cgroup_cpus_written".
# Exits 1 if a command failed (probes excepted) or a snapshot's queries did.
set -u
dom=${BED_DOMAIN:-bed}
uri=${BED_URI:-qemu:///system}
phases=${BED_PHASES:-/bed/phases}
begin="@@NUMAPLACE-LIBVIRT-BED-JSON-BEGIN@@"
end="@@NUMAPLACE-LIBVIRT-BED-JSON-END@@"
sep_line="@@BED-SEP@@"
failures=/tmp/demo-failed
: > "$failures"
failed() { echo "$1" >> "$failures"; echo "demo: FAILED: $1" >&2; }

# A string as a JSON string (bash only: no process; the guest is slow to
# start one under TCG).
js() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/\\t}
  s=${s//$'\r'/}
  s=${s//$'\n'/\\n}
  printf '"%s"' "$s"
}
# Uptime in hundredths of a second, into the variable named $1.
centis() { local up rest; read -r up rest < /proc/uptime; printf -v "$1" '%s' "${up/./}"; }
secs() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }

# v ARGS...: virsh (bounded to 120 s); sets v_rc, v_out, v_err, v_secs and
# prints the command and its output on stderr (the console).
v() {
  local t0 t1 line
  centis t0
  v_out=$(timeout 120 virsh -c "$uri" "$@" 2>/tmp/v.err)
  v_rc=$?
  v_err=$(< /tmp/v.err)
  centis t1
  v_secs=$(secs $((t1 - t0)))
  {
    echo "demo: virsh $* -> status $v_rc (${v_secs} s)"
    [ -z "$v_out" ] || while IFS= read -r line; do echo "demo:   $line"; done <<< "${v_out%%?AX=*}"
    [ -z "$v_err" ] || while IFS= read -r line; do echo "demo:   stderr: $line"; done <<< "$v_err"
  } >&2
}

qemu_pid() { local p=""; [ -r "/run/libvirt/qemu/$dom.pid" ] && read -r p < "/run/libvirt/qemu/$dom.pid"; echo "$p"; }
# The domain's cgroup: QEMU's (cgroup v2 line `0::PATH`), without /emulator.
domain_cgroup() {
  local line c=""
  while IFS= read -r line; do
    case "$line" in 0::*) c=${line#0::} ;; esac
  done < "/proc/$1/cgroup" 2>/dev/null
  printf '%s' "${c%/emulator}"
}

# The snapshot's /proc, cgroup and numa_maps part, made by one awk (a
# process per file read would take minutes under TCG). Input: -v pid, cg
# (the domain cgroup), tids, dirs (cgroup directories), q (prefix of the
# virsh sections' files), cmdline (a file or ""), con (console lines' file).
snapshot_awk='
function repl(s, from, to,   out, i) {
  out = ""
  while ((i = index(s, from)) > 0) { out = out substr(s, 1, i - 1) to; s = substr(s, i + length(from)) }
  return out s
}
function esc(s) { s = repl(s, "\\", "\\\\"); s = repl(s, "\"", "\\\""); s = repl(s, "\t", "\\t"); s = repl(s, "\r", ""); return "\"" repl(s, "\n", "\\n") "\"" }
function all(f,   l, s, n) { s = ""; n = 0; while ((getline l < f) > 0) s = s (n++ ? "\n" : "") l; close(f); return s }
function first(f,   l) { if ((getline l < f) > 0) { close(f); return l } close(f); return "\001" }
function jfirst(f,   l) { l = first(f); return l == "\001" ? "null" : esc(l) }
function show(f,   l) { l = first(f); return l == "\001" ? "-" : "\047" l "\047" }
function plain(f,   l) { l = first(f); return l == "\001" ? "-" : l }
function field(f, key,   l) {
  while ((getline l < f) > 0) if (index(l, key) == 1) { close(f); return substr(l, length(key) + 1) }
  close(f); return ""
}
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
BEGIN {
  name[0] = "vcpuinfo"; name[1] = "vcpupin"; name[2] = "emulatorpin"; name[3] = "numatune"
  printf "{\"qemu_pid\": %s", pid == "" ? "null" : pid
  for (i = 0; i < 4; i++) printf ", \"%s\": %s", name[i], esc(all(q i))
  s = all(q 4); out = ""; n = 0
  while (match(s, /"thread-id": *[0-9]+, *"props"/)) {
    t = substr(s, RSTART + 11, RLENGTH - 11); gsub(/[^0-9]/, "", t)
    s = substr(s, RSTART + RLENGTH)
    if (!match(s, /"cpu-index": *[0-9]+/)) break
    c = substr(s, RSTART + 11, RLENGTH - 11); gsub(/[^0-9]/, "", c)
    out = out (n++ ? ", " : "") "\"" c "\": " t
  }
  printf ", \"vcpu_threads\": {%s}", out
  s = all(q 5); eip = ""; hlt = "null"
  if (match(s, /[ER]IP=[0-9a-f]+/)) eip = substr(s, RSTART + 4, RLENGTH - 4)
  if (match(s, /HLT=[01]/)) hlt = substr(s, RSTART + 4, 1) == "1" ? "true" : "false"
  printf ", \"vcpu0_ip\": %s, \"vcpu0_halted\": %s", esc(eip), hlt
  if (pid == "" || first("/proc/" pid "/comm") == "\001") {
    printf ", \"domain_cgroup\": null, \"threads\": [], \"cgroups\": [], \"pages\": null, \"anon_pages\": null, \"policies\": null}"
    print "demo:   QEMU is not running" > con
    exit
  }
  if (cmdline != "") printf ", \"qemu_cmdline\": %s", esc(all(cmdline))
  printf ", \"domain_cgroup\": %s, \"threads\": [", esc(cg)
  print "demo: QEMU pid " pid ", domain cgroup " cg > con
  nt = split(tids, T, " "); sep = ""
  for (i = 1; i <= nt; i++) {
    d = "/proc/" pid "/task/" T[i]
    comm = first(d "/comm")
    if (comm == "\001") continue
    cgt = field(d "/cgroup", "0::")
    cpus = trim(field(d "/status", "Cpus_allowed_list:"))
    mems = trim(field(d "/status", "Mems_allowed_list:"))
    printf "%s{\"tid\": %s, \"comm\": %s, \"cgroup\": %s, \"cpus_allowed_list\": %s, \"mems_allowed_list\": %s}", sep, T[i], esc(comm), esc(cgt), esc(cpus), esc(mems)
    printf "demo:   thread %s \047%s\047 cgroup %s Cpus_allowed_list %s Mems_allowed_list %s\n", T[i], comm, cgt, cpus, mems > con
    sep = ", "
  }
  printf "], \"cgroups\": ["
  nd = split(dirs, D, " "); sep = ""
  for (i = 1; i <= nd; i++) {
    d = D[i]
    printf "%s{\"path\": %s, \"type\": %s, \"cpus\": %s, \"cpus_effective\": %s, \"mems\": %s, \"mems_effective\": %s}", sep, esc(substr(d, 15)), jfirst(d "/cgroup.type"), jfirst(d "/cpuset.cpus"), jfirst(d "/cpuset.cpus.effective"), jfirst(d "/cpuset.mems"), jfirst(d "/cpuset.mems.effective")
    printf "demo:   cgroup %s: type %s, cpuset.cpus %s (effective %s), cpuset.mems %s (effective %s)\n", substr(d, 15), plain(d "/cgroup.type"), show(d "/cpuset.cpus"), plain(d "/cpuset.cpus.effective"), show(d "/cpuset.mems"), plain(d "/cpuset.mems.effective") > con
    sep = ", "
  }
  f = "/proc/" pid "/numa_maps"
  while ((getline l < f) > 0) {
    m = split(l, a, " "); pol[a[2]]++; anon = index(l, " anon=") > 0
    for (i = 3; i <= m; i++) if (a[i] ~ /^N[0-9]+=/) {
      split(a[i], b, "="); all_p[b[1]] += b[2]; if (anon) anon_p[b[1]] += b[2]
    }
  }
  close(f)
  p = ""; sep = ""; for (k in all_p) { p = p sep "\"" k "\": " all_p[k]; sep = ", " }
  ap = ""; sep = ""; for (k in anon_p) { ap = ap sep "\"" k "\": " anon_p[k]; sep = ", " }
  po = ""; sep = ""; for (k in pol) { po = po sep "\"" k "\": " pol[k]; sep = ", " }
  printf "], \"pages\": {%s}, \"anon_pages\": {%s}, \"policies\": {%s}}", p, ap, po
  print "demo:   QEMU pages per node {" p "}, anonymous {" ap "}; mappings per memory policy {" po "}" > con
}'

# snapshot [cmdline]: the JSON object (stdout); console lines on stderr.
snapshot() {
  local pid cg tids="" dirs="" d st cmdline=""
  v "vcpuinfo $dom; echo $sep_line; vcpupin $dom; echo $sep_line; emulatorpin $dom; echo $sep_line; numatune $dom; echo $sep_line; qemu-monitor-command $dom '{\"execute\":\"query-cpus-fast\"}'; echo $sep_line; qemu-monitor-command $dom --hmp 'info registers'"
  if [ "$v_rc" != 0 ] || [ -n "$v_err" ]; then
    failed "the snapshot's queries (status $v_rc): $v_err"
  fi
  rm -f /tmp/q.*
  printf '%s\n' "$v_out" | awk -v s="$sep_line" 'BEGIN { n = 0 } $0 == s { n++; next } { print > ("/tmp/q." n) }'
  # info registers is long: only its IP line (with HLT=) on the console.
  echo "demo:   vCPU 0: $(grep -m 1 "IP=" /tmp/q.5 2>/dev/null)" >&2
  pid=$(qemu_pid)
  if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
    cg=$(domain_cgroup "$pid")
    for st in /proc/"$pid"/task/*; do tids="$tids ${st##*/}"; done
    d=/sys/fs/cgroup$cg
    dirs="${d%/*} $d"
    for st in "$d"/* "$d"/*/*; do [ ! -d "$st" ] || dirs="$dirs $st"; done
    if [ "${1:-}" = cmdline ]; then tr '\0' ' ' < "/proc/$pid/cmdline" > /tmp/cmdline; cmdline=/tmp/cmdline; fi
  fi
  : > /tmp/snap.console
  awk -v pid="$pid" -v cg="${cg:-}" -v tids="$tids" -v dirs="$dirs" -v q=/tmp/q. \
    -v cmdline="$cmdline" -v con=/tmp/snap.console "$snapshot_awk"
  cat /tmp/snap.console >&2
}

# step NAME FLAGS VIRSH-ARGS...: one command and, unless FLAGS has nosnap, the
# snapshot after it. FLAGS (comma-separated, or -): probe (a failure is data),
# nosnap, settle (3 s before the snapshot), cmdline (QEMU's command line in
# the snapshot). $extra (JSON members, each preceded by ", ") goes into the step.
steps=()
extra=""
step() {
  local name=$1 flags=$2 snap=null probe=false
  shift 2
  echo "demo: ---- step $name ----" >&2
  case ",$flags," in *,probe,*) probe=true ;; esac
  v "$@"
  local rc=$v_rc secs=$v_secs out=$v_out err=$v_err
  if [ "$rc" != 0 ] && [ "$probe" = false ]; then failed "virsh $*: $err"; fi
  case ",$flags," in *,settle,*) sleep 3 ;; esac
  case ",$flags," in
    *,nosnap,*) ;;
    *,cmdline,*) snap=$(snapshot cmdline) ;;
    *) snap=$(snapshot) ;;
  esac
  steps+=("$(printf '{"name": %s, "command": %s, "rc": %s, "seconds": %s, "stdout": %s, "stderr": %s, "probe": %s, "snapshot": %s%s}' \
    "$(js "$name")" "$(js "virsh $*")" "$rc" "$secs" "$(js "$out")" "$(js "$err")" "$probe" "$snap" "$extra")")
  extra=""
}
# destroy NAME: `virsh destroy` and whether the domain's cgroup went.
destroy() {
  local cg gone
  cg=$(domain_cgroup "$(qemu_pid)")
  v destroy "$dom"
  sleep 1
  if [ -n "$cg" ] && [ ! -d "/sys/fs/cgroup$cg" ]; then gone=true; else gone=false; fi
  echo "demo: after destroy: cgroup $cg gone: $gone" >&2
  [ "$v_rc" = 0 ] || failed "virsh destroy $dom: $v_err"
  steps+=("$(printf '{"name": %s, "command": %s, "rc": %s, "seconds": %s, "stdout": %s, "stderr": %s, "probe": false, "snapshot": null, "cgroup_before": %s, "cgroup_gone": %s}' \
    "$(js "$1")" "$(js "virsh destroy $dom")" "$v_rc" "$v_secs" "$(js "$v_out")" "$(js "$v_err")" "$(js "$cg")" "$gone")")
}

step start cmdline start "$dom"
step vcpupin - vcpupin "$dom" 0 3 --live
step emulatorpin - emulatorpin "$dom" 2-3 --live
step numatune_strict probe numatune "$dom" --nodeset 1 --live
destroy destroy_strict
step config_restrictive nosnap numatune "$dom" --mode restrictive --nodeset 0 --config
step start_restrictive cmdline start "$dom"
step numatune settle numatune "$dom" --nodeset 1 --live

# The probe: a vCPU pinned outside the domain cgroup's cpuset (only on a
# running domain in a cgroup of its own: never on a cgroup this did not find).
pid=$(qemu_pid)
cg=""
[ -z "$pid" ] || cg=$(domain_cgroup "$pid")
case "$cg" in
  /machine/?*) cgdir=/sys/fs/cgroup$cg ;;
  *) cgdir="" ;;
esac
if [ -n "$cgdir" ] && [ -f "$cgdir/cpuset.cpus" ]; then
  before=$(< "$cgdir/cpuset.cpus")
  echo "demo: probe: $cgdir/cpuset.cpus is '$before'; writing 0-1" >&2
  if echo 0-1 > "$cgdir/cpuset.cpus"; then written=true; else written=false; fi
  extra=$(printf ', "domain_cgroup_cpus_before": %s, "domain_cgroup_cpus_written": %s' "$(js "$before")" "$written")
  step probe_outside_cpuset probe vcpupin "$dom" 1 3 --live
  echo "demo: probe: writing '$before' back to $cgdir/cpuset.cpus" >&2
  # A populated cgroup's cpuset.cpus cannot go back to empty (ENOSPC): then
  # its parent's effective CPUs, which is what it had.
  if ! echo "$before" > "$cgdir/cpuset.cpus" 2>/dev/null; then
    parent=$(< "${cgdir%/*}/cpuset.cpus.effective")
    echo "demo: probe: writing '$before' back failed (a populated cgroup's cpuset.cpus cannot be emptied); writing the parent's effective $parent" >&2
    echo "$parent" > "$cgdir/cpuset.cpus" || echo "demo: probe: could not write $parent either" >&2
  fi
  # What the vCPUs got once the domain cgroup's CPUs were wide again: a
  # snapshot, no command.
  echo "demo: ---- step probe_restored (no command) ----" >&2
  steps+=("$(printf '{"name": "probe_restored", "command": "", "rc": 0, "seconds": 0, "stdout": "", "stderr": "", "probe": true, "snapshot": %s}' "$(snapshot)")")
else
  failed "probe: no running domain in a cgroup under /machine (QEMU pid '$pid', cgroup '$cg')"
fi

destroy destroy

{
  echo "$begin"
  printf '{"libvirt_version": %s, "qemu_version": %s, "kernel": %s,\n' \
    "$(js "$(libvirtd --version | awk '{ print $NF }')")" \
    "$(js "$(qemu-system-x86_64 --version | head -n 1)")" "$(js "$(uname -r)")"
  printf '"phases": {%s},\n' "$(awk '{ printf "%s\"%s\": %s", sep, $1, $2; sep = ", " }' "$phases" 2>/dev/null)"
  printf '"root_cgroup": {"controllers": %s, "subtree_control": %s},\n' \
    "$(js "$(< /sys/fs/cgroup/cgroup.controllers)")" "$(js "$(< /sys/fs/cgroup/cgroup.subtree_control)")"
  printf '"steps": [\n'
  sep=""
  for s in "${steps[@]}"; do printf '%s%s\n' "$sep" "$s"; sep=","; done
  printf '],\n"failed": ['
  sep=""
  while IFS= read -r f; do printf '%s%s' "$sep" "$(js "$f")"; sep=", "; done < "$failures"
  printf ']}\n'
  echo "$end"
}
if [ -s "$failures" ]; then
  echo "demo: failed: $(tr '\n' ';' < "$failures")"
  exit 1
fi
exit 0
