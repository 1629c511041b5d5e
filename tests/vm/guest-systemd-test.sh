#!/bin/bash
# The Debian package's unit under Debian's own systemd, in the 2-node
# test-bed guest: systemd is PID 1 (not busybox), the package is installed
# with dpkg, `numaplace doctor` runs with the unit's exact settings, the
# unit is started and places another user's process, `systemctl stop` puts
# it back; returns the JSON.
#
# Usage: tests/vm/guest-systemd-test.sh [OUT.json]
#
# Host side:
#   1. `./setup.sh deb` (the release build and target/debian/numaplace_*.deb)
#      and the touch_memory example (maps MIB MiB, touches every page,
#      prints `ready <pid>`, sleeps);
#   2. the guest's root file system, once: `mmdebstrap --variant=minbase`
#      of this host's Debian release (its libc is the package's) with
#      systemd, systemd-sysv and libhwloc15, from $NUMAPLACE_DEBIAN_MIRROR
#      (default http://deb.debian.org/debian), packed as an uncompressed
#      cpio archive in tests/vm/work/systemd-root-CODENAME.cpio (~150 MB,
#      under a minute; kept for later runs: delete it to rebuild). Needs
#      root (mmdebstrap's root mode) and mmdebstrap (setup.sh test installs
#      it);
#   3. a second cpio archive with the package, touch_memory, the test
#      script and its oneshot unit (enabled, writing to ttyS0), appended to
#      the first (the kernel unpacks concatenated archives in turn);
#   4. boots `boot.sh --nodes 2 --memory 2048` with
#      `rdinit=/lib/systemd/systemd`: systemd runs from the initramfs as the
#      whole root file system.
# Guest side (bash, as the oneshot unit numaplace-boot-test.service):
#   a. `dpkg -i` the package: numaplace.service installed, neither enabled
#      nor started;
#   b. `numaplace doctor --json` as numaplace-doctor.service, a copy of the
#      installed unit whose ExecStart is doctor (Type=oneshot, no
#      Restart=): the rows and the exit status under the unit's own
#      capabilities, sandbox and system call filter;
#   c. touch_memory 32 started as user nobody on node 0's CPUs (taskset
#      -c 0-1), its pages on node 0, then its affinity widened to 0-3 (a
#      task that chose narrower CPUs itself is left alone);
#      kernel.numa_balancing set to 0 (so numaplace moves the pages, not
#      the kernel);
#   d. /etc/numaplace/numaplace.toml: the `static` policy, touch_memory's
#      thread to node 1's CPUs and its memory to node 1, scope its name;
#      `systemctl start numaplace`; waits up to 90 s for its affinity to be
#      node 1's CPUs and most of its pages on node 1; the daemon's CapEff
#      and CapBnd (/proc/MAINPID/status);
#   e. `systemctl stop numaplace`: touch_memory's affinity back to 0-3;
#      the unit's journal.
# Prints it all as one object between @@NUMAPLACE-GUEST-SYSTEMD-JSON-BEGIN@@
# / -END@@ lines; checked by crates/numaplace/tests/deb/qemu_guest_systemd.rs.
#
# Exit status: 0 with the JSON written; otherwise non-zero with the reason on
# stderr.
#
# Environment: NUMAPLACE_VM_TIMEOUT (seconds, default 600) bounds the boot;
# NUMAPLACE_DEBIAN_MIRROR; CARGO; CARGO_TARGET_DIR is honoured.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

parse_out_arg "$@"
timeout_s=${NUMAPLACE_VM_TIMEOUT:-600}
mirror=${NUMAPLACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

begin="@@NUMAPLACE-GUEST-SYSTEMD-JSON-BEGIN@@"
end="@@NUMAPLACE-GUEST-SYSTEMD-JSON-END@@"

log "building the Debian package (./setup.sh deb) and touch_memory"
"$repo/setup.sh" deb >&2 || die "./setup.sh deb failed"
deb=$(ls -t "$target"/debian/numaplace_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || die "no $target/debian/numaplace_*.deb after ./setup.sh deb"
build_examples "the touch_memory example" touch_memory
fetch_kernel
make_tmp

# 2. The guest's root file system, built once.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || die "/etc/os-release names no VERSION_CODENAME: the guest's root file system is built from this host's Debian release"
base="$here/work/systemd-root-$codename.cpio"
if [ ! -s "$base" ]; then
  command -v mmdebstrap >/dev/null \
    || die "mmdebstrap not found: apt-get install mmdebstrap (./setup.sh test installs it)"
  [ "$(id -u)" = 0 ] \
    || die "building the guest's root file system needs root (mmdebstrap; once, then kept as $base)"
  log "building the guest's root file system ($codename from $mirror; once, kept as $base)"
  mmdebstrap --variant=minbase --include=systemd,systemd-sysv,libhwloc15 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    "$codename" "$tmp/root" "$mirror" </dev/null >&2 \
    || die "mmdebstrap of $codename from $mirror failed (a Debian mirror must be reachable; NUMAPLACE_DEBIAN_MIRROR names another)"
  mkdir -p "$here/work"
  (cd "$tmp/root" && find . -mindepth 1 -print0 | cpio --null -o -H newc --quiet) > "$base.part" \
    || die "packing the root file system failed"
  mv "$base.part" "$base"
  rm -rf "$tmp/root"
fi

# 3. What this run adds: the package, touch_memory, the test and its unit.
x="$tmp/extra"
mkdir -p "$x/root" "$x/usr/local/bin" "$x/usr/local/sbin" \
  "$x/etc/systemd/system/multi-user.target.wants"
cp "$deb" "$x/root/numaplace.deb"
cp "$target/release/examples/touch_memory" "$x/usr/local/bin/"
cat > "$x/etc/systemd/system/numaplace-boot-test.service" <<'UNIT'
[Unit]
Description=numaplace's boot test (tests/vm/guest-systemd-test.sh)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/numaplace-boot-test
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
UNIT
ln -s ../numaplace-boot-test.service "$x/etc/systemd/system/multi-user.target.wants/"
# No login prompt on the console the test writes to.
ln -s /dev/null "$x/etc/systemd/system/serial-getty@ttyS0.service"

cat > "$x/usr/local/sbin/numaplace-boot-test" <<'GUEST'
#!/bin/bash
# Runs as numaplace-boot-test.service; everything it prints is on ttyS0.
rc=0
parts=()
add() { parts+=("$1"); }
json_file() { # a file's text as a JSON string
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' -e 's/\r//g' "$1" \
    | awk 'BEGIN { printf "\"" } { printf "%s%s", (NR > 1 ? "\\n" : ""), $0 } END { printf "\"" }'
}
cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
pages_on() { # pages on node $2 of process $1's largest anonymous mapping
  awk -v n="N$2=" '{ a = 0; p = 0; for (i = 2; i <= NF; i++) { if ($i ~ /^anon=/) a = substr($i, 6) + 0; if (index($i, n) == 1) p = substr($i, length(n) + 1) + 0 }
       if (a > best) { best = a; pages = p } } END { print pages + 0 }' "/proc/$1/numa_maps"
}
echo "guest: systemd $(systemctl --version | head -n 1), kernel $(uname -r), nodes $(cat /sys/devices/system/node/online)"
add "\"kernel\": \"$(uname -r)\""
add "\"systemd\": \"$(systemctl --version | head -n 1)\""
add "\"node1_cpus\": \"$(cat /sys/devices/system/node/node1/cpulist)\""

# a. The package.
echo "guest: a. dpkg -i"
dpkg -i /root/numaplace.deb > /tmp/dpkg.out 2>&1
add "\"dpkg_status\": $?"
add "\"dpkg_output\": $(json_file /tmp/dpkg.out)"
add "\"enabled_after_install\": \"$(systemctl is-enabled numaplace 2>&1)\""
add "\"active_after_install\": \"$(systemctl is-active numaplace 2>&1)\""

# b. doctor with the unit's own settings.
cat > /etc/numaplace/numaplace.toml <<'CONF'
[policy]
name = "static"
[[policy.pins]]
process = "touch_memory"
thread = 0
cpus = "2-3"
[[policy.memory]]
process = "touch_memory"
node = 1
[scope]
comms = ["touch_memory"]
CONF
sed -e 's|^ExecStart=.*|ExecStart=/usr/bin/numaplace doctor --json --config /etc/numaplace/numaplace.toml|' \
    -e 's|^Type=simple|Type=oneshot|' -e '/^Restart/d' -e '/^ExecReload/d' \
    -e '/^\[Service\]/a StandardOutput=file:/run/np-doctor.json' \
    /lib/systemd/system/numaplace.service > /etc/systemd/system/numaplace-doctor.service
systemctl daemon-reload
echo "guest: b. doctor under the unit's settings"
systemctl start numaplace-doctor.service
add "\"doctor_exit\": $(systemctl show -P ExecMainStatus numaplace-doctor.service)"
if [ -s /run/np-doctor.json ]; then
  add "\"doctor\": $(cat /run/np-doctor.json)"
else
  echo "guest: doctor wrote nothing"; journalctl -u numaplace-doctor --no-pager; rc=3
fi

# c. Another user's process on node 0, the kernel's balancing off.
echo 0 > /proc/sys/kernel/numa_balancing
taskset -c 0-1 setpriv --reuid=nobody --regid=nogroup --clear-groups \
  /usr/local/bin/touch_memory 32 > /tmp/tm.out 2>&1 &
for _ in $(seq 100); do grep -q '^ready' /tmp/tm.out && break; sleep 0.2; done
tm=$(sed -n 's/^ready \([0-9]*\).*/\1/p' /tmp/tm.out)
if [ -z "$tm" ]; then echo "guest: touch_memory did not start:"; cat /tmp/tm.out; rc=4; fi
# Its pages touched on node 0, its affinity widened to the machine's again:
# numaplace leaves alone a task that chose narrower CPUs itself.
taskset -p -c 0-3 "$tm" > /dev/null
echo "guest: c. touch_memory (pid $tm, nobody) on CPUs $(cpus_of "$tm"), $(pages_on "$tm" 0) pages on node 0"
add "\"tm_user\": \"$(stat -c %U /proc/$tm)\""
add "\"tm_cpus_before\": \"$(cpus_of "$tm")\""
add "\"tm_node1_pages_before\": $(pages_on "$tm" 1)"

# d. The unit places it.
systemctl start numaplace
add "\"start_status\": $?"
echo "guest: d. numaplace started ($(systemctl is-active numaplace))"
placed=false
for _ in $(seq 90); do
  if [ "$(cpus_of "$tm")" = 2-3 ] && [ "$(pages_on "$tm" 1)" -ge 7000 ]; then placed=true; break; fi
  sleep 1
done
add "\"placed\": $placed"
add "\"tm_cpus_placed\": \"$(cpus_of "$tm")\""
add "\"tm_node1_pages_placed\": $(pages_on "$tm" 1)"
add "\"active_while_placing\": \"$(systemctl is-active numaplace)\""
# The daemon's capabilities, read once it runs numaplace (right after
# `systemctl start` the main process may not have exec'd yet).
main=$(systemctl show -P MainPID numaplace)
add "\"daemon_exe\": \"$(readlink /proc/$main/exe)\""
add "\"daemon_capeff\": \"$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/$main/status)\""
add "\"daemon_capbnd\": \"$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/$main/status)\""
echo "guest: d. placed: $placed, CPUs $(cpus_of "$tm"), $(pages_on "$tm" 1) pages on node 1"
add "\"restarts\": $(systemctl show -P NRestarts numaplace)"

# e. Stopped: put back.
systemctl stop numaplace
add "\"stop_status\": $?"
echo "guest: e. stopped: CPUs $(cpus_of "$tm")"
add "\"tm_cpus_after_stop\": \"$(cpus_of "$tm")\""
add "\"result_after_stop\": \"$(systemctl show -P Result numaplace)\""
journalctl -u numaplace --no-pager -o cat > /tmp/journal.txt 2>&1
add "\"journal\": $(json_file /tmp/journal.txt)"
kill "$tm"

echo "@@NUMAPLACE-GUEST-SYSTEMD-JSON-BEGIN@@"
( IFS=,; echo "{${parts[*]}}" )
echo "@@NUMAPLACE-GUEST-SYSTEMD-JSON-END@@"
echo "@@NUMAPLACE-VM-EXIT=$rc@@"
systemctl poweroff --force --force
GUEST
chmod 755 "$x/usr/local/sbin/numaplace-boot-test"
(cd "$x" && find . -mindepth 1 -print0 | cpio --null -o -H newc --quiet -R 0:0) > "$tmp/extra.cpio" \
  || die "packing the run's files failed"
initrd="$tmp/guest-systemd.cpio"
cat "$base" "$tmp/extra.cpio" > "$initrd"

# 4. Boot: systemd from the initramfs, 1 GiB a node.
boot_guest 2 "$timeout_s" "$initrd" --memory 2048 \
  --append "rdinit=/lib/systemd/systemd systemd.show_status=false"
write_json "$begin" "$end"
