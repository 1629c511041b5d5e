#!/usr/bin/env bash
# hostile.sh [BINARY]
#
# Every hostile input of issue 18, run against one numaplace binary (default:
# the release build), each under a time limit (20 s) and an address-space
# limit (2 GiB), one row each: the case, the exit status (or `timeout`,
# `signal N`), the seconds it took and the first line of stderr. Running it
# against an old binary and a new one side by side shows what changed:
#
#   tests/host/hostile.sh /old/numaplace > old.txt
#   tests/host/hostile.sh > new.txt
#
# A row is `ok` when the binary exits 2 with one line naming the problem (or
# does what the case wants: see `want` below), `BAD` otherwise; the script
# exits 1 if any row is BAD. The cases that need root (two daemons, a state
# file naming kthreadd, the metrics endpoint) run only as root; the kthreadd
# case puts kthreadd's affinity back with sched_setaffinity whatever the
# binary did. Needs python3 (the metrics client, a busy port) and taskset.
# `cargo test -p numaplace --test daemon cli_hostile::` runs it on the binary built.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --release --locked -q -p numaplace --bin numaplace || exit 1
    bin=${CARGO_TARGET_DIR:-target}/release/numaplace
fi
bin=$(realpath "$bin")
work=$(mktemp -d)
chmod 700 "$work"
bg=()
cleanup() {
    for p in "${bg[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
bad=0
nok=0
nbad=0
root=0
[ "$(id -u)" = 0 ] && root=1

# row NAME WANT -- COMMAND...: runs COMMAND with stdin from /dev/null under the
# limits. WANT is `2:TEXT` (exit 2 and TEXT on the one line of stderr),
# `1:TEXT` (the same with exit 1: an output that cannot be written) or `0`
# (exit 0).
row() {
    local name=$1 want=$2
    shift 3
    local t0 t1 rc err first lines verdict
    t0=$(date +%s.%N)
    (ulimit -v 2097152; exec timeout -s KILL 20 "$@") </dev/null >"$work/out" 2>"$work/err"
    rc=$?
    t1=$(date +%s.%N)
    err=$(cat "$work/err")
    first=$(head -n 1 "$work/err" | cut -c1-110)
    lines=$(grep -c . "$work/err")
    local status=$rc
    if [ "$rc" = 137 ]; then status=timeout; elif [ "$rc" -gt 128 ]; then status="signal $((rc - 128))"; fi
    verdict=BAD
    case $want in
        [12]:*)
            if [ "$rc" = "${want%%:*}" ] && [ "$lines" -le 2 ] && [[ $err == *"${want#?:}"* ]] &&
                [[ $err != *panicked* ]]; then verdict=ok; fi ;;
        0) [ "$rc" = 0 ] && verdict=ok ;;
    esac
    if [ "$verdict" = BAD ]; then bad=1; nbad=$((nbad + 1)); else nok=$((nok + 1)); fi
    printf '%-4s %-44s %-9s %6.1fs  %s\n' "$verdict" "$name" "$status" \
        "$(awk "BEGIN { print $t1 - $t0 }")" "$first"
}

# A fixture machine whose node/online names node 4294967295.
tar -xjf "${NUMAPLACE_SYSFS_FIXTURES:-tests/fixtures/sysfs}/8em64t-2s2ca2c.tar.bz2" -C "$work" || exit 1
tree=$(find "$work" -maxdepth 2 -type d -name sys -printf '%h\n' | head -n 1)
mkdir -p "$tree/proc"
echo 4294967295 >"$tree/sys/devices/system/node/online"

cfg() { printf '%b' "$1" >"$work/c.toml"; echo "$work/c.toml"; }
scn() { printf 'machine = "westmere-2s"\n%b' "$1" >"$work/s.toml"; echo "$work/s.toml"; }
app='[[app]]\nname = "a"\n'
me=$$

echo "binary: $bin ($("$bin" --version 2>/dev/null))"
row "sysfs node/online 4294967295: topology" 2:node -- "$bin" topology --sysfs-root "$tree"
row "  ... simulate --sysfs-root" 2:node -- "$bin" simulate --sysfs-root "$tree" --policy default
row "  ... compare --sysfs-root" 2:node -- "$bin" compare --sysfs-root "$tree" --seeds 1 --no-report
row "  ... record --root" 2:node -- "$bin" record --root "$tree" -o "$work/r.jsonl" --duration 1s
row "dino hysteresis-window = 10^11" 2:hysteresis-window -- "$bin" advise --config "$(cfg '[policy]\nname = "dino"\nhysteresis-window = 100000000000\n')" --pid $me
row "scenario copies = 10^9" 2:copies -- "$bin" simulate --scenario "$(scn "${app}copies = 1000000000\n")" --policy default
row "compare --seeds 4294967296" 2:4294967296 -- "$bin" compare --seeds 4294967296 --no-report
row "scenario step_ms = 1e-300" 2:step_ms -- "$bin" simulate --scenario "$(scn "step_ms = 1e-300\n${app}")" --policy default
row "topology --synthetic 'core:8192 pu:2'" 2:8192 -- "$bin" topology --synthetic 'core:8192 pu:2'
row "/dev/zero as an XML topology" "2:not a regular file" -- "$bin" topology --xml /dev/zero
row "/dev/zero as a recording" "2:not a regular file" -- "$bin" replay /dev/zero
row "/dev/zero as a config" "2:not a regular file" -- "$bin" advise --config /dev/zero --pid $me
row "/dev/zero as a scenario" "2:not a regular file" -- "$bin" simulate --scenario /dev/zero --policy default
row "/dev/zero as a counters file" "2:not a regular file" -- "$bin" advise --pid $me --counters-from /dev/zero
row "/dev/zero as a machine file" "2:not a regular file" -- "$bin" simulate --machine /dev/zero --policy default
row "dino devil-mpki = nan" 2:devil-mpki -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\ndevil-mpki = nan\n')"
row "dino devil-mpki = -5" 2:devil-mpki -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\ndevil-mpki = -5\n')"
row "dino super-devil-mpki below devil-mpki" 2:super-devil-mpki -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\ndevil-mpki = 50.0\nsuper-devil-mpki = 10.0\n')"
row "dino hysteresis-window = 0" 2:hysteresis-window -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\nhysteresis-window = 0\n')"
row "dino hysteresis-needed above the window" 2:hysteresis-needed -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\nhysteresis-needed = 11\n')"
row "dino window-pages = 0" 2:window-pages -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "dino"\nwindow-pages = 0\n')"
row "brm reset-min-rounds above reset-max-rounds" 2:reset-min-rounds -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "brm"\nreset-min-rounds = 400\n')"
row "brm reset-min/max-rounds both 0" 2:reset- -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "brm"\nreset-min-rounds = 0\nreset-max-rounds = 0\n')"
row "brm min-uncore-requests-per-s = nan" 2:min-uncore-requests-per-s -- "$bin" advise --pid $me --config "$(cfg '[policy]\nname = "brm"\nmin-uncore-requests-per-s = nan\n')"
row "cgroups = [\"/../../etc\"]" 2:.. -- "$bin" advise --config "$(cfg '[scope]\ncgroups = ["/../../etc"]\n')"
row "threads = 9223372036854775807" 2:4096 -- "$bin" simulate --scenario "$(scn "${app}threads = 9223372036854775807\n")" --policy default
python3 -c 'print("[scope]\ncomms = [" + ",".join("\"p%d\"" % i for i in range(500000)) + "]")' >"$work/huge.toml"
row "500,000 comm patterns" 2:bytes -- "$bin" advise --config "$work/huge.toml"
echo precious >"$work/victim"
ln -s "$work/victim" "$work/link.jsonl"
row "simulate --journal through a symlink" "2:symbolic link" -- "$bin" simulate --policy default --journal "$work/link.jsonl"
row "advise with an empty scope" "2:scope" -- "$bin" advise --policy default
row "advise --pid that does not exist" "2:no running process" -- "$bin" advise --pid 999999999 --interval 10ms
row "--metrics unix:/nonexistent/dir/sock" "2:does not exist" -- "$bin" run --pid $me --dry-run --rounds 1 --metrics unix:/nonexistent/dir/sock
python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(600)' >"$work/port" &
bg+=($!)
# Wait for the listener to say its port: python3 starts slowly on a loaded
# machine, and an empty port is another error than the one this row checks.
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
row "--metrics on a busy port" "2:cannot listen" -- "$bin" run --pid $me --dry-run --rounds 1 --metrics "127.0.0.1:$(cat "$work/port")"
# top --connect to peers that are not a numaplace daemon: each answer
# bounded in time (2 s) and size (4 MiB), one line, exit 2.
cat >"$work/peer.py" <<'PY'
import socket, sys, threading
mode = sys.argv[1]
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(64)
print(l.getsockname()[1], flush=True)
def answer(c):
    try:
        c.recv(4096)
        if mode == "garbage":
            c.sendall(b"\xff\xfe\x00 not http at all\n" * 100)
        elif mode == "huge":
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
            chunk = b"[" * 65536
            for _ in range(400):
                c.sendall(chunk)
        elif mode == "json":
            c.sendall(b'HTTP/1.0 200 OK\r\n\r\n{"nodes": "many", "groups": 1e999}')
        elif mode == "evil":
            # A well-formed state whose strings carry a pane title (OSC 2),
            # a clipboard write (OSC 52), a screen clear and a C1 CSI.
            import json
            bad = "\x1b]2;owned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u009b31m\u202ex"
            row = {"round": 1, "time_unix_ns": 1, "pid": 1, "label": bad,
                   "action": bad, "reason": bad * 1000, "outcome": bad}
            state = {"format": 1, "policy": bad, "applies": True, "round": 1,
                     "time_unix_ns": 1, "interval_ns": 1, "nodes": [], "bandwidth": [],
                     "groups": [], "groups_left_out": 0, "decisions": [row] * 3}
            c.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + json.dumps(state).encode())
        elif mode == "hang":
            threading.Event().wait(600)
    except OSError:
        pass
    c.close()
while True:
    c, _ = l.accept()
    threading.Thread(target=answer, args=(c,), daemon=True).start()
PY
for mode in hang close garbage huge json evil; do
    python3 "$work/peer.py" $mode >"$work/peer-$mode" &
    bg+=($!)
done
# Each listening (its port written) before it is asked: at most 60 s.
for mode in hang close garbage huge json evil; do
    for _ in $(seq 600); do
        [ -s "$work/peer-$mode" ] && break
        sleep 0.1
    done
done
row "top --connect: a peer that never answers" "2:daemon not answering" -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-hang")"
row "top --connect: a peer that closes at once" "2:daemon not answering" -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-close")"
row "top --connect: a peer sending garbage" "2:not an HTTP answer" -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-garbage")"
row "top --connect: a peer sending 25 MiB" "2:larger than 4 MiB" -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-huge")"
row "top --connect: a peer sending other JSON" "2:not numaplace's state" -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-json")"
row "top --connect: a peer sending terminal controls" 0 -- "$bin" top --once --connect "127.0.0.1:$(cat "$work/peer-evil")"
if LC_ALL=C grep -q $'\x1b\|\xc2\x9b\|\xe2\x80\xae' "$work/out" "$work/err"; then
    echo "BAD  (terminal controls reached the output)"; bad=1; nbad=$((nbad + 1))
elif ! grep -q 'x1b]2;owned' "$work/out"; then
    echo "BAD  (the peer's strings are not shown escaped)"; bad=1; nbad=$((nbad + 1))
else
    echo "     (shown escaped, none reached the terminal)"
fi
row "top --connect 0.0.0.0:1 (not loopback)" "2:not a loopback address" -- "$bin" top --once --connect 0.0.0.0:1
row "train --out DIR" "2:not a regular file" -- "$bin" train --out "$work"
row "calibrate -o /missing/x.json" "2:does not exist" -- "$bin" calibrate -o /missing/x.json
# Issue 33: a full stdout, a FIFO as a recording, hwloc XML nested 20,000
# deep (hwloc's parser recursed until its stack overflowed).
for cmd in scenarios "topology --json" doctor tasks "generate 7" simulate; do
    # shellcheck disable=SC2016  # $0 and $1 are the inner shell's
    row "$cmd >/dev/full" "1:cannot write the output to standard output" -- \
        bash -c 'exec "$0" $1 >/dev/full' "$bin" "$cmd"
done
# A snapshot root whose files are not files: numa_maps linked to /dev/zero
# (read unbounded, it grew the process to gigabytes), status a FIFO (it hung).
mkdir -p "$work/vmroot"
tar -xJf tests/fixtures/procfs-qemu-vm.tar.xz -C "$work/vmroot"
vmpid=$(find "$work/vmroot/proc" -maxdepth 1 -name '[0-9]*' -printf '%f\n' | sort -n | head -n 1)
cp -a "$work/vmroot" "$work/zeroroot"
ln -sf /dev/zero "$work/zeroroot/proc/$vmpid/numa_maps"
row "tasks --root: numa_maps linked to /dev/zero" 0 -- "$bin" tasks --root "$work/zeroroot"
if grep -q "numa_maps: cannot read: a device, FIFO or socket" "$work/err"; then echo "     (and says so)"; else echo "BAD  (not said: $(head -n 1 "$work/err"))"; bad=1; nbad=$((nbad + 1)); fi
cp -a "$work/vmroot" "$work/fiforoot"
rm "$work/fiforoot/proc/$vmpid/task/$vmpid/status"
mkfifo "$work/fiforoot/proc/$vmpid/task/$vmpid/status"
row "tasks --root: a FIFO as a status file" 0 -- "$bin" tasks --root "$work/fiforoot"
if grep -q "status: cannot read: a device, FIFO or socket" "$work/err"; then echo "     (and says so)"; else echo "BAD  (not said: $(head -n 1 "$work/err"))"; bad=1; nbad=$((nbad + 1)); fi
mkfifo "$work/fifo"
row "record --force -o FIFO" "2:not a regular file" -- "$bin" record --force -o "$work/fifo" --duration 1s
python3 - "$work/deep.xml" <<'PY'
import sys
n = 20000
head = ('<?xml version="1.0"?><topology version="2.0"><object type="Machine" os_index="0" '
        'cpuset="0x1" complete_cpuset="0x1" allowed_cpuset="0x1" nodeset="0x1" '
        'complete_nodeset="0x1" allowed_nodeset="0x1" gp_index="1">')
body = ''.join('<object type="Group" cpuset="0x1" gp_index="%d">' % (i + 2) for i in range(n))
open(sys.argv[1], "w").write(head + body + '</object>' * (n + 1) + '</topology>')
PY
row "hwloc XML nested 20,000 deep (--xml)" "2:nest deeper than 256" -- "$bin" topology --xml "$work/deep.xml"
row "hwloc XML nested 20,000 deep (HWLOC_XMLFILE)" "2:nest deeper than 256" -- env HWLOC_XMLFILE="$work/deep.xml" "$bin" topology
# A whole thread model but for the key a row sets.
model='instructions = 1e9\nuncore_pki = 20\nllc_mpki = 10\nworking_set = "64MiB"\n'
# Issue 33's minor cases: values out of any machine's range, a recording
# that contradicts its own header, the guest agent's port, outputs.
row "[engine] migrate_mib_per_sec = 2^44" 2:migrate_mib_per_sec -- "$bin" advise --pid $me --config "$(cfg '[engine]\nmigrate_mib_per_sec = 17592186044416\n')"
row "[vms] qmp path with a control character" "2:control character" -- "$bin" advise --pid $me --config "$(cfg '[vms]\nqmp = ["/run/q\\u0007.qmp"]\n')"
row "scenario cpi = 1e-300" 2:cpi -- "$bin" simulate --scenario "$(scn "${app}${model}cpi = 1e-300\n")" --policy default
row "scenario mlp = 1e300" 2:mlp -- "$bin" simulate --scenario "$(scn "${app}${model}mlp = 1e300\n")" --policy default
if lstopo-no-graphics --of xml - >"$work/mem.xml" 2>/dev/null; then
    sed -i 's/local_memory="[0-9]*"/local_memory="-1"/' "$work/mem.xml"
    row "hwloc XML local_memory=\"-1\"" "2:more than any machine" -- "$bin" topology --xml "$work/mem.xml"
fi
row "advise --sysfs-root without --numad-w" "2:only with --numad-w" -- "$bin" advise --sysfs-root "$tree" --all --policy default
ln -sf "$work/elsewhere.jsonl" "$work/journal-link.jsonl"
row "run --journal SYMLINK (refused first)" "2:symbolic link" -- "$bin" run --pid $me --dry-run --rounds 1 --journal "$work/journal-link.jsonl"
if "$bin" record -o "$work/rec.jsonl" --duration 1s --interval 200ms --no-memory 2>/dev/null; then
    python3 - "$work/rec.jsonl" "$work" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
head, snaps = json.loads(lines[0]), [json.loads(l) for l in lines[1:]]
def write(name, h, s):
    open("%s/%s" % (sys.argv[2], name), "w").write("\n".join(json.dumps(x) for x in [h] + s) + "\n")
h0 = dict(head, interval_ns=0)
write("rec-interval0.jsonl", h0, snaps)
dup = json.loads(json.dumps(snaps))
dup[0]["tasks"].append(dup[0]["tasks"][0])
write("rec-dup.jsonl", head, dup)
far = json.loads(json.dumps(snaps))
far[0]["tasks"][0]["last_cpu"] = 4000000000
write("rec-cpu.jsonl", head, far)
PY
    row "replay: a header with interval_ns 0" "2:interval_ns is 0" -- "$bin" replay "$work/rec-interval0.jsonl"
    row "replay: a thread listed twice" "2:listed twice" -- "$bin" replay "$work/rec-dup.jsonl"
    row "replay: last_cpu 4e9 on a small machine" "2:beyond Linux's CPU numbers" -- "$bin" replay "$work/rec-cpu.jsonl"
fi
row "guest --port ../../x" "2:not a port name" -- "$bin" guest --port ../../x --rounds 1
printf 'precious\n' >"$work/precious"
row "guest --device REGULAR_FILE" "2:not a character device" -- "$bin" guest --device "$work/precious" --rounds 1
if [ "$(cat "$work/precious")" = precious ]; then echo "     (the file is unchanged)"; else echo "BAD  (the file was written over)"; bad=1; nbad=$((nbad + 1)); fi
# A thread named with a C1 CSI and a right-to-left override: tasks --json
# escapes both (\u009b, \u202e) instead of passing them to the terminal.
python3 -c 'open("/proc/self/comm", "wb").write("x\u009by\u202ez".encode()); import time; time.sleep(600)' &
named=$!
bg+=($named)
# Until it has renamed itself (python3 starts slowly on a loaded machine).
for _ in $(seq 100); do [ "$(head -c1 /proc/$named/comm 2>/dev/null)" = x ] && break; sleep 0.1; done
row "tasks --json of a thread named with U+009B, U+202E" 0 -- "$bin" tasks --json --pid $named
if grep -q $'\xc2\x9b\|\xe2\x80\xae' "$work/out"; then echo "BAD  (raw in the JSON)"; bad=1; nbad=$((nbad + 1)); elif grep -q 'u009b' "$work/out"; then echo "     (escaped)"; else echo "BAD  (the thread is not in the answer)"; bad=1; nbad=$((nbad + 1)); fi

if [ $root = 1 ]; then
    # Two daemons, one state file.
    sleep 600 &
    sleeper=$!
    bg+=($sleeper)
    "$bin" run --pid $sleeper --policy default --state "$work/st.json" --interval 100ms 2>"$work/first.err" &
    first=$!
    bg+=($first)
    sleep 2
    row "a second daemon on the same --state" "2:in use by another numaplace daemon (pid $first)" -- "$bin" run --pid $sleeper --policy default --state "$work/st.json" --rounds 1
    if kill -0 $first 2>/dev/null; then echo "     (the first daemon still runs)"; else echo "BAD  (the first daemon is gone)"; bad=1; nbad=$((nbad + 1)); fi
    kill $first 2>/dev/null
    wait $first 2>/dev/null

    printf '{"version": 99, "entries": []}' >"$work/newer.json"
    chmod 600 "$work/newer.json"
    row "a state file of a newer version" "2:newer" -- "$bin" run --pid $sleeper --policy default --rounds 1 --state "$work/newer.json"
    if [ -f "$work/newer.json" ]; then echo "     (the newer state file is still in place)"; else echo "BAD  (the newer state file was moved away)"; bad=1; nbad=$((nbad + 1)); fi

    # Issue 33: a daemon with a pin whose stderr pipe's reader is gone: no
    # panic, SIGHUP ignored, SIGTERM restores the pin and exits 0.
    printf '[policy]\nname = "static"\n[[policy.pins]]\nprocess = "sleep"\nthread = 0\ncpus = "0"\n' >"$work/pin.toml"
    mkfifo "$work/errpipe"
    (exec 0<"$work/errpipe") &
    before=$(taskset -pc $sleeper | sed 's/.*: //')
    "$bin" -v run --pid $sleeper --config "$work/pin.toml" --state "$work/se.json" --interval 100ms 2>"$work/errpipe" &
    d=$!
    for _ in $(seq 100); do [ "$(taskset -pc $sleeper | sed 's/.*: //')" = 0 ] && break; sleep 0.1; done
    pinned=$(taskset -pc $sleeper | sed 's/.*: //')
    kill -HUP $d 2>/dev/null
    sleep 0.5
    kill -TERM $d 2>/dev/null
    wait $d
    rc=$?
    after=$(taskset -pc $sleeper | sed 's/.*: //')
    if [ "$pinned" = 0 ] && [ "$rc" = 0 ] && [ "$after" = "$before" ]; then
        echo "ok   a daemon whose stderr went away          0                 pinned to $pinned, SIGHUP, SIGTERM: exit 0, back to $after"; nok=$((nok + 1))
    else
        echo "BAD  a daemon whose stderr went away          $rc                pinned to $pinned, then $after (was $before)"
        taskset -pc "$before" $sleeper >/dev/null
        bad=1; nbad=$((nbad + 1))
    fi

    # Issue 33: a state file holding only kernel.numa_balancing (a crash
    # after numaplace changed it, before any pin) is restored at start. It
    # names the value there now as both original and applied, so nothing
    # on this machine changes.
    if [ -r /proc/sys/kernel/numa_balancing ]; then
        kb=$(cat /proc/sys/kernel/numa_balancing)
        printf '{"version": 2, "entries": [], "kernel_balancing": {"original": %s, "applied": %s}}' "$kb" "$kb" >"$work/kb.json"
        chmod 600 "$work/kb.json"
        "$bin" run --pid $sleeper --policy default --state "$work/kb.json" --rounds 1 2>"$work/kb.err"
        rc=$?
        if [ "$rc" = 0 ] && grep -q "did not stop cleanly.*kernel.numa_balancing changed" "$work/kb.err"; then
            echo "ok   a state file with only kernel.numa_balancing 0                 restored at start"; nok=$((nok + 1))
        else
            echo "BAD  a state file with only kernel.numa_balancing $rc                not restored at start: $(head -n 1 "$work/kb.err" | cut -c1-80)"
            bad=1; nbad=$((nbad + 1))
        fi
    fi

    # Issue 33: an interpreter a user copied to a file named like QEMU,
    # naming two threads `CPU n/KVM`, is not a VM (the copy is the user's,
    # not root's as an installed QEMU is).
    fake=$(mktemp -d)
    chmod 755 "$fake"
    chown nobody "$fake"
    runuser -u nobody -- cp /usr/bin/python3 "$fake/qemu-system-x86_64"
    cat >"$fake/vcpus.py" <<'PY'
import ctypes, threading, time
libc = ctypes.CDLL(None)
def vcpu(n):
    libc.prctl(15, ("CPU %d/KVM" % n).encode(), 0, 0, 0)  # PR_SET_NAME
    time.sleep(600)
for n in range(2):
    threading.Thread(target=vcpu, args=(n,), daemon=True).start()
time.sleep(600)
PY
    chmod 644 "$fake/vcpus.py"
    (runuser -u nobody -- "$fake/qemu-system-x86_64" "$fake/vcpus.py" &)
    for _ in $(seq 50); do
        fakepid=$(pgrep -u nobody -f "$fake/vcpus.py" | head -n 1)
        [ -n "$fakepid" ] && grep -q "CPU 1/KVM" /proc/"$fakepid"/task/*/comm 2>/dev/null && break
        sleep 0.1
    done
    row "a user's copy of python named qemu-system-*" 0 -- "$bin" tasks --vms
    if grep -q "^vm:.* $fakepid " "$work/out"; then
        echo "BAD  (pid $fakepid, the copy, is listed as a VM)"; bad=1; nbad=$((nbad + 1))
    elif ! grep -q "CPU 1/KVM" /proc/"$fakepid"/task/*/comm 2>/dev/null; then
        echo "BAD  (the fake VM did not start: the check is vacuous)"; bad=1; nbad=$((nbad + 1))
    else
        echo "     (pid $fakepid with threads CPU 0/KVM, CPU 1/KVM: not a VM)"
    fi
    pkill -u nobody -f "$fake/vcpus.py"
    rm -rf "$fake"

    # Issue 33: the kernel's BTF as a FIFO (doctor hung) and as /dev/zero
    # (read unbounded), bind-mounted in a private mount namespace only.
    # `--policy default` reads no signal, so doctor's exit status is 0 on
    # any machine (auto's would be 3 where there are no counters).
    if [ -f /sys/kernel/btf/vmlinux ] && unshare -m true 2>/dev/null; then
        mkfifo "$work/btf-fifo"
        for fake in "$work/btf-fifo" /dev/zero; do
            row "doctor with the kernel's BTF as $(basename "$fake")" 0 -- \
                unshare -m sh -c 'mount --bind "$0" /sys/kernel/btf/vmlinux && exec "$1" doctor --policy default' "$fake" "$bin"
            if grep -q "cannot read the kernel's BTF" "$work/out"; then
                echo "     (doctor says the BTF cannot be read)"
            else
                echo "BAD  (doctor does not say the BTF cannot be read)"; bad=1; nbad=$((nbad + 1))
            fi
        done
    fi

    # A state file naming kthreadd with its true start time.
    start=$(awk '{print $22}' /proc/2/stat)
    before=$(taskset -pc 2 | sed 's/.*: //')
    printf '{"version": 1, "entries": [{"task": {"tid": 2, "start_time": %s}, "tgid": 2, "original": "%s", "applied": "0"}]}' \
        "$start" "$before" >"$work/k.json"
    chmod 600 "$work/k.json"
    row "a state file entry naming kthreadd" 0 -- "$bin" run --pid $sleeper --policy default --state "$work/k.json" --rounds 1
    after=$(taskset -pc 2 | sed 's/.*: //')
    if [ "$after" = "$before" ]; then
        echo "     (kthreadd's affinity untouched: $after)"
    else
        echo "BAD  (kthreadd's affinity changed from $before to $after; put back)"
        taskset -pc "$before" 2 >/dev/null
        bad=1; nbad=$((nbad + 1))
    fi

    # A state file entry that would narrow a process numaplace never
    # pinned (original "0", applied its whole affinity): never acted on.
    start=$(awk '{print $22}' "/proc/$sleeper/stat")
    before=$(taskset -pc "$sleeper" | sed 's/.*: //')
    printf '{"version": 1, "entries": [{"task": {"tid": %s, "start_time": %s}, "tgid": %s, "original": "0", "applied": "%s"}]}' \
        "$sleeper" "$start" "$sleeper" "$before" >"$work/narrow.json"
    chmod 600 "$work/narrow.json"
    row "a state file entry that would narrow a thread" 0 -- "$bin" run --pid $me --policy default --state "$work/narrow.json" --rounds 1
    after=$(taskset -pc "$sleeper" | sed 's/.*: //')
    if [ "$after" = "$before" ]; then echo "     (its affinity untouched: $after)"; else echo "BAD  (narrowed from $before to $after)"; taskset -pc "$before" "$sleeper" >/dev/null; bad=1; nbad=$((nbad + 1)); fi
    # kernel.numa_balancing 7 in a state file: not a value the kernel
    # takes, never written back.
    if [ -w /proc/sys/kernel/numa_balancing ]; then
        nb=$(cat /proc/sys/kernel/numa_balancing)
        printf '{"version": 2, "entries": [], "kernel_balancing": {"original": 7, "applied": %s}}' "$nb" >"$work/nb.json"
        chmod 600 "$work/nb.json"
        row "a state file with kernel_balancing 7" 0 -- "$bin" run --pid $me --policy default --state "$work/nb.json" --rounds 1 -v
        if grep -q "not values kernel.numa_balancing takes" "$work/err" && [ "$(cat /proc/sys/kernel/numa_balancing)" = "$nb" ]; then
            echo "     (left as it is, and said)"
        else
            echo "BAD  (not said, or changed: $(cat /proc/sys/kernel/numa_balancing))"; echo "$nb" >/proc/sys/kernel/numa_balancing; bad=1; nbad=$((nbad + 1))
        fi
    fi
    # A recording on a full file system: no empty file left in its name.
    mkdir -p "$work/full"
    if mount -t tmpfs -o size=16k tmpfs "$work/full" 2>/dev/null; then
        head -c 16384 /dev/zero >"$work/full/fill" 2>/dev/null
        row "record -o on a full file system" "2:No space left on device" -- env RUST_LOG=error "$bin" record -o "$work/full/r.jsonl" --duration 1s
        if [ -e "$work/full/r.jsonl" ]; then echo "BAD  (an empty recording left behind)"; bad=1; nbad=$((nbad + 1)); else echo "     (no file left behind)"; fi
        umount "$work/full"
    fi

    # Metrics: idle connections held open, then scrapes; a second daemon on
    # the same UNIX socket.
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$bin" run --pid $sleeper --policy default --dry-run --interval 100ms \
        --metrics "127.0.0.1:$port" --state "$work/m2.json" 2>/dev/null &
    bg+=($!)
    "$bin" run --pid $sleeper --policy default --dry-run --interval 100ms \
        --metrics "unix:$work/m.sock" --state "$work/m3.json" 2>/dev/null &
    sockd=$!
    bg+=($sockd)
    # Both listening before anything is asked of them (a loaded machine
    # starts them slowly): at most 60 s.
    for _ in $(seq 600); do
        [ -S "$work/m.sock" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.1
    done
    # scrape.py ADDR HELD [PATH]: holds HELD idle connections to ADDR (a
    # loopback port, or a UNIX socket path), then asks it for PATH
    # (/metrics, or /state as numaplace top does) three times.
    cat >"$work/scrape.py" <<'PY'
import socket, sys, time
addr, held = sys.argv[1], int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "/metrics"
def connect():
    if addr.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(addr)
        return s
    return socket.create_connection(("127.0.0.1", int(addr)))
idle = [connect() for _ in range(held)]
times = []
for _ in range(50):
    if len(times) == 3:
        break
    t = time.monotonic()
    s = connect()
    s.settimeout(60)
    s.sendall(b"GET %s HTTP/1.0\r\n\r\n" % path.encode())
    body = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        body += b
    if body.startswith(b"HTTP/1.0 503") and path == "/state":
        # No round finished yet: asked again (not a failure to answer).
        time.sleep(0.2)
        continue
    if not body.startswith(b"HTTP/1.0 200"):
        print("scrape not answered with %d idle connections held: %r" % (held, body[:40]), file=sys.stderr)
        sys.exit(1)
    times.append(time.monotonic() - t)
if len(times) < 3:
    print("%s: no round finished in 10 s" % path, file=sys.stderr)
    sys.exit(1)
print("3 scrapes answered with %d idle connections held, slowest %.2fs" % (held, max(times)), file=sys.stderr)
# A server answering one connection at a time with 2 s each takes 20 s
# behind 10 idle ones; 10 s is a failure bound, not a speed target.
sys.exit(0 if max(times) < 10 else 1)
PY
    row "10 idle metrics connections, then scrapes" "0" -- python3 "$work/scrape.py" "$port" 10
    row "100 idle metrics connections, then scrapes" "0" -- python3 "$work/scrape.py" "$port" 100
    row "100 idle metrics connections, then /state" "0" -- python3 "$work/scrape.py" "$work/m.sock" 100 /state
    # /state names the processes in scope: on TCP loopback, where any
    # local user connects, it is refused unless [metrics] state_over_tcp.
    cat >"$work/state-tcp.py" <<'PY'
import socket, sys, time
for _ in range(100):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"GET /state HTTP/1.0\r\n\r\n")
    body = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        body += b
    if not body.startswith(b"HTTP/1.0 503"):
        break
    time.sleep(0.1)
print(body.split(b"\r\n")[0].decode(errors="replace"), file=sys.stderr)
sys.exit(0 if body.startswith(b"HTTP/1.0 403") else 1)
PY
    row "GET /state on TCP loopback, not opted in" "0" -- python3 "$work/state-tcp.py" "$port"
    row "a second daemon on the same metrics socket" "2:another process listens" -- "$bin" run --pid $sleeper --policy default --dry-run --rounds 1 --metrics "unix:$work/m.sock" --state "$work/m4.json"
    if answer=$(python3 "$work/scrape.py" "$work/m.sock" 0 2>&1); then
        echo "     (the first daemon's socket still answers)"
    else
        alive=no
        kill -0 "$sockd" 2>/dev/null && alive=yes
        echo "BAD  (the first daemon's socket no longer answers: $answer; first daemon alive: $alive)"
        bad=1; nbad=$((nbad + 1))
    fi
else
    echo "skipped (needs root): two daemons, kthreadd in the state file, the metrics endpoint"
fi

"$bin" scenarios 2>"$work/err" | head -n 0
rc=${PIPESTATUS[0]}
# SIGPIPE (141), or 0 where scenarios wrote all into the pipe before head
# exited (a race on a loaded machine); never a panic.
if { [ "$rc" = 141 ] || [ "$rc" = 0 ]; } && ! grep -q panicked "$work/err"; then v=ok; else v=BAD; bad=1; nbad=$((nbad + 1)); fi
printf '%-4s %-44s %-9s %6s   %s\n' $v "scenarios | head -n 0" "$rc" "" "$(head -n 1 "$work/err" | cut -c1-110)"
[ $v = ok ] && nok=$((nok + 1))
echo "summary: $nok rows ok, $nbad bad (rows or their follow-up checks); $bin"
exit $bad
