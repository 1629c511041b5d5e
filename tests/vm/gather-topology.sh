#!/bin/sh
# Copy the topology-relevant files of /sys and /proc into DESTDIR, keeping paths.
#
# Usage: gather-topology.sh DESTDIR
#
# Produces DESTDIR/sys/... and DESTDIR/proc/... that hwloc (`lstopo -i DESTDIR`)
# and numaplace's SysRoot can read as if they were the machine's own.
# The file list follows what hwloc's Linux backend reads (see
# /usr/bin/hwloc-gather-topology): cpu and node masks, per-cpu topology and
# caches, cpufreq maxima, cpu_capacity, node meminfo/distance/hugepages,
# /proc/{cpuinfo,meminfo,mounts}, /proc/self/{status,cgroup,mountinfo,cpuset},
# DMI ids (serial numbers and UUIDs left out) and the caller's cgroup cpuset
# files. Each file is copied with `cat` (sysfs reports size 4096 for all of
# them); unreadable or absent files are skipped quietly. The /sys/bus/{cpu,node}
# symlinks and /sys/class/dmi/id are recreated as symlinks.
#
# Plain POSIX sh: runs under busybox sh inside the test guests and under
# dash/bash on a host. Override the source root with SRC=/other/root (testing).
set -eu

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DESTDIR" >&2
  exit 2
fi
dest=$1
src=${SRC:-}
mkdir -p "$dest" || { echo "gather-topology.sh: error: cannot create '$dest'" >&2; exit 1; }
[ -d "$src/sys/devices/system/cpu" ] || {
  echo "gather-topology.sh: error: $src/sys/devices/system/cpu missing (is sysfs mounted?)" >&2
  exit 1
}
[ -r "$src/proc/cpuinfo" ] || {
  echo "gather-topology.sh: error: $src/proc/cpuinfo unreadable (is procfs mounted?)" >&2
  exit 1
}
count=0

# save PATH: copy one regular file by cat; skip it quietly when absent/unreadable.
save() {
  [ -f "$src$1" ] && [ -r "$src$1" ] || return 0
  _d=$(dirname "$1")
  mkdir -p "$dest$_d" 2>/dev/null || return 0
  if cat "$src$1" > "$dest$1" 2>/dev/null; then
    count=$((count + 1))
  else
    rm -f "$dest$1"
  fi
  return 0
}

# save_glob PATTERN...: save every regular file matching the patterns.
save_glob() {
  for _f in "$@"; do
    # unmatched patterns stay literal; save() skips them
    save "${_f#"$src"}"
  done
}

# save_link PATH: recreate a symlink with the same (relative) target.
save_link() {
  [ -L "$src$1" ] || return 0
  _t=$(readlink "$src$1" 2>/dev/null) || return 0
  mkdir -p "$dest$(dirname "$1")" 2>/dev/null || return 0
  rm -f "$dest$1"
  ln -s "$_t" "$dest$1" 2>/dev/null || return 0
}

# ---- /proc --------------------------------------------------------------------
for f in cpuinfo meminfo mounts version; do save "/proc/$f"; done
# /proc/self is the cat process reading it; store proc/self as a real directory.
mkdir -p "$dest/proc/self"
for f in status cgroup mountinfo cpuset; do save "/proc/self/$f"; done

# ---- cpus ---------------------------------------------------------------------
c=/sys/devices/system/cpu
for f in online possible present offline kernel_max isolated nohz_full; do save "$c/$f"; done
for cpu in "$src$c"/cpu[0-9]*; do
  [ -d "$cpu" ] || continue
  n=${cpu#"$src"}
  save "$n/online"
  save "$n/cpu_capacity"
  save_glob "$cpu"/topology/*
  for idx in "$cpu"/cache/index[0-9]*; do
    [ -d "$idx" ] || continue
    save_glob "$idx"/*
  done
  for f in cpuinfo_max_freq cpuinfo_min_freq scaling_max_freq base_frequency; do
    save "$n/cpufreq/$f"
  done
  save_link "/sys/bus/cpu/devices/${n##*/}"
done
# Intel hybrid (P/E cores) as hwloc looks for them.
save /sys/bus/event_source/devices/cpu_core/cpus
save /sys/bus/event_source/devices/cpu_atom/cpus

# ---- NUMA nodes -----------------------------------------------------------------
d=/sys/devices/system/node
for f in online possible has_cpu has_memory has_normal_memory has_high_memory \
         has_generic_initiator; do
  save "$d/$f"
done
for node in "$src$d"/node[0-9]*; do
  [ -d "$node" ] || continue
  n=${node#"$src"}
  for f in cpumap cpulist meminfo distance; do save "$n/$f"; done
  for hp in "$node"/hugepages/hugepages-*; do
    [ -d "$hp" ] || continue
    save_glob "$hp"/*
  done
  # Heterogeneous memory attributes (HMAT), if the firmware has them.
  for acc in "$node"/access[0-9]*; do
    [ -d "$acc/initiators" ] || continue
    save_glob "$acc"/initiators/*
  done
  for msc in "$node"/memory_side_cache/index[0-9]*; do
    [ -d "$msc" ] || continue
    save_glob "$msc"/*
  done
  save_link "/sys/bus/node/devices/${n##*/}"
done
for hp in "$src"/sys/kernel/mm/hugepages/hugepages-*; do
  [ -d "$hp" ] || continue
  save_glob "$hp"/*
done

# ---- DMI (no serial numbers or UUIDs) ---------------------------------------------
for f in bios_vendor bios_version bios_date bios_release sys_vendor product_name \
         product_version product_family product_sku board_vendor board_name \
         board_version board_asset_tag chassis_vendor chassis_type chassis_version \
         chassis_asset_tag; do
  save "/sys/devices/virtual/dmi/id/$f"
done
save_link /sys/class/dmi/id

# ---- cgroup cpusets of the caller ---------------------------------------------------
# For every cgroup2 mount and every cgroup1/cpuset mount with the cpuset controller,
# save the cpuset files of the mount's root and of this process's cgroup.
if [ -r "$src/proc/self/cgroup" ] && [ -r "$src/proc/mounts" ]; then
  v2path=$(sed -n 's/^0::\(.*\)$/\1/p' "$src/proc/self/cgroup" | head -n 1)
  v1path=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpuset\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' \
    "$src/proc/self/cgroup" | head -n 1)
  while read -r _dev mnt fstype opts _rest; do
    case "$mnt" in *\\*) continue ;; esac  # skip escaped (odd) mount paths
    case "$fstype" in
      cgroup2)
        for p in "" "${v2path:-}"; do
          for f in cpuset.cpus cpuset.cpus.effective cpuset.mems cpuset.mems.effective \
                   cpuset.cpus.partition cgroup.controllers; do
            save "$mnt$p/$f"
          done
        done
        ;;
      cgroup|cpuset)
        case ",$opts," in
          *,cpuset,*) ;;
          *) [ "$fstype" = cpuset ] || continue ;;
        esac
        for p in "" "${v1path:-}"; do
          for f in cpuset.cpus cpuset.mems cpuset.effective_cpus cpuset.effective_mems \
                   cpus mems effective_cpus effective_mems; do
            save "$mnt$p/$f"
          done
        done
        ;;
    esac
  done < "$src/proc/mounts"
fi

echo "gather-topology.sh: saved $count files into $dest" >&2
