//! The kubelet's static CPU and memory managers on a Kubernetes node, from
//! fixtures: the 4-node QEMU guest's sysfs (tests/fixtures/qemu-4node.tar.xz:
//! node N = CPUs 2N and 2N+1), a cgroup v2 tree as the kubelet makes it
//! (cgroupfs driver), its `cpu_manager_state` with CPU 2 held by a
//! Guaranteed pod, its `memory_manager_state` with a second Guaranteed
//! pod's memory bound to node 1 (a fractional CPU share: it runs in the
//! shared pool), and a /proc of four busy processes: the two Guaranteed
//! pods', a Burstable pod's in the shared pool (0-1,3-7), and a system
//! daemon's with the whole machine.
//!
//! Read by the collector and decided by the engine over several rounds,
//! with several policies: no pin ever reaches the exclusive CPU, the
//! shared-pool pod's pins stay in the pool, both Guaranteed pods are left
//! to the kubelet with the reason said, and pins are made (not vacuous).

use std::fs;
use std::path::Path;
use std::process::Command;

use numaplace_linux::{CollectOptions, Collector, SysRoot, TopologySource, discover_repaired};
use numaplace_model::world::{NoGuard, RecordingActuator};
use numaplace_model::{Action, CpuSet, Scope};
use numaplace_policy::PolicyKind;
use numaplace_policy::engine::{Engine, EngineConfig};

const GUARANTEED: &str = "0e5b5a4c-1d3e-4b8a-9f5e-2c1d0a9b8c7d";
const BURSTABLE: &str = "7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f";
/// A Guaranteed pod with a fractional CPU share, its memory on node 1.
const MEMORY_BOUND: &str = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A process `pid` with threads `pid` and `pid + 1`, each with `ticks`
/// of CPU time, in `cgroup`, allowed `cpus`, its memory on node 0.
fn process(root: &Path, pid: i32, comm: &str, cgroup: &str, cpus: &str, ticks: u64) {
    for tid in [pid, pid + 1] {
        let stat = format!(
            "{tid} ({comm}) R 1 {pid} {pid} 0 -1 4194304 101 0 0 0 {ticks} 0 0 0 20 0 2 0 1000 \
             3133440 379 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
        );
        let status = format!(
            "Name:\t{comm}\nTgid:\t{pid}\nPid:\t{tid}\nPPid:\t1\nCpus_allowed_list:\t{cpus}\n\
             Mems_allowed_list:\t0-3\n"
        );
        write(root, &format!("proc/{pid}/task/{tid}/stat"), &stat);
        write(root, &format!("proc/{pid}/task/{tid}/status"), &status);
        write(
            root,
            &format!("proc/{pid}/task/{tid}/comm"),
            &format!("{comm}\n"),
        );
        if tid == pid {
            write(root, &format!("proc/{pid}/stat"), &stat);
            write(root, &format!("proc/{pid}/status"), &status);
        }
    }
    write(root, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
    write(root, &format!("proc/{pid}/cmdline"), &format!("{comm}\0"));
    write(
        root,
        &format!("proc/{pid}/cgroup"),
        &format!("0::{cgroup}\n"),
    );
    write(
        root,
        &format!("proc/{pid}/numa_maps"),
        "7f0000000000 default anon=16384 dirty=16384 N0=16384 kernelpagesize_kB=4\n",
    );
}

/// The node at CPU-time `ticks` (every thread busy).
fn node(root: &Path, ticks: u64) {
    let guaranteed = format!("/kubepods/pod{GUARANTEED}/ctr-db");
    let burstable = format!("/kubepods/burstable/pod{BURSTABLE}/ctr-web");
    process(root, 100, "db", &guaranteed, "2", ticks);
    process(root, 200, "web", &burstable, "0-1,3-7", ticks);
    let bound = format!("/kubepods/pod{MEMORY_BOUND}/ctr-cache");
    process(root, 400, "cache", &bound, "0-1,3-7", ticks);
    process(
        root,
        300,
        "agent",
        "/system.slice/agent.service",
        "0-7",
        ticks,
    );
    write(
        root,
        "proc/stat",
        &format!(
            "cpu  {t} 0 {t} 0 0 0 0 0 0 0\nbtime 1700000000\n",
            t = ticks * 8
        ),
    );
}

fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tarball =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qemu-4node.tar.xz");
    let st = Command::new("tar")
        .arg("-xf")
        .arg(&tarball)
        .arg("-C")
        .arg(root)
        .status()
        .unwrap();
    assert!(st.success());
    for (cg, cpus) in [
        ("", "0-7"),
        ("kubepods", "0-7"),
        (&format!("kubepods/pod{GUARANTEED}") as &str, "2"),
        (&format!("kubepods/pod{MEMORY_BOUND}"), "0-1,3-7"),
        ("kubepods/burstable", "0-1,3-7"),
        ("system.slice", "0-7"),
    ] {
        write(
            root,
            &format!("sys/fs/cgroup/{cg}/cpuset.cpus.effective"),
            &format!("{cpus}\n"),
        );
    }
    let state = root.join("var/lib/kubelet/cpu_manager_state");
    write(
        root,
        "var/lib/kubelet/cpu_manager_state",
        &format!(
            r#"{{"policyName":"static","defaultCpuSet":"0-1,3-7","entries":{{"{GUARANTEED}":{{"db":"2"}}}},"checksum":1}}"#
        ),
    );
    write(
        root,
        "var/lib/kubelet/memory_manager_state",
        &format!(
            r#"{{"policyName":"Static","machineState":{{"0":{{"numberOfAssignments":0,"memoryMap":{{}},"cells":[0]}},"1":{{"numberOfAssignments":1,"memoryMap":{{}},"cells":[1]}}}},"entries":{{"{MEMORY_BOUND}":{{"cache":[{{"numaAffinity":[1],"type":"memory","size":1073741824}}]}}}},"checksum":1}}"#
        ),
    );
    node(root, 0);
    (dir, state)
}

#[test]
fn no_pin_reaches_a_cpu_the_kubelet_handed_a_guaranteed_pod() {
    let (dir, state) = fixture();
    let root = SysRoot::new(dir.path()).unwrap();
    let topology = discover_repaired(&TopologySource::Sysfs(root.clone()))
        .expect("the 4-node fixture's topology")
        .topology;
    let exclusive = CpuSet::parse_list("2").unwrap();
    let pool = CpuSet::parse_list("0-1,3-7").unwrap();
    let mut pinned = 0;
    for policy in ["numad-like", "auto", "static"] {
        node(dir.path(), 0);
        let mut collector = Collector::new(
            root.clone(),
            CollectOptions {
                memory: true,
                machine: true,
                ..Default::default()
            },
        );
        collector.set_kubelet(numaplace_linux::confinement::KubeletFiles {
            cpu_manager_state: Some(state.clone()),
            memory_manager_state: Some(state.with_file_name("memory_manager_state")),
            place_guaranteed: false,
        });
        let kind = PolicyKind::from_name(policy).unwrap();
        let mut engine = Engine::new(
            kind.build(),
            Scope {
                all: true,
                ..Default::default()
            },
            EngineConfig::default(),
        );
        let mut act = RecordingActuator::default();
        let mut said = Vec::new();
        for round in 0..6u64 {
            // Every thread busy: 20 ticks (CLK_TCK 100) in each 200 ms.
            std::thread::sleep(std::time::Duration::from_millis(200));
            node(dir.path(), 20 * round);
            let s = collector.collect().unwrap();
            // What the collector read: the Guaranteed pod is the
            // kubelet's, the others' room is without CPU 2.
            for t in &s.tasks {
                match t.tgid {
                    100 | 400 => {
                        let m = t.manager.as_ref().expect("the kubelet holds the pod");
                        assert!(m.hands_off.is_some(), "{m:?}");
                    }
                    200 => assert_eq!(t.confined_cpus.as_ref(), Some(&pool)),
                    _ => assert_eq!(t.confined_cpus.as_ref(), Some(&pool)),
                }
            }
            let r = engine.round(&topology, &s, &mut act, &mut NoGuard, &mut |_| {});
            said.extend(r.newly_left_alone);
        }
        for a in &act.actions {
            if let Action::Pin { tgid, cpus, .. } = a {
                assert!(!cpus.intersects(&exclusive), "{policy}: {a:?}");
                assert_ne!(*tgid, 100, "{policy}: the Guaranteed pod pinned: {a:?}");
                assert_ne!(*tgid, 400, "{policy}: the memory-bound pod pinned: {a:?}");
                assert!(cpus.is_subset(&pool), "{policy}: {a:?}");
                pinned += 1;
            }
        }
        // Both Guaranteed pods are the kubelet's, each with its reason.
        for (pid, uid, why) in [
            (100, GUARANTEED, "holds CPUs 2 for its sole use"),
            (400, MEMORY_BOUND, "its pod's memory is bound to nodes 1"),
        ] {
            let held: Vec<_> = said.iter().filter(|n| n.pid == pid).collect();
            assert_eq!(held.len(), 2, "{policy}: {said:?}");
            assert!(
                held.iter().all(|n| n.kind == "held-by-manager"
                    && n.why
                        .contains(&format!("the kubelet (pod {uid}) holds its placement"))
                    && n.why.contains(why)),
                "{held:?}"
            );
        }
    }
    // numad-like places both busy processes on nodes with room (within
    // their rooms): the checks above are not vacuous.
    assert!(pinned >= 4, "{pinned} pins: the check is vacuous");
}
