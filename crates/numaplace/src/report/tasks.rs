//! The tasks table: applications and VMs with their threads, where they
//! run and may run, their memory per node, what their counters say, and
//! each process's page faults per second.

use std::fmt::Write;

use numaplace_model::metrics::{cpu_share, ipc, mpki};
use numaplace_model::task::{parse_vcpu_comm, printable};
use numaplace_model::{Counter, CounterDeltas, GroupKind, Snapshot, TaskGroup};

use crate::report::topology::bytes;

fn group_label(g: &TaskGroup) -> String {
    match &g.kind {
        GroupKind::Vm { name, accel, .. } => {
            let n = name.as_deref().map(printable).unwrap_or_else(|| "?".into());
            format!("vm:{n} ({accel})")
        }
        GroupKind::Process => printable(&g.comm),
    }
}

fn memory_cell(g: &TaskGroup) -> String {
    match g.memory_total() {
        None => "-".into(),
        Some(m) if m.values().all(|&b| b == 0) => "0".into(),
        Some(m) => m
            .iter()
            .filter(|(_, b)| **b > 0)
            .map(|(n, b)| format!("{n}:{}", bytes(*b).replace(' ', "")))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.decimals$}"))
}

/// A thread's context switches per second over the round, a software
/// event the kernel counts without a PMU; `None` where not counted.
fn switches(c: &CounterDeltas, interval_ns: u64) -> Option<f64> {
    let n = c.get(Counter::ContextSwitches)?;
    (interval_ns > 0).then(|| n as f64 * 1e9 / interval_ns as f64)
}

/// Where a thread's memory accesses go, from the kernel's NUMA hinting
/// faults: the node most of them hit and its share (`n1 92%`); `-` where
/// the kernel took none for it or does not balance.
fn accesses(s: &Snapshot, tid: i32) -> String {
    s.numa_faults
        .get(&tid)
        .and_then(|f| f.main_node())
        .map_or_else(
            || "-".into(),
            |(node, share)| format!("n{node} {:.0}%", share * 100.0),
        )
}

/// A process's minor and major page faults per second over the round
/// (`12034`, `0`); `-` for both where there is no count (one round only,
/// or a process first seen this round).
fn fault_rates(s: &Snapshot, pid: i32) -> (String, String) {
    s.page_faults
        .get(&pid)
        .and_then(|f| f.per_second(s.interval_ns))
        .map_or_else(
            || ("-".into(), "-".into()),
            |(minor, major)| (format!("{minor:.0}"), format!("{major:.0}")),
        )
}

/// Renders the groups in `groups` (indexes into the snapshot) with their
/// threads.
pub fn render(s: &Snapshot, groups: &[&TaskGroup], notes: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>7} {:>7}  {:<18} {:1} {:>4} {:<12} {:>5} {:>5} {:>6}  {:<9} {:>6} {:>8} {:>8}  MEMORY PER NODE",
        "APPLICATION",
        "PID",
        "TID",
        "THREAD",
        "S",
        "CPU",
        "ALLOWED",
        "CPU%",
        "IPC",
        "MPKI",
        "ACCESSES",
        "CSW/S",
        "MINFLT/S",
        "MAJFLT/S"
    );
    let mut threads = 0;
    for g in groups {
        let (minor, major) = fault_rates(s, g.pid);
        let _ = writeln!(
            out,
            "{:<22} {:>7} {:>7}  {:<18} {:1} {:>4} {:<12} {:>5} {:>5} {:>6}  {:<9} {:>6} {:>8} {:>8}  {}",
            cut(&group_label(g), 22),
            g.pid,
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            minor,
            major,
            memory_cell(g)
        );
        if let Some(h) = s.guest_hints.get(&g.pid) {
            let list = if h.is_empty() {
                "none".to_string()
            } else {
                h.iter()
                    .map(|v| format!("vcpu{v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let _ = writeln!(
                out,
                "{:<22} guest hints ([Rao13] §4.3 tags, BRM's candidates): {list}",
                ""
            );
        }
        for &tid in &g.threads {
            let Some(t) = s.task(tid) else { continue };
            threads += 1;
            let c = s.counters.get(&tid);
            let mut name = printable(&t.comm);
            if let Some(v) = t.vcpu {
                let hinted = s.guest_hints.get(&t.tgid).is_some_and(|h| h.contains(&v));
                let star = if hinted { "*" } else { "" };
                // A thread QEMU did not name (no debug-threads): the vCPU
                // first, where the column does not cut it.
                name = if parse_vcpu_comm(&t.comm).is_some() {
                    format!("{name} [vcpu{v}{star}]")
                } else {
                    format!("[vcpu{v}{star}] {name}")
                };
            }
            let share = c
                .and_then(|c| cpu_share(c, s.interval_ns))
                .map(|x| x * 100.0);
            let line = format!(
                "{:<22} {:>7} {:>7}  {:<18} {:1} {:>4} {:<12} {:>5} {:>5} {:>6}  {:<9} {:>6}",
                "",
                "",
                t.tid,
                cut(&name, 18),
                t.state,
                t.last_cpu.map_or_else(|| "-".into(), |c| c.to_string()),
                cut(&t.allowed_cpus.to_string(), 12),
                opt(share, 1),
                opt(c.and_then(ipc), 2),
                opt(c.and_then(mpki), 2),
                accesses(s, tid),
                opt(c.and_then(|c| switches(c, s.interval_ns)), 0),
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let _ = writeln!(out, "{} applications, {threads} threads", groups.len());
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_name_the_node_most_hinting_faults_hit() {
        let mut s = Snapshot::default();
        assert_eq!(accesses(&s, 7), "-", "no faults read (balancing off)");
        let mut f = numaplace_model::NumaFaults::default();
        f.memory.insert(0, 8);
        f.memory.insert(1, 92);
        s.numa_faults.insert(7, f);
        assert_eq!(accesses(&s, 7), "n1 92%");
        s.numa_faults
            .insert(8, numaplace_model::NumaFaults::default());
        assert_eq!(accesses(&s, 8), "-", "a thread that took no fault");
    }

    /// Context switches per second, counted kernel-side without a PMU.
    #[test]
    fn context_switches_per_second_of_a_thread() {
        let mut c = CounterDeltas::default();
        assert_eq!(switches(&c, 500_000_000), None, "not counted");
        c.values.insert(Counter::ContextSwitches, 44);
        assert_eq!(switches(&c, 500_000_000), Some(88.0));
        assert_eq!(switches(&c, 0), None, "one round only");
    }

    #[test]
    fn fault_rates_of_a_process_over_the_round() {
        let mut s = Snapshot::default();
        let f = numaplace_model::PageFaults {
            minor: 3000,
            major: 3,
        };
        s.page_faults.insert(7, f);
        assert_eq!(fault_rates(&s, 7), ("-".into(), "-".into()), "no interval");
        s.interval_ns = 1_500_000_000;
        assert_eq!(fault_rates(&s, 7), ("2000".into(), "2".into()));
        assert_eq!(fault_rates(&s, 8), ("-".into(), "-".into()), "first seen");
        let g = numaplace_model::TaskGroup {
            pid: 7,
            start_time: 1,
            comm: "app".into(),
            cmdline: vec!["app".into()],
            cgroup: None,
            kind: GroupKind::Process,
            threads: Vec::new(),
            memory: None,
        };
        let table = render(&s, &[&g], &[]);
        let (head, row) = (table.lines().next().unwrap(), table.lines().nth(1).unwrap());
        let at = head.find("MINFLT/S").unwrap();
        assert_eq!(&row[at..at + 8], "    2000", "{table}");
    }

    #[test]
    fn long_cells_are_cut_visibly() {
        assert_eq!(cut("0-3", 12), "0-3");
        assert_eq!(cut("0,2,4,6,8,10,12", 12), "0,2,4,6,8,1~");
    }
}
