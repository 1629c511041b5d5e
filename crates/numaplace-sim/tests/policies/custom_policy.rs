//! The worked example of docs/writing-a-policy.md compiles against the
//! public API and does what the guide says: a policy built outside the
//! registry runs through the engine in the simulator, and running each
//! process on its memory's node beats Linux's default on the default
//! scenario (westmere-2s, first touch).

#[path = "../../examples/custom_policy.rs"]
mod example;

use example::{MemoryHome, mean_runtime};
use numaplace_policy::PolicyKind;
use numaplace_sim::Machine;
use numaplace_sim::run::{Driver, RunOptions, run};

#[test]
fn a_policy_from_outside_the_registry_runs_and_is_measured() {
    let scenario = numaplace_sim::scenario::builtin("default")
        .unwrap()
        .unwrap();
    let machine = Machine::preset(&scenario.machine).unwrap();
    static DEFAULT: std::sync::LazyLock<PolicyKind> =
        std::sync::LazyLock::new(|| PolicyKind::from_name("default").unwrap());
    let (base, _) = mean_runtime(&machine, &scenario, &|| Driver::Policy(&DEFAULT), 3);
    let (home, rsd) = mean_runtime(
        &machine,
        &scenario,
        &|| Driver::Built {
            name: "memory-home",
            policy: Box::new(MemoryHome::default()),
        },
        3,
    );
    println!("default {base:.2} s, memory-home {home:.2} s (RSD {rsd:.1} %)");
    assert!(
        home < 0.95 * base,
        "memory-home {home:.2} s vs default {base:.2} s"
    );
    // Every pin it made carries its reason, and only processes it placed
    // were pinned, each to one node's CPUs.
    let mut pins = 0;
    let r = run(
        &machine,
        &scenario,
        Driver::Built {
            name: "memory-home",
            policy: Box::new(MemoryHome::default()),
        },
        &RunOptions::default(),
        &mut |j| {
            if let numaplace_model::Action::Pin { cpus, .. } = &j.action {
                pins += 1;
                assert!(j.reason.starts_with("memory-home: "), "{}", j.reason);
                assert!(
                    machine.topology.nodes().iter().any(|n| n.span == *cpus),
                    "{cpus}"
                );
            }
        },
    );
    assert!(r.finished && pins > 0, "{pins} pins");
}
