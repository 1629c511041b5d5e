#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo-fuzz
# (libFuzzer + AddressSanitizer); `--build` only builds them (.ci/run builds
# them in the background while the QEMU tests leave a CPU idle). Exits non-zero as soon as a target
# crashes (a panic is a crash); the input is left in fuzz/artifacts/<target>/
# and can be replayed with `cargo fuzz run <target> <file>`.
#
# Works on the stable toolchain: cargo-fuzz passes nightly-only -Z flags
# (-Zsanitizer), which RUSTC_BOOTSTRAP=1 lets a stable rustc accept. Installs
# cargo-fuzz if it is missing. Seeds (real captures) are in fuzz/seeds/; the
# corpus libFuzzer grows is kept in fuzz/corpus/ (ignored by git).
set -euo pipefail

build_only=0
if [ "${1:-}" = --build ]; then
    build_only=1
    shift
fi
secs="${1:-60}"
case "$secs" in
    '' | *[!0-9]*) echo "usage: $0 [--build | SECONDS]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

# fuzz/Cargo.lock (its own workspace) as committed: a dependency that
# moved fails here rather than being re-resolved silently.
cargo metadata --locked --format-version 1 >/dev/null
targets=$(cargo fuzz list)
cargo fuzz build
if [ "$build_only" = 1 ]; then
    echo "fuzz: built $(echo $targets | wc -w) targets" >&2
    exit 0
fi
for t in $targets; do
    echo "fuzz: $t for ${secs}s" >&2
    mkdir -p "corpus/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    # The first corpus directory is written to; the seeds are only read.
    cargo fuzz run "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -print_final_stats=1 -close_fd_mask=1
done
echo "fuzz: all targets ran ${secs}s without a crash" >&2
