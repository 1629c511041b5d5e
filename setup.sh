#!/usr/bin/env bash
# numaplace from a fresh Debian 12 or 13 machine that has git and a Rust
# toolchain (1.85 or later), run as root or as a user who may sudo:
#
#   ./setup.sh            installs the Debian packages the build needs (only
#                         those missing), builds, and runs the main job:
#                         `numaplace compare` on the built-in default scenario
#   ./setup.sh test       installs what the tests need (only what is missing)
#                         and runs the whole test suite: formatting, the
#                         size check (scripts/size-check), clippy with the
#                         workspace's lints, cargo doc with warnings as
#                         errors, the unit and integration tests, the QEMU
#                         guests and long tests, meanwhile the fuzzers' build
#                         and the MSRV check (scripts/msrv-check: Rust 1.85,
#                         Debian 13's, in a trixie chroot), the Debian
#                         package's file list and unit, and the fuzzers for
#                         a bounded time. CI runs exactly this.
#   ./setup.sh deb        builds the Debian package into target/debian/
#
# Each can run again: packages already installed are not touched, cargo
# rebuilds only what changed, the QEMU kernel and cargo's helper tools are
# fetched once. Exit status: 0 done, 1 a build or test failed, 2 something
# this machine lacks (said in one line, with what to do).
set -euo pipefail
cd "$(dirname "$0")"

# Build: a C linker and libc headers (rustc links through cc), pkg-config and
# libhwloc-dev (the hwloc binding links Debian's libhwloc), libudev-dev
# (libhwloc's pkg-config file names it), ca-certificates (cargo fetches
# crates over TLS).
build_packages=(gcc libc6-dev pkg-config libhwloc-dev libudev-dev ca-certificates)
# Tests, besides: hwloc (lstopo-no-graphics, which the topology tests compare
# against), bzip2 and xz-utils (the fixture tarballs), qemu-system-x86,
# busybox-static and cpio (the QEMU guests, tests/vm/), numactl (migratepages,
# which the daemon test compares numaplace's page moves with), g++ (libFuzzer,
# built by cargo-fuzz), dpkg-dev (dpkg-shlibdeps, for the package's
# dependencies), python3 (the clients of tests/host/hostile.sh and soak.sh),
# libpfm4 (libpfm.so.4, which numaplace loads at run time for model-specific
# events; crates/numaplace-linux/tests/it/libpfm_cpus.rs checks its encodings for
# each CPU numaplace knows and fails without it; no -dev package: nothing
# links it), tmux (crates/numaplace/tests/cli/cli_top.rs drives `numaplace top`
# in a detached tmux session with send-keys and capture-pane; it skips,
# saying so, without tmux), libvirt-daemon-driver-qemu (virt-qemu-run:
# libvirt starting a domain with placement='auto', which asks numaplace as
# numad, crates/numaplace/tests/long/qemu_libvirt_numad.rs), libvirt-daemon and
# libvirt-clients (libvirtd and virsh, run inside the 2-node guest from the
# host's /usr: numaplace placing libvirt's domains through libvirt,
# crates/numaplace/tests/long/qemu_libvirt_daemon.rs, tests/vm/guest-libvirt-bed.sh),
# mmdebstrap (the Debian root file system, systemd and all, that the boot
# test's guest runs the package's unit in, built once from a Debian mirror
# and kept in tests/vm/work/: crates/numaplace/tests/deb/qemu_guest_systemd.rs,
# tests/vm/guest-systemd-test.sh).
test_packages=(hwloc bzip2 xz-utils tar qemu-system-x86 busybox-static cpio numactl g++ dpkg-dev python3 libpfm4 tmux libvirt-daemon-driver-qemu libvirt-daemon libvirt-clients mmdebstrap)

fail() { # one line, exit 2: what this machine lacks and what to do
    echo "setup.sh: $*" >&2
    exit 2
}
say() { echo "== [${SECONDS}s] $*" >&2; } # seconds since the start: where a slow run spends them

usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
}

need_debian() {
    command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 ||
        fail "this script installs Debian packages with apt-get, which this machine lacks; on another distribution install the equivalents of: ${build_packages[*]} ${test_packages[*]}"
}

# Installs the packages named that are not installed yet: nothing to do, no
# root needed; something to do, root or sudo.
install_missing() {
    need_debian
    local missing=() p
    for p in "$@"; do
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local as=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 ||
            fail "needs Debian packages ${missing[*]} and installing them needs root: run this as root, or install sudo, or run 'apt-get install ${missing[*]}' as root first"
        as=(sudo)
    fi
    say "installing ${missing[*]}"
    "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# A Rust toolchain new enough for the workspace: its rust-version, 1.85
# (Debian 13's own rustc; scripts/msrv-check builds with it).
need_rust() {
    command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 ||
        fail "no Rust toolchain: cargo and rustc are not on PATH; install Rust 1.85 or later (rustup, or Debian 13's 'apt-get install cargo'), add it to PATH (rustup: . ~/.cargo/env), and run this again"
    local v major minor
    v=$(rustc --version | awk '{ print $2 }')
    major=${v%%.*}
    minor=${v#*.}
    minor=${minor%%.*}
    [ "$major" -gt 1 ] || [ "$minor" -ge 85 ] ||
        fail "rustc $v is too old: numaplace needs Rust 1.85 or later (rustup update, or Debian 13's cargo)"
}

need_components() {
    local c
    for c in fmt clippy; do
        cargo "$c" --version >/dev/null 2>&1 ||
            fail "the tests need cargo $c, which this toolchain lacks: rustup component add ${c/fmt/rustfmt}"
    done
}

# cargo-installed helpers (cargo-fuzz, cargo-deb), once.
need_cargo_tool() { # SUBCOMMAND CRATE VERSION
    cargo "$1" --version >/dev/null 2>&1 && return 0
    say "installing $2 $3 (cargo install, once)"
    cargo install "$2" --version "$3" --locked
}

target_dir() { echo "${CARGO_TARGET_DIR:-target}"; }

main_job() {
    need_rust
    install_missing "${build_packages[@]}"
    say "building (cargo build --release)"
    cargo build --release --locked -p numaplace
    say "the main job: numaplace compare (the built-in default scenario)"
    "$(target_dir)/release/numaplace" compare
}

build_deb() {
    need_rust
    install_missing "${build_packages[@]}" dpkg-dev
    need_cargo_tool deb cargo-deb 3.8.0
    local t
    t=$(target_dir)
    say "building the Debian package"
    cargo build --release --locked -p numaplace
    # The man pages and completions come from the binary's own command line.
    rm -rf "$t/release/package"
    mkdir -p "$t/release/package/completions"
    "$t/release/numaplace" manpages "$t/release/package/man" >/dev/null
    gzip -9n "$t"/release/package/man/*.1 # Debian Policy 12.1: compressed
    "$t/release/numaplace" completions bash >"$t/release/package/completions/numaplace.bash"
    "$t/release/numaplace" completions zsh >"$t/release/package/completions/_numaplace"
    "$t/release/numaplace" completions fish >"$t/release/package/completions/numaplace.fish"
    cargo deb -p numaplace --no-build --locked
}

test_suite() {
    need_rust
    need_components
    install_missing "${build_packages[@]}" "${test_packages[@]}"
    local status=0 s failed_steps=()
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT

    say "rustfmt"
    cargo fmt --all -- --check
    say "sizes (scripts/size-check: files at most 800 non-test lines, functions 150)"
    scripts/size-check
    say "clippy"
    cargo clippy --workspace --all-targets --locked -- -D warnings
    say "rustdoc (cargo doc --no-deps, warnings are errors)"
    RUSTDOCFLAGS="${RUSTDOCFLAGS:+$RUSTDOCFLAGS }-D warnings" cargo doc --workspace --no-deps --locked

    say "tests"
    set +e
    cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
    s=${PIPESTATUS[0]}
    set -e
    [ "$status" -ne 0 ] || status=$s

    # Ignored by the plain run: they boot QEMU (2- and 4-node guests, a VM
    # on this host) or run for 30 s (the daemon under thread churn). One at
    # a time: two guests at once on a small machine only slow each other.
    # Meanwhile, one job at a time and niced, the fuzzers build (a target
    # that does not compile fails the run) and then the MSRV check runs
    # (scripts/msrv-check: the workspace checked by Debian 13's Rust 1.85 in
    # a trixie chroot): the QEMU guests run on one host thread (tcg-single)
    # and the host side mostly waits, so a CPU is idle there (about 4
    # minutes of building and 3 of the MSRV check saved).
    local side_log side_status side_jobs
    side_log=$(mktemp)
    side_status=$(mktemp)
    (
        s=0
        CARGO_BUILD_JOBS=1 nice -n 10 fuzz/run.sh --build || s=$?
        echo "fuzz $s" >>"$side_status"
        s=0
        CARGO_BUILD_JOBS=1 nice -n 10 scripts/msrv-check || s=$?
        echo "msrv $s" >>"$side_status"
    ) >"$side_log" 2>&1 &
    side_jobs=$!
    say "QEMU and long tests"
    set +e
    # --workspace, as above: `-p numaplace` alone resolves the dependencies'
    # features differently and rebuilds them (2 minutes on 2 CPUs).
    # crates/numaplace/tests/long/: the qemu_* modules, numad_divert and
    # daemon_churn, every test of them #[ignore]d.
    cargo test --workspace --locked --test long --no-fail-fast -- --ignored --test-threads=1 2>&1 |
        tee -a "$log"
    s=${PIPESTATUS[0]}
    set -e
    [ "$status" -ne 0 ] || status=$s

    # Then the package's unit under Debian's systemd in a QEMU guest (the
    # boot test: about a minute to build its root file system the first
    # time, a few to boot and run).
    say "the Debian package, its file list and its unit under systemd"
    set +e
    (build_deb)
    s=$?
    if [ "$s" -eq 0 ]; then
        # crates/numaplace/tests/deb/: package and qemu_guest_systemd.
        cargo test --workspace --locked --test deb \
            -- --ignored --test-threads=1 2>&1 | tee -a "$log"
        s=${PIPESTATUS[0]}
    fi
    set -e
    [ "$status" -ne 0 ] || status=$s

    say "the fuzzers' build and the MSRV check (Rust 1.85), run meanwhile"
    set +e
    wait "$side_jobs"
    cat "$side_log"
    s=$(awk '$1 == "msrv" { print $2 }' "$side_status")
    s=${s:-1}
    [ "$s" -eq 0 ] || failed_steps+=("the MSRV check (scripts/msrv-check, exit $s)")
    [ "$status" -ne 0 ] || status=$s
    say "fuzz (the parsers of numaplace-parse, bounded)"
    s=$(awk '$1 == "fuzz" { print $2 }' "$side_status")
    s=${s:-1}
    [ "$s" -eq 0 ] || failed_steps+=("the fuzzers' build (fuzz/run.sh --build, exit $s)")
    rm -f "$side_log" "$side_status"
    if [ "$s" -eq 0 ]; then
        fuzz/run.sh "${NUMAPLACE_FUZZ_SECONDS:-12}"
        s=$?
    fi
    set -e
    [ "$status" -ne 0 ] || status=$s

    # cargo ends on the last crate's doc-tests, often "0 passed": close with
    # the whole run's count. One count per test binary (its Running/Doc-tests
    # line, hash cut off), the last run's: the plain run lists the QEMU and
    # package tests as ignored, their own steps then run them.
    awk '/^ *(Running|Doc-tests) / { bin = $0; sub(/^ +/, "", bin); sub(/-[0-9a-f]+\)$/, "", bin) }
         /^test result:/ { p[bin] = $4; f[bin] = $6; i[bin] = $8 }
         END { for (b in p) { tp += p[b]; tf += f[b]; ti += i[b] }
               printf "tests: %d passed, %d failed, %d skipped\n", tp, tf, ti }' "$log"
    # The fuzzers print thousands of lines after the tests: name the failures
    # again at the very end, where a reader of a cut log still sees them.
    if [ ${#failed_steps[@]} -gt 0 ]; then
        echo "failed steps:"
        printf '  %s\n' "${failed_steps[@]}"
    fi
    if grep -q -E '^test .* FAILED$|^error: test failed' "$log"; then
        echo "failed tests:"
        grep -E '^test .* FAILED$' "$log" | sed 's/^/  /' || true
        grep -E "^error: test failed" "$log" | sed 's/^/  /' | head -20 || true
        # Each failure's panic and its message (an assertion's left and
        # right, a test bed's failed checks), up to its backtrace: newer Rust
        # names the thread's id too, `thread 'name' (1234) panicked at`.
        awk '/^thread .* panicked at / { n = 60; shown++ }
             /^stack backtrace:|^note: run with `RUST_BACKTRACE/ { n = 0 }
             shown <= 6 && n > 0 { print "  " substr($0, 1, 400); n-- }' "$log" | head -200 || true
    fi
    return "$status"
}

case "${1:-compare}" in
compare) main_job ;;
test) test_suite ;;
deb) build_deb ;;
-h | --help | help) usage ;;
*) fail "unknown command '$1': give none (build and compare), test or deb (--help says more)" ;;
esac
