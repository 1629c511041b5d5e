//! Moving a process's memory between nodes: whole (`move_pages` in
//! batches, `migrate_pages`) or a window around a hot address
//! (\[Blagodurov11\] §4).

use super::*;

impl HostActuator {
    /// Moves the process's resident pages that are on other nodes to
    /// `to_node` (`move_pages`, [`BATCH_PAGES`] per call), at most
    /// `max_pages` of them.
    ///
    /// Ranges come from `/proc/<pid>/maps`; special mappings (vDSO, device
    /// and `anon_inode:` mappings, `PROT_NONE` reservations) are skipped. A
    /// mapping that `numa_maps` shows with no pages off `to_node` is counted
    /// as `already` without a syscall. Each batch is queried first (nodes =
    /// NULL) and only pages resident elsewhere are moved; pages not present
    /// are not counted at all. Hugetlb mappings are walked in their own page
    /// size and counted in those pages.
    pub fn move_memory(&self, process: TaskId, to_node: u32, max_pages: Option<u64>) -> Outcome {
        if let Err(o) = self.check_target(to_node) {
            return o;
        }
        let Some(verified) = self.verify_task(process, process.tid) else {
            return Outcome::Gone;
        };
        let ranges = match self.ranges(process.tid) {
            Ok(r) => r,
            Err(e) => return self.read_failed(&verified, e),
        };
        let mut mover = Mover::new(self, &verified, to_node, max_pages);
        for r in &ranges {
            if let Some(resident) = &r.resident {
                if resident.iter().all(|&(n, _)| n == to_node) {
                    mover.counts.already += resident.iter().map(|&(_, p)| p).sum::<u64>();
                    continue;
                }
            }
            // A range numa_maps shows with nothing on the target node is
            // moved without asking first where each page is: one syscall
            // per batch instead of two.
            let direct = r
                .resident
                .as_ref()
                .is_some_and(|res| res.iter().all(|&(n, _)| n != to_node));
            match mover.range(r.start, r.end, r.page_size, direct) {
                Ok(()) => {}
                Err(stop) => return mover.finish(Some(stop)),
            }
        }
        mover.finish(None)
    }

    /// Moves the pages within `pages_before` / `pages_after` pages of
    /// `address` to `to_node` (\[Blagodurov11\] §4: DINO moves the sampled page and
    /// the K pages before and after it). The window is clipped to the
    /// mapping that holds `address`; an address no longer mapped is
    /// [`Outcome::Skipped`].
    pub fn move_window(
        &self,
        process: TaskId,
        address: u64,
        pages_before: u64,
        pages_after: u64,
        to_node: u32,
    ) -> Outcome {
        if let Err(o) = self.check_target(to_node) {
            return o;
        }
        let Some(verified) = self.verify_task(process, process.tid) else {
            return Outcome::Gone;
        };
        let ranges = match self.ranges(process.tid) {
            Ok(r) => r,
            Err(e) => return self.read_failed(&verified, e),
        };
        let Some(r) = ranges
            .iter()
            .find(|r| r.start <= address && address < r.end)
        else {
            if !self.still_verified(&verified) {
                return Outcome::Gone;
            }
            return Outcome::Skipped {
                why: format!(
                    "address {address:#x} is not in a movable mapping of process {} \
                     (unmapped since it was sampled, or a special mapping)",
                    process.tid
                ),
            };
        };
        let (lo, hi) = window_range(
            address,
            pages_before,
            pages_after,
            r.page_size,
            (r.start, r.end),
        );
        let mut mover = Mover::new(self, &verified, to_node, None);
        let stop = mover.range(lo, hi, r.page_size, false).err();
        mover.finish(stop)
    }

    /// Moves all of a process's pages on nodes `from` to nodes `to`
    /// (`migrate_pages`, like numactl's `migratepages`). `failed` is the
    /// kernel's count of pages it could not move; `moved` is estimated from
    /// `numa_maps` before and after (pages that left `from` \ `to`).
    pub fn migrate_all(&self, process: TaskId, from: &CpuSet, to: &CpuSet) -> Outcome {
        if from.is_empty() || to.is_empty() {
            return refused("EINVAL", "both node sets must name at least one node");
        }
        for node in to.iter() {
            if let Err(o) = self.check_target(node) {
                return o;
            }
        }
        let Some(verified) = self.verify_task(process, process.tid) else {
            return Outcome::Gone;
        };
        let leaving = from.difference(to);
        let before = self.pages_on(process.tid, &leaving);
        let last = from.last().max(to.last()).unwrap_or(0) as usize;
        let nwords = words_for(last + 1);
        let (old, new) = (words_from_set(from, nwords), words_from_set(to, nwords));
        // maxnode counts bits plus one: the kernel decrements it first (as
        // numactl passes it).
        let maxnode = (nwords * c_ulong::BITS as usize + 1) as c_ulong;
        // SAFETY: both masks hold `nwords` words, which is what maxnode says.
        let r = unsafe {
            libc::syscall(
                libc::SYS_migrate_pages,
                process.tid,
                maxnode,
                old.as_ptr(),
                new.as_ptr(),
            )
        };
        let err = (r < 0).then(io::Error::last_os_error);
        let after = self.pages_on(process.tid, &leaving);
        if !self.still_verified(&verified) {
            return Outcome::Gone;
        }
        match err {
            None => Outcome::Pages(PageCounts {
                moved: match (before, after) {
                    (Some(b), Some(a)) => b.saturating_sub(a),
                    _ => 0,
                },
                failed: r as u64,
                ..PageCounts::default()
            }),
            Some(e) => match e.raw_os_error() {
                Some(libc::ESRCH) => Outcome::Gone,
                Some(libc::EPERM) => refused("EPERM", NO_MOVE_PERMISSION),
                other => refused(&errno_name(other), format!("migrate_pages failed: {e}")),
            },
        }
    }

    /// Where the pages of `[start, start + len)` of process `pid` (0: this
    /// process) are: base pages per node, from `move_pages` status queries
    /// (nodes = NULL, [`BATCH_PAGES`] per call), and the number of pages not
    /// present (never touched, or the shared zero page). A huge page counts
    /// once per base page it covers. An empty range has no pages.
    pub fn pages_per_node(
        &self,
        pid: i32,
        start: u64,
        len: u64,
    ) -> io::Result<(std::collections::BTreeMap<u32, u64>, u64)> {
        let mut nodes = std::collections::BTreeMap::new();
        let mut absent = 0;
        if len == 0 {
            return Ok((nodes, absent));
        }
        let step = self.page_size;
        let end = start.saturating_add(len);
        let mut addr = start - start % step;
        while addr < end {
            let n = (end - addr).div_ceil(step).min(self.batch as u64);
            let pages: Vec<usize> = (0..n).map(|i| (addr + i * step) as usize).collect();
            let mut status = vec![0 as c_int; pages.len()];
            move_pages(pid, &pages, None, &mut status, 0)?;
            for &s in &status {
                match u32::try_from(s) {
                    Ok(node) => *nodes.entry(node).or_insert(0) += 1,
                    Err(_) => absent += 1,
                }
            }
            addr += n * step;
        }
        Ok((nodes, absent))
    }

    /// Pages of the process on `nodes`, from `numa_maps`.
    fn pages_on(&self, pid: i32, nodes: &CpuSet) -> Option<u64> {
        let maps = self.proc.numa_maps(pid).ok()?;
        let bytes: u64 = maps
            .nodes
            .iter()
            .filter(|(n, _)| nodes.contains(**n))
            .map(|(_, m)| m.total())
            .sum();
        Some(bytes / self.page_size)
    }

    /// The process's movable ranges, with `numa_maps`' resident pages.
    fn ranges(&self, pid: i32) -> Result<Vec<Range>, ProcError> {
        let path = self.root.join(&format!("proc/{pid}/maps"));
        let text =
            numaplace_io::bounded::read_bytes(&path, numaplace_io::bounded::ROOT_FILE_MAX_BYTES)
                .map_err(|e| ProcError::from_io(path, e))?;
        let text = String::from_utf8_lossy(&text);
        // numa_maps is an optimisation: without it every range is queried.
        let numa: HashMap<u64, (u64, Vec<(u32, u64)>)> = self
            .root
            .read(&format!("proc/{pid}/numa_maps"))
            .map(|t| {
                t.lines()
                    .filter_map(|l| parse_numa_maps_line(l).ok())
                    .map(|m| (m.start, (m.page_size, m.node_pages)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(text
            .lines()
            .filter_map(parse_maps_line)
            .filter(|m| m.movable())
            .map(|m| {
                let found = numa.get(&m.start);
                let page_size = found
                    .map(|(ps, _)| *ps)
                    .filter(|&ps| ps > self.page_size && ps.is_power_of_two())
                    .unwrap_or(self.page_size);
                Range {
                    start: m.start,
                    end: m.end,
                    page_size,
                    resident: found.map(|(_, pages)| pages.clone()),
                }
            })
            .collect())
    }
}

/// The byte range `[lo, hi)` of the window around `address`: its page and
/// `before` / `after` pages either side, clipped to `mapping` (`[start,
/// end)`). Empty (`lo == hi`) when the address lies outside the mapping.
pub fn window_range(
    address: u64,
    before: u64,
    after: u64,
    page_size: u64,
    mapping: (u64, u64),
) -> (u64, u64) {
    let (start, end) = mapping;
    if address < start || address >= end || page_size == 0 {
        return (address, address);
    }
    let page = address - address % page_size;
    let lo = page
        .saturating_sub(before.saturating_mul(page_size))
        .max(start);
    let hi = page
        .saturating_add(after.saturating_add(1).saturating_mul(page_size))
        .min(end);
    (lo, hi)
}

/// One line of `/proc/<pid>/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsLine<'a> {
    /// The mapping's first address.
    pub start: u64,
    /// The address past its last.
    pub end: u64,
    /// Its permissions (`rw-p`).
    pub perms: &'a str,
    /// The path or pseudo-name (`[heap]`, `[vdso]`); empty if anonymous.
    pub path: &'a str,
}

impl MapsLine<'_> {
    /// Whether pages of this mapping may be moved: not a special mapping
    /// (vDSO and friends, device memory, `anon_inode:` rings that are
    /// typically `VM_IO`/`VM_PFNMAP`), not a `PROT_NONE` reservation.
    pub fn movable(&self) -> bool {
        const SPECIAL: [&str; 5] = [
            "[vsyscall]",
            "[vvar]",
            "[vvar_vclock]",
            "[vdso]",
            "[uprobes]",
        ];
        if SPECIAL.contains(&self.path) || self.path.starts_with("anon_inode:") {
            return false;
        }
        // Shared anonymous memory shows as `/dev/zero (deleted)`.
        let zero = self.path == "/dev/zero" || self.path.starts_with("/dev/zero ");
        if self.path.starts_with("/dev/") && !zero && !self.path.starts_with("/dev/shm/") {
            return false;
        }
        self.perms.get(..3) != Some("---")
    }
}

/// Parses one line of `/proc/<pid>/maps`:
/// `start-end perms offset dev inode [path]`.
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        let t = rest.trim_start_matches(' ');
        let (f, r) = t.split_once(' ').unwrap_or((t, ""));
        rest = r;
        f
    };
    let range = field();
    let perms = field();
    let (_offset, _dev, _inode) = (field(), field(), field());
    let (s, e) = range.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    if end <= start || perms.len() != 4 || !perms.is_ascii() {
        return None;
    }
    Some(MapsLine {
        start,
        end,
        perms,
        path: rest.trim_matches(' '),
    })
}

const NO_MOVE_PERMISSION: &str = "not allowed to move this process's pages: it belongs to another \
     user and numaplace lacks CAP_SYS_NICE (run numaplace as root)";

/// A movable range of a process's address space.
#[derive(Debug, Clone)]
struct Range {
    start: u64,
    end: u64,
    page_size: u64,
    /// Resident pages per node, from `numa_maps`, if it listed the range.
    resident: Option<Vec<(u32, u64)>>,
}

/// Why a memory move stopped early.
enum Stop {
    Gone,
    Refused(Outcome),
    Budget,
}

/// One memory move in progress: the batches and their counts.
struct Mover<'a> {
    act: &'a HostActuator,
    verified: &'a VerifiedTask,
    pid: i32,
    to_node: u32,
    budget: Option<u64>,
    counts: PageCounts,
    failed_ranges: u64,
}

impl<'a> Mover<'a> {
    fn new(
        act: &'a HostActuator,
        verified: &'a VerifiedTask,
        to_node: u32,
        budget: Option<u64>,
    ) -> Self {
        Mover {
            act,
            verified,
            pid: verified.task.tid,
            to_node,
            budget,
            counts: PageCounts::default(),
            failed_ranges: 0,
        }
    }

    fn finish(self, stop: Option<Stop>) -> Outcome {
        if self.failed_ranges > 0 {
            tracing::debug!(
                pid = self.pid,
                ranges = self.failed_ranges,
                "move_pages: some ranges could not be queried"
            );
        }
        match stop {
            Some(Stop::Gone) => Outcome::Gone,
            Some(Stop::Refused(o)) => o,
            Some(Stop::Budget) | None if !self.act.still_verified(self.verified) => Outcome::Gone,
            Some(Stop::Budget) | None => Outcome::Pages(self.counts),
        }
    }

    /// Walks `[start, end)` in batches of pages of `step` bytes.
    /// Moves `[start, end)` in batches; `direct` skips the query of where
    /// each page is (the caller knows none is on the target node yet).
    fn range(&mut self, start: u64, end: u64, step: u64, direct: bool) -> Result<(), Stop> {
        let mut addr = start - start % step;
        while addr < end {
            let n = (end - addr).div_ceil(step).min(self.act.batch as u64);
            let pages: Vec<usize> = (0..n).map(|i| (addr + i * step) as usize).collect();
            addr += n * step;
            self.batch(&pages, direct)?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Stop> {
        if self.act.still_verified(self.verified) {
            Ok(())
        } else {
            Err(Stop::Gone)
        }
    }

    fn batch(&mut self, pages: &[usize], direct: bool) -> Result<(), Stop> {
        let to = self.to_node as c_int;
        let mut todo = Vec::new();
        if direct {
            todo.extend_from_slice(pages);
        } else {
            let mut status = vec![0 as c_int; pages.len()];
            self.check()?;
            if let Err(e) = move_pages(self.pid, pages, None, &mut status, 0) {
                self.failed_ranges += 1;
                return self.call_failed(e);
            }
            for (&p, &s) in pages.iter().zip(&status) {
                if s == to {
                    self.counts.already += 1;
                } else if s >= 0 {
                    todo.push(p);
                }
                // Negative: not present (-ENOENT) or the zero page
                // (-EFAULT): not the process's resident memory; not counted.
            }
        }
        if let Some(max) = self.budget {
            let left = max.saturating_sub(self.counts.moved);
            todo.truncate(left.min(usize::MAX as u64) as usize);
        }
        if todo.is_empty() {
            return self.budget_left();
        }
        let nodes = vec![to; todo.len()];
        let mut status = vec![0 as c_int; todo.len()];
        self.check()?;
        match move_pages(self.pid, &todo, Some(&nodes), &mut status, MPOL_MF_MOVE) {
            Ok(0) => {}
            // Some pages were not moved: their status entries may still
            // hold the target node, so ask where they really are.
            Ok(_) => requery(self.pid, &todo, &mut status),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                requery(self.pid, &todo, &mut status)
            }
            Err(e) => {
                if matches!(e.raw_os_error(), Some(libc::ENOMEM) | Some(libc::EFAULT)) {
                    self.counts.failed += todo.len() as u64;
                }
                return self.call_failed(e);
            }
        }
        for &s in &status {
            match s {
                s if s == to => self.counts.moved += 1,
                s if s >= 0 => self.counts.busy += 1,
                s if s == -libc::EBUSY || s == -libc::EAGAIN => self.counts.busy += 1,
                // Asked without a query first: pages not present, or the
                // shared zero page, were never the process's to move.
                s if direct && (s == -libc::ENOENT || s == -libc::EFAULT) => {}
                _ => self.counts.failed += 1,
            }
        }
        self.budget_left()
    }

    fn budget_left(&self) -> Result<(), Stop> {
        match self.budget {
            Some(max) if self.counts.moved >= max => Err(Stop::Budget),
            _ => Ok(()),
        }
    }

    /// A whole `move_pages` call failed: fatal for the action, or counted.
    fn call_failed(&mut self, e: io::Error) -> Result<(), Stop> {
        let node = self.to_node;
        match e.raw_os_error() {
            Some(libc::ESRCH) => Err(Stop::Gone),
            Some(libc::EPERM) => Err(Stop::Refused(refused("EPERM", NO_MOVE_PERMISSION))),
            Some(libc::ENODEV) => Err(Stop::Refused(refused(
                "ENODEV",
                format!("node {node} is not online or has no memory"),
            ))),
            Some(libc::EACCES) => Err(Stop::Refused(refused(
                "EACCES",
                format!(
                    "node {node} is outside the memory nodes the process's cgroup allows \
                     (cpuset.mems); move it within those, or widen the cgroup's cpuset"
                ),
            ))),
            Some(libc::EINVAL) => Err(Stop::Refused(refused(
                "EINVAL",
                format!("move_pages refused node {node}: {e}"),
            ))),
            _ => {
                tracing::debug!(pid = self.pid, error = %e, "move_pages batch failed");
                Ok(())
            }
        }
    }
}

/// After a partial move, where the pages really are (nodes = NULL).
fn requery(pid: i32, pages: &[usize], status: &mut [c_int]) {
    if move_pages(pid, pages, None, status, 0).is_err() {
        // Cannot tell: count them as not moved this time.
        status.fill(-libc::EAGAIN);
    }
}

/// `move_pages(2)`; `nodes` None queries where the pages are.
fn move_pages(
    pid: i32,
    pages: &[usize],
    nodes: Option<&[c_int]>,
    status: &mut [c_int],
    flags: c_int,
) -> io::Result<c_long> {
    assert_eq!(pages.len(), status.len());
    if let Some(n) = nodes {
        assert_eq!(n.len(), pages.len());
    }
    let nodes_ptr = nodes.map_or(std::ptr::null(), |n| n.as_ptr());
    // SAFETY: all three arrays hold `pages.len()` entries (checked above);
    // the kernel reads `pages` and `nodes`, and writes `status`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as c_ulong,
            pages.as_ptr(),
            nodes_ptr,
            status.as_mut_ptr(),
            flags,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
