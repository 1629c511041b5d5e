#!/bin/sh
# gather-procfs.sh DESTDIR PID...
#
# Copies what numaplace's task readers use of /proc for the given processes
# (and all their threads) into DESTDIR/proc/..., file by file with `cat`
# (proc files report size 0), plus the `exe` link and the links of the
# fds that point at KVM vCPUs, recreated as symlinks to the same targets.
# Together with gather-topology.sh's sys/ it makes a root numaplace can
# read with `--root DESTDIR`. Runs under busybox sh, dash and bash.
set -eu

[ $# -ge 2 ] || { echo "usage: $0 DESTDIR PID..." >&2; exit 2; }
dest=$1
shift

copy() { # copy SRC DST: cat a proc file, quietly skipping what is gone or unreadable
    mkdir -p "$(dirname "$2")"
    cat "$1" > "$2" 2>/dev/null || rm -f "$2"
}

for pid in "$@"; do
    case "$pid" in '' | *[!0-9]*) echo "$0: not a pid: $pid" >&2; exit 2 ;; esac
    src=/proc/$pid
    out=$dest/proc/$pid
    [ -d "$src" ] || { echo "$0: no process $pid" >&2; exit 1; }
    for f in stat status comm cmdline cgroup numa_maps; do
        copy "$src/$f" "$out/$f"
    done
    if target=$(readlink "$src/exe" 2>/dev/null); then
        ln -sfn "$target" "$out/exe"
    fi
    mkdir -p "$out/fd"
    for fd in "$src"/fd/*; do
        target=$(readlink "$fd" 2>/dev/null) || continue
        case "$target" in
            anon_inode:kvm-vcpu:*) ln -sfn "$target" "$out/fd/$(basename "$fd")" ;;
        esac
    done
    for t in "$src"/task/*; do
        tid=$(basename "$t")
        for f in stat status comm; do
            copy "$t/$f" "$out/task/$tid/$f"
        done
    done
done
