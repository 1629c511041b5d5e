#!/bin/sh
# Pack a tiny busybox initramfs for the QEMU test bed.
#
# Usage: tests/vm/mkinitramfs.sh [options] OUT.cpio.gz [FILE...]
#
#   FILE...            extra files copied into the guest's /bin (mode kept), e.g.
#                      a static numaplace binary or static test programs.
#                      Dynamic binaries will NOT run from here: the guest has
#                      no libc (use --bin-with-libs).
#   --script FILE      the guest script, installed as /test.sh and run by /init
#                      with busybox sh (cwd /, PATH=/bin:/sbin:/usr/bin:/usr/sbin).
#                      Without it, /init starts an interactive shell on the console.
#   --add SRC=DEST     copy SRC to the absolute guest path DEST (dirs created).
#   --bin-with-libs FILE
#                      copy a dynamically linked binary into /bin, plus every
#                      shared library `ldd FILE` lists for it and the dynamic
#                      loader, each at the path ldd resolves it to on the host
#                      (symlinks followed). Repeatable. ldd may run FILE's
#                      loader: only use it on binaries you trust (your build).
#
# The generated /init mounts /proc, /sys, /dev (devtmpfs), /tmp (tmpfs) and
# /sys/fs/cgroup (cgroup2, if the kernel has it), runs /test.sh, prints
#     @@NUMAPLACE-VM-EXIT=<status>@@
# on the console (boot.sh turns it into its own exit status), then `poweroff -f`.
#
# Needs: busybox-static (/bin/busybox must be a static binary), GNU cpio, gzip.
set -eu

die() { echo "mkinitramfs.sh: error: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }

script=""
adds=""
bin_libs=""
nl='
'
while [ $# -gt 0 ]; do
  case "$1" in
    --script) [ $# -ge 2 ] || die "--script needs a FILE"; script=$2; shift 2 ;;
    --add) [ $# -ge 2 ] || die "--add needs SRC=DEST"; adds="$adds$2$nl"; shift 2 ;;
    --bin-with-libs)
      [ $# -ge 2 ] || die "--bin-with-libs needs a FILE"
      case "$2" in *"$nl"*) die "--bin-with-libs: file names with newlines are not supported" ;; esac
      bin_libs="$bin_libs$2$nl"; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) die "unknown option '$1'" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
out=$1
shift

busybox=${BUSYBOX:-/bin/busybox}
[ -x "$busybox" ] || die "$busybox not found (apt-get install busybox-static)"
if command -v file >/dev/null 2>&1; then
  case "$(file -L "$busybox")" in
    *"statically linked"*|*"static-pie linked"*) ;;
    *) die "$busybox is not statically linked (apt-get install busybox-static)" ;;
  esac
fi
command -v cpio >/dev/null 2>&1 || die "cpio not found (apt-get install cpio)"
command -v gzip >/dev/null 2>&1 || die "gzip not found"
[ -z "$script" ] || [ -f "$script" ] || die "guest script '$script' not found"
for f in "$@"; do
  [ -f "$f" ] || die "extra file '$f' not found"
done
if [ -n "$bin_libs" ]; then
  command -v ldd >/dev/null 2>&1 || die "ldd not found (needed by --bin-with-libs; apt-get install libc-bin)"
  printf '%s' "$bin_libs" | while IFS= read -r f; do
    [ -f "$f" ] || die "--bin-with-libs: '$f' not found"
  done
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/mkinitramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT INT TERM

mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" \
  "$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/root" \
  "$stage/etc" "$stage/run"
cp "$busybox" "$stage/bin/busybox"
chmod 0755 "$stage/bin/busybox"
# One symlink per applet at the path busybox itself reports (bin/sh, sbin/poweroff, ...).
"$busybox" --list-full | while IFS= read -r applet; do
  [ "$applet" = bin/busybox ] && continue
  mkdir -p "$stage/$(dirname "$applet")"
  ln -sf /bin/busybox "$stage/$applet"
done
[ -e "$stage/bin/sh" ] || ln -s busybox "$stage/bin/sh"

# A console node lets the kernel hand /init a console before devtmpfs is up.
if [ "$(id -u)" = 0 ]; then
  mknod -m 600 "$stage/dev/console" c 5 1 2>/dev/null || true
  mknod -m 666 "$stage/dev/null" c 1 3 2>/dev/null || true
fi

echo "root:x:0:0:root:/root:/bin/sh" > "$stage/etc/passwd"
echo "root:x:0:" > "$stage/etc/group"

# The applet links point at the absolute /bin/busybox, which on the host is the
# host's busybox: never copy *through* one (an extra file named like an applet,
# e.g. `true`, replaces the link instead).
for f in "$@"; do
  rm -f "$stage/bin/$(basename "$f")"
  cp "$f" "$stage/bin/$(basename "$f")"
done

# Dynamic binaries: the binary into /bin, its libraries and the loader where
# ldd says they are (`libx.so => /path (0x..)`, `/lib64/ld-linux-x86-64.so.2
# (0x..)`; the vDSO has no path and is skipped).
printf '%s' "$bin_libs" | while IFS= read -r f; do
  [ -n "$f" ] || continue
  if ! deps=$(LC_ALL=C ldd "$f" 2>&1); then
    case "$deps" in
      *"not a dynamic executable"*) deps="" ;;
      *) die "--bin-with-libs: ldd '$f' failed: $deps" ;;
    esac
  fi
  case "$deps" in
    *"=> not found"*)
      die "--bin-with-libs: '$f' needs libraries ldd cannot find:$nl$(printf '%s\n' "$deps" | grep '=> not found')" ;;
  esac
  rm -f "$stage/bin/$(basename "$f")"
  cp "$f" "$stage/bin/$(basename "$f")"
  printf '%s\n' "$deps" \
    | awk '$2 == "=>" && $3 ~ /^\// { print $3; next } $1 ~ /^\// { print $1 }' \
    | while IFS= read -r lib; do
        [ -f "$lib" ] || die "--bin-with-libs: '$f': library '$lib' (from ldd) not found"
        mkdir -p "$stage$(dirname "$lib")"
        if [ -L "$stage$lib" ]; then rm -f "$stage$lib"; fi
        cp -L "$lib" "$stage$lib"
      done
done

printf '%s' "$adds" | while IFS= read -r spec; do
  [ -n "$spec" ] || continue
  src=${spec%%=*}
  dest=${spec#*=}
  [ "$src" != "$spec" ] || die "--add '$spec': expected SRC=DEST"
  case "$dest" in /*) ;; *) die "--add '$spec': DEST must be an absolute guest path" ;; esac
  [ -e "$src" ] || die "--add '$spec': '$src' not found"
  mkdir -p "$stage$(dirname "$dest")"
  if [ -L "$stage$dest" ]; then rm -f "$stage$dest"; fi
  cp -R "$src" "$stage$dest"
done

if [ -n "$script" ]; then
  rm -f "$stage/test.sh"
  cp "$script" "$stage/test.sh"
  chmod 0755 "$stage/test.sh"
fi

cat > "$stage/init" <<'INIT'
#!/bin/sh
# Generated by tests/vm/mkinitramfs.sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec 0</dev/console 1>/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts 2>/dev/null
if grep -qw cgroup2 /proc/filesystems; then
  mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
fi
hostname numaplace-vm
# Quiet the kernel on the console so it does not interleave with our output.
echo 1 > /proc/sys/kernel/printk 2>/dev/null
cd /
if [ -f /test.sh ]; then
  echo "@@NUMAPLACE-VM-START@@"
  sh /test.sh
  rc=$?
  echo "@@NUMAPLACE-VM-EXIT=$rc@@"
else
  echo "numaplace-vm: no /test.sh; starting a shell (exit it to power off)"
  setsid cttyhack sh || sh
fi
sync
# Let the UART drain before the power goes.
sleep 1
poweroff -f
INIT
chmod 0755 "$stage/init"

mkdir -p "$(dirname "$out")"
case "$out" in /*) abs_out=$out ;; *) abs_out="$(pwd)/$out" ;; esac
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) \
  | gzip -9 > "$abs_out.tmp" || die "cpio/gzip failed"
mv "$abs_out.tmp" "$abs_out"
echo "mkinitramfs.sh: wrote $out ($(wc -c < "$abs_out") bytes)" >&2
