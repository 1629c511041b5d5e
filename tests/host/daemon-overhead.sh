#!/usr/bin/env bash
# daemon-overhead.sh [--busy] [THREADS] [SECONDS]
#
# The daemon's own cost on this host: `numaplace run --dry-run` over a
# process of THREADS (default 2000) parked threads for SECONDS (default 60),
# with the numad-like policy (or NP_POLICY, e.g. NP_POLICY=auto) deciding at
# its own default interval (5 s for numad-like, as numad's), or every
# NP_INTERVAL (e.g. NP_INTERVAL=1s). With --busy, the
# threads run instead: each wakes every NP_BUSY_PERIOD_MS (default 100) to
# work a little, so every thread ran between two rounds and none is carried
# over. Prints the daemon's CPU time as a fraction of one core and its peak
# RSS (VmHWM). Release build (in CARGO_TARGET_DIR if set); NP_BIN and
# NP_CROWD run other builds instead (e.g. a copy of an older one, to compare).
set -euo pipefail
cd "$(dirname "$0")/../.."
busy=
if [ "${1:-}" = --busy ]; then
    busy=${NP_BUSY_PERIOD_MS:-100}
    shift
fi
threads=${1:-2000}
secs=${2:-60}
release=${CARGO_TARGET_DIR:-target}/release
if [ -z "${NP_BIN:-}" ] || [ -z "${NP_CROWD:-}" ]; then
    cargo build --release --locked -q -p numaplace -p numaplace-linux --bin numaplace --example crowd
fi
bin=${NP_BIN:-$release/numaplace}
crowd_bin=${NP_CROWD:-$release/examples/crowd}
work=$(mktemp -d)
chmod 700 "$work"
cleanup() { kill "$crowd" "$daemon" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$crowd_bin" ${busy:+--busy "$busy"} "$threads" > "$work/crowd.out" &
crowd=$!
for _ in $(seq 100); do grep -q ready "$work/crowd.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$work/crowd.out" || { echo "crowd did not start" >&2; exit 1; }

"$bin" run --dry-run --policy "${NP_POLICY:-numad-like}" --pid "$crowd" ${NP_INTERVAL:+--interval "$NP_INTERVAL"} \
    --state "$work/state.json" --journal "$work/journal.jsonl" 2> "$work/daemon.err" &
daemon=$!
sleep "$secs"
hz=$(getconf CLK_TCK)
read -r -a stat < <(sed 's/.*) //' "/proc/$daemon/stat")
# After "comm)", field 3 (state) is index 0: utime is stat field 14 -> index 11.
ticks=$(( stat[11] + stat[12] ))
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
threads_seen=$(find "/proc/$crowd/task" -mindepth 1 -maxdepth 1 | wc -l)
kill -TERM "$daemon"
wait "$daemon" || { echo "daemon exited with $?" >&2; cat "$work/daemon.err" >&2; exit 1; }
kind=parked
[ -n "$busy" ] && kind="running (each waking every $busy ms)"
awk -v kind="$kind" -v t="$ticks" -v hz="$hz" -v s="$secs" -v hwm="$hwm" -v n="$threads_seen" 'BEGIN {
    printf "daemon over %d %s threads for %d s: CPU %.3f s = %.2f%% of one core, peak RSS %.1f MiB\n",
        n, kind, s, t / hz, 100 * t / hz / s, hwm / 1024 }'
