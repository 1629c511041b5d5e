# shellcheck shell=bash
# What the guest-*-test.sh scripts share: each sources this first, under
# `set -euo pipefail`, as
#     . "$(dirname "$0")/lib.sh"
# and then runs the same steps with these functions:
#
#   parse_out_arg "$@"    the one optional argument, OUT.json, into `out` ("" for
#                         stdout); -h/--help prints the script's header comment
#   build_numaplace       cargo build --release of numaplace; sets `numaplace`
#   build_examples WHAT EXAMPLE...
#                         cargo build --release of numaplace-linux's EXAMPLEs
#                         (WHAT names them in the error); sets `examples`, their
#                         directory
#   fetch_kernel          fetch-kernel.sh (idempotent)
#   make_tmp              `tmp`, a temporary directory removed on exit; the
#                         guest script goes to $tmp/guest.sh
#   pack_initramfs OUT BINARY...
#                         mkinitramfs.sh: $tmp/guest.sh as /test.sh, guest-lib.sh
#                         as /guest-lib.sh, the BINARYs with their libraries
#   boot_guest NODES TIMEOUT INITRD [boot.sh option...]
#                         boot.sh, its console to stderr and $tmp/console; dies
#                         unless the guest script exited 0
#   console_between BEGIN END
#                         the console's lines between a BEGIN line and an END
#                         line (`\r` stripped); status 1 when no BEGIN line came
#   write_json BEGIN END  the JSON between the markers to `out`, or to stdout;
#                         dies when there is none
#
# and die (message, exit 1) and log, both on stderr with the script's name.
# Also set: `me` (the script's name), `here` (tests/vm), `repo` (the checkout),
# `cargo` (CARGO, default cargo) and `target` (CARGO_TARGET_DIR, absolute,
# default the checkout's target/).

me=${0##*/}
die() { echo "$me: error: $*" >&2; exit 1; }
log() { echo "$me: $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$repo/target}
case "$target" in /*) ;; *) target="$repo/$target" ;; esac

parse_out_arg() {
  out=""
  case "${1:-}" in
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (usage: $0 [OUT.json])" ;;
    "") ;;
    *) out=$1 ;;
  esac
  [ $# -le 1 ] || die "too many arguments (usage: $0 [OUT.json])"
}

build_numaplace() {
  (cd "$repo" && "$cargo" build --release --locked -p numaplace --bin numaplace) >&2 \
    || die "cargo build of numaplace failed"
  numaplace="$target/release/numaplace"
  [ -x "$numaplace" ] || die "$numaplace missing after the build"
}

build_examples() {
  local what=$1 example
  shift
  local args=()
  for example in "$@"; do args+=(--example "$example"); done
  (cd "$repo" && "$cargo" build --release --locked -p numaplace-linux "${args[@]}") >&2 \
    || die "cargo build of $what failed"
  examples="$target/release/examples"
  for example in "$@"; do
    [ -x "$examples/$example" ] || die "$examples/$example missing after the build"
  done
}

fetch_kernel() {
  "$here/fetch-kernel.sh" || die "fetch-kernel.sh failed"
}

make_tmp() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/${me%.sh}.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
}

pack_initramfs() {
  local initrd=$1 binary
  shift
  local args=(--script "$tmp/guest.sh" --add "$here/guest-lib.sh=/guest-lib.sh")
  for binary in "$@"; do args+=(--bin-with-libs "$binary"); done
  "$here/mkinitramfs.sh" "${args[@]}" "$initrd" || die "mkinitramfs.sh failed"
}

boot_guest() {
  local nodes=$1 timeout_s=$2 initrd=$3 start boot_rc
  shift 3
  log "booting the $nodes-node guest (timeout ${timeout_s}s)"
  start=$(date +%s)
  set +e
  "$here/boot.sh" --nodes "$nodes" "$@" --initrd "$initrd" --timeout "$timeout_s" </dev/null \
    | tee "$tmp/console" >&2
  boot_rc=${PIPESTATUS[0]}
  set -e
  log "guest finished after $(($(date +%s) - start))s, boot.sh status $boot_rc"
  [ "$boot_rc" = 0 ] || die "the guest failed (boot.sh status $boot_rc; console above)"
}

console_between() {
  tr -d '\r' < "$tmp/console" \
    | awk -v b="$1" -v e="$2" '$0 == e { on = 0 } on { print } $0 == b { on = 1; seen = 1 }
        END { if (!seen) exit 1 }'
}

write_json() {
  console_between "$1" "$2" > "$tmp/json" || die "no $1 line on the console"
  grep -q '[^[:space:]]' "$tmp/json" || die "the guest printed no JSON between the markers"
  if [ -n "$out" ]; then
    cp "$tmp/json" "$out"
    log "wrote $out"
  else
    cat "$tmp/json"
  fi
}
