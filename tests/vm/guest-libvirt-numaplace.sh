#!/bin/bash
# numaplace and libvirt in the 2-node guest: builds numaplace, then runs
# guest-libvirt-bed.sh with libvirt-numaplace-test.sh as its guest script
# (numaplace and packaging/numad copied in), the JSON to OUT.json or stdout
# (run by the `qemu_libvirt_daemon` test).
#
# Usage: tests/vm/guest-libvirt-numaplace.sh [OUT.json]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
parse_out_arg "$@"
# About 160 s here; a loaded CI machine has taken longer.
export NUMAPLACE_VM_TIMEOUT=${NUMAPLACE_VM_TIMEOUT:-900}
build_numaplace
# One host thread runs the guest's vCPUs in turn (tcg-single): with a thread
# per vCPU on a loaded 2-core host, a vCPU the host does not schedule keeps
# the others waiting (TLB shootdowns while libvirt moves the domain's
# pages), and the guest once sat minutes in a soft lockup.
args=(--guest-script "$here/libvirt-numaplace-test.sh" --bin "$numaplace" --bin "$repo/packaging/numad"
  --accel "${NUMAPLACE_VM_ACCEL:-tcg-single}")
[ -z "$out" ] || args+=("$out")
exec "$here/guest-libvirt-bed.sh" "${args[@]}"
