#!/bin/bash
# Boot the test-bed kernel with an initramfs on an emulated NUMA machine.
#
# Usage: tests/vm/boot.sh --nodes 2|4 --initrd FILE [--timeout S] [--kernel FILE]
#                         [--accel tcg|tcg-single|kvm] [--append ARGS] [--print-cmd]
#                         [--memory MIB] [--qemu-arg ARG]...
#
#   --nodes 2   -smp 4,sockets=2,cores=2,threads=1; node0 = cpus 0-1, node1 = cpus 2-3;
#               512 MiB per node; distances 10/21.
#   --nodes 4   -smp 8,sockets=4,cores=2,threads=1; one node per socket (2 cpus each);
#               256 MiB per node; 4-socket-Opteron-like square: 10 local, 16 one hop
#               (0-1, 0-2, 1-3, 2-3), 22 two hops (0-3, 1-2).
#   --memory M  guest RAM in MiB, split evenly over the nodes (default 1024: the
#               sizes above; must be a multiple of 4 MiB per node).
#   --qemu-arg A
#               one more argument appended to the QEMU command line, as it is
#               (repeatable, in order), e.g. a read-only 9p share of a host directory:
#               --qemu-arg -virtfs --qemu-arg local,path=/usr,mount_tag=hostusr,security_model=none,readonly=on
#   --timeout S kill QEMU after S seconds (default 120) and exit 124.
#   --kernel F  kernel image (default tests/vm/work/vmlinuz, see fetch-kernel.sh).
#   --accel A   QEMU accelerator (default tcg; fixtures are captured with tcg).
#               tcg-single: one host thread runs every vCPU in turn
#               (`-accel tcg,thread=single`): slower, but no vCPU waits on
#               another the host does not schedule. With one thread per vCPU
#               on a loaded 2-core host, a guest once sat for minutes in a
#               soft lockup in the kernel on behalf of numaplace,
#               most likely moving pages (TLB-shootdown IPIs between vCPUs).
#   --append A  extra kernel command-line arguments (default: $NUMAPLACE_VM_APPEND,
#               e.g. "loglevel=7" to see a soft lockup's stack on the console).
#   --print-cmd print the QEMU command line to stderr before running it.
#
# The serial console goes to stdout. Exit status: the guest script's status when
# the initramfs /init printed @@NUMAPLACE-VM-EXIT=<n>@@ (see mkinitramfs.sh),
# 124 on timeout, 125 if QEMU ended without that marker, 2 on usage errors.
set -euo pipefail

die() { echo "boot.sh: error: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)

nodes=""
initrd=""
timeout_s=120
kernel="$here/work/vmlinuz"
accel=tcg
extra_append="${NUMAPLACE_VM_APPEND:-}"
print_cmd=0
mem_total=1024
extra_qemu=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) [ $# -ge 2 ] || die "--nodes needs 2 or 4"; nodes=$2; shift 2 ;;
    --initrd) [ $# -ge 2 ] || die "--initrd needs a FILE"; initrd=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    --kernel) [ $# -ge 2 ] || die "--kernel needs a FILE"; kernel=$2; shift 2 ;;
    --accel) [ $# -ge 2 ] || die "--accel needs tcg, tcg-single or kvm"; accel=$2; shift 2 ;;
    --append) [ $# -ge 2 ] || die "--append needs ARGS"; extra_append=$2; shift 2 ;;
    --print-cmd) print_cmd=1; shift ;;
    --memory) [ $# -ge 2 ] || die "--memory needs MiB"; mem_total=$2; shift 2 ;;
    --qemu-arg) [ $# -ge 2 ] || die "--qemu-arg needs an ARG"; extra_qemu+=("$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$nodes" ] || die "--nodes 2|4 is required"
[ -n "$initrd" ] || die "--initrd FILE is required"
[ -f "$initrd" ] || die "initrd '$initrd' not found"
[ -f "$kernel" ] || die "kernel '$kernel' not found (run tests/vm/fetch-kernel.sh)"
case "$timeout_s" in ''|*[!0-9]*) die "--timeout must be a whole number of seconds" ;; esac
case "$mem_total" in ''|*[!0-9]*) die "--memory must be a whole number of MiB" ;; esac
case "$accel" in
  tcg|kvm) accel_arg=$accel ;;
  tcg-single) accel_arg="tcg,thread=single" ;;
  *) die "--accel must be tcg, tcg-single or kvm" ;;
esac
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
command -v timeout >/dev/null || die "timeout (coreutils) not found"

# The layouts. Keep tests/fixtures/README.md in step when changing them.
numa_args=()
case "$nodes" in
  2)
    smp="4,sockets=2,cores=2,threads=1"
    node_mem=$((mem_total / 2))
    # shellcheck disable=SC2054  # the commas belong to QEMU option values
    numa_args+=(
      -object "memory-backend-ram,id=mem0,size=${node_mem}M"
      -object "memory-backend-ram,id=mem1,size=${node_mem}M"
      -numa node,nodeid=0,cpus=0-1,memdev=mem0
      -numa node,nodeid=1,cpus=2-3,memdev=mem1
      -numa dist,src=0,dst=1,val=21
      -numa dist,src=1,dst=0,val=21
    )
    ;;
  4)
    smp="8,sockets=4,cores=2,threads=1"
    node_mem=$((mem_total / 4))
    for n in 0 1 2 3; do
      numa_args+=(
        -object "memory-backend-ram,id=mem$n,size=${node_mem}M"
        -numa "node,nodeid=$n,cpus=$((2 * n))-$((2 * n + 1)),memdev=mem$n"
      )
    done
    # Square 0-1-3-2-0: neighbours one HyperTransport hop apart, diagonals two.
    dist() { numa_args+=(-numa "dist,src=$1,dst=$2,val=$3" -numa "dist,src=$2,dst=$1,val=$3"); }
    dist 0 1 16
    dist 0 2 16
    dist 1 3 16
    dist 2 3 16
    dist 0 3 22
    dist 1 2 22
    ;;
  *) die "--nodes must be 2 or 4 (got '$nodes')" ;;
esac
[ $((node_mem % 4)) = 0 ] && [ "$node_mem" -gt 0 ] \
  || die "--memory $mem_total does not split into multiples of 4 MiB over $nodes nodes"
mem_total=$((node_mem * nodes))

append="console=ttyS0 panic=-1 quiet"
[ -z "$extra_append" ] || append="$append $extra_append"

cmd=(
  qemu-system-x86_64
  -machine pc -accel "$accel_arg" -cpu max
  -m "${mem_total}M" -smp "$smp"
  "${numa_args[@]}"
  -kernel "$kernel" -initrd "$initrd"
  -append "$append"
  -nographic -no-reboot
  -net none
  "${extra_qemu[@]}"
)
if [ "$print_cmd" = 1 ]; then
  for a in "${cmd[@]}"; do
    case "$a" in *[[:space:]]*) printf '"%s" ' "$a" ;; *) printf '%s ' "$a" ;; esac
  done >&2
  echo >&2
fi

log=$(mktemp "${TMPDIR:-/tmp}/numaplace-boot.XXXXXX")
was_tty=0
[ -t 0 ] && was_tty=1
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  rm -f "$log"
  # -nographic puts a terminal in raw mode; undo that if QEMU was killed.
  if [ "$was_tty" = 1 ]; then stty sane 2>/dev/null || true; fi
}
trap cleanup EXIT

set +e
if [ "$was_tty" = 1 ]; then
  timeout -k 5 "$timeout_s" "${cmd[@]}" | tee "$log"
else
  timeout -k 5 "$timeout_s" "${cmd[@]}" </dev/null | tee "$log"
fi
statuses=("${PIPESTATUS[@]}")
set -e
qemu_rc=${statuses[0]}

if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  echo "boot.sh: error: timeout after ${timeout_s}s, QEMU killed" >&2
  exit 124
fi
guest_rc=$(tr -d '\r' < "$log" | sed -n 's/^@@NUMAPLACE-VM-EXIT=\([0-9]*\)@@$/\1/p' | tail -n 1)
if [ -z "$guest_rc" ]; then
  echo "boot.sh: error: QEMU exited (status $qemu_rc) without the guest's @@NUMAPLACE-VM-EXIT@@ marker" >&2
  exit 125
fi
if [ "$qemu_rc" != 0 ]; then
  echo "boot.sh: warning: QEMU exited with status $qemu_rc" >&2
fi
exit "$guest_rc"
