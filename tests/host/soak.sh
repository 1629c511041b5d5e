#!/usr/bin/env bash
# soak.sh [SECONDS]
#
# Two daemons for SECONDS (default 600) over a process of churning threads
# this script owns: one real (`static` policy pinning threads of the churn
# process to CPUs, state file, metrics on a UNIX socket), one dry run
# (metrics on loopback TCP). Every 5 s both endpoints are scraped and each
# daemon's RSS and open fds sampled; every 60 s each gets a SIGHUP. At the
# end both get SIGTERM; then every thread of the churn process must have its
# original affinity back. Prints RSS and fd ranges; fails if either daemon
# died, a scrape failed, the lowest RSS of the run's last quarter is more than
# 50% above the first minute's (a leak raises the floor; the daemons' RSS
# also follows the host's thread count, printed beside it),
# its own fds (beside the stat files it holds, one per host thread) grew
# at all after it, or an affinity was not restored. Needs root (the
# real daemon pins). Release build (in CARGO_TARGET_DIR if set), or the
# binary NUMAPLACE_BIN names. A one-minute run is the ignored cargo test
# `cargo test -p numaplace --test daemon soak:: -- --ignored`.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
if [ -n "${NUMAPLACE_BIN:-}" ]; then
    bin=$NUMAPLACE_BIN # a cargo test passes the binary it built
else
    cargo build --release --locked -q -p numaplace --bin numaplace
    bin=${CARGO_TARGET_DIR:-target}/release/numaplace
fi
work=$(mktemp -d)
chmod 700 "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The churn process: comm "npsoak", 4 long-lived threads and short-lived
# ones started and ended all the time (tens a second).
cat > "$work/churn.py" <<'PY'
import ctypes, threading, time, random
ctypes.CDLL(None).prctl(15, b"npsoak", 0, 0, 0)
def park(): time.sleep(1e9)
for _ in range(4): threading.Thread(target=park, daemon=True).start()
def short(): time.sleep(random.uniform(0.01, 0.5))
print("ready", flush=True)
while True:
    for _ in range(8): threading.Thread(target=short, daemon=True).start()
    time.sleep(0.1)
PY
python3 "$work/churn.py" > "$work/churn.out" &
churn=$!; pids+=("$churn")
for _ in $(seq 100); do grep -q ready "$work/churn.out" 2>/dev/null && break; sleep 0.1; done
original=$(taskset -pc "$churn" | sed 's/.*: //')
last=$(( $(nproc) - 1 ))
cat > "$work/static.toml" <<TOML
[scope]
comms = ["npsoak"]
[policy]
name = "static"
$(for t in 0 1 2 3 4 5 6 7; do printf '[[policy.pins]]\nprocess = "npsoak"\nthread = %d\ncpus = "%d"\n' $t $(( t % (last + 1) )); done)
TOML
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" run --config "$work/static.toml" --interval 200ms --state "$work/state.json" \
    --metrics "unix:$work/m.sock" 2> "$work/real.err" &
real=$!; pids+=("$real")
"$bin" run --config "$work/static.toml" --interval 200ms --dry-run \
    --metrics "127.0.0.1:$port" 2> "$work/dry.err" &
dry=$!; pids+=("$dry")
sleep 2

# fds: the daemon's own, not counting the threads' stat files it keeps open
# between rounds (collect/held.rs: one per thread on the host, so they
# follow the host's threads, bounded by half the fd limit).
sample() { # pid -> "rss_kib fds"
    local own
    own=$(find "/proc/$1/fd" -mindepth 1 -printf '%l\n' 2>/dev/null |
        grep -cvE '^/proc/[0-9]+/task/[0-9]+/stat$')
    echo "$(awk '/VmRSS/ {print $2}' "/proc/$1/status") $own"
}
# The host's threads: the daemons read every task's stat each round, so
# their RSS follows how many there are (a build starting on the same
# machine doubles it for a while); a leak raises the floor instead.
host_threads() { local n=0 d; for d in /proc/[0-9]*/task; do n=$(( n + $(ls "$d" 2>/dev/null | wc -l) )); done; echo "$n"; }
echo "t real_rss_kib real_fds dry_rss_kib dry_fds host_threads" > "$work/samples"
start=$(date +%s); scrapes=0
while (( $(date +%s) - start < secs )); do
    t=$(( $(date +%s) - start ))
    curl -sf --max-time 30 --unix-socket "$work/m.sock" http://x/metrics | grep -q numaplace_rounds_total
    curl -sf --max-time 30 "http://127.0.0.1:$port/metrics" | grep -q numaplace_rounds_total
    scrapes=$(( scrapes + 2 ))
    echo "$t $(sample "$real") $(sample "$dry") $(host_threads)" >> "$work/samples"
    if (( t > 0 && t % 60 < 5 )); then kill -HUP "$real" "$dry"; fi
    sleep 5
done
rounds=$(curl -sf --unix-socket "$work/m.sock" http://x/metrics | awk '/^numaplace_rounds_total/ {print $2}')
applied=$(curl -sf --unix-socket "$work/m.sock" http://x/metrics | awk '/outcome="applied"/ {print $2}')
kill -TERM "$real" "$dry"
wait "$real" || { echo "real daemon exited with $?" >&2; tail "$work/real.err" >&2; exit 1; }
wait "$dry" || { echo "dry daemon exited with $?" >&2; tail "$work/dry.err" >&2; exit 1; }
# Threads a pinned thread created inherit its pin (the kernel copies the
# creator's affinity): numaplace never set theirs, so it cannot restore them.
# Short-lived ones still alive at the stop are counted here; a second later
# they have exited, and every thread must have its original affinity.
not_original() {
    local n=0 t a
    for t in /proc/"$churn"/task/*; do
        a=$(taskset -pc "${t##*/}" 2>/dev/null | sed 's/.*: //') || continue
        [ -z "$a" ] || [ "$a" = "$original" ] || { n=$(( n + 1 )); echo "thread ${t##*/}: affinity $a, not $original" >> "$work/not-original"; }
    done
    echo "$n"
}
inherited=$(not_original)
sleep 1
: > "$work/not-original"
bad=0
left=$(not_original)
if [ "$left" != 0 ]; then cat "$work/not-original" >&2; bad=1; fi
echo "at the stop: $inherited short-lived threads with an affinity inherited from a pinned creator; 1 s later: $left threads not at their original affinity"
[ ! -e "$work/state.json" ] || { echo "state file left behind" >&2; bad=1; }
awk -v secs="$secs" -v scrapes="$scrapes" -v rounds="$rounds" -v applied="$applied" '
NR == 1 { next }
{ if (n == 0 || $1 < 60) { r0 = $2; d0 = $4; rf0 = $3; df0 = $5 }
  for (i = 2; i <= 6; i++) { if (n == 0 || $i < lo[i]) lo[i] = $i; if (n == 0 || $i > hi[i]) hi[i] = $i }
  t[n] = $1; r[n] = $2; d[n] = $4; n++; last_rf = $3; last_df = $5 }
END {
  # The floor of the last quarter of the run: what a leak raises, and a
  # passing burst of host threads does not.
  fr = -1; fd = -1
  for (k = 0; k < n; k++) if (t[k] >= 0.75 * t[n - 1]) {
    if (fr < 0 || r[k] < fr) fr = r[k]; if (fd < 0 || d[k] < fd) fd = d[k] }
  printf "soak %d s, %d scrapes, real daemon %s rounds, %s pins applied, host threads %d-%d\n", secs, scrapes, rounds, applied, lo[6], hi[6]
  printf "real: RSS %d-%d KiB (after 1 min %d, lowest in the last quarter %d), fds %d-%d (end %d)\n", lo[2], hi[2], r0, fr, lo[3], hi[3], last_rf
  printf "dry:  RSS %d-%d KiB (after 1 min %d, lowest in the last quarter %d), fds %d-%d (end %d)\n", lo[4], hi[4], d0, fd, lo[5], hi[5], last_df
  if (fr > 1.5 * r0 || fd > 1.5 * d0) { print "RSS grew by more than 50%"; exit 1 }
  if (last_rf > rf0 || last_df > df0) { print "fds grew"; exit 1 }
}' "$work/samples" || { echo "the samples (seconds, KiB, fds):" >&2; cat "$work/samples" >&2; bad=1; }
[ "$bad" = 0 ] && echo "every affinity restored (original $original)"
exit "$bad"
