//! numaplace's own synthetic builder (the one tests and simulator presets
//! use, without hwloc) against hwloc's reading of the same description.

use numaplace_linux::{TopologySource, discover};
use numaplace_model::Topology;

#[test]
fn model_synthetic_matches_hwlocs() {
    for text in [
        "pack:2 l3:1 core:4 pu:2",
        "pack:2 numa:2 l3:1 core:4 pu:2",
        "pack:2 l3:1 numa:2 core:4 pu:1",
        "pack:1 numa:2 l3:2 core:4 pu:2",
        "pack:4 l3:1 l2:2 l1d:1 core:1 pu:2",
        "pack:2 l3:1(size=30MB) numa:2(memory=8GB) core:2 pu:2",
        "pack:2 core:2 pu:1",
        "numa:2 pack:1 core:2 pu:2",
    ] {
        let ours = Topology::synthetic(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let hw = discover(&TopologySource::Synthetic(text.into()))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(ours.cpus(), hw.cpus(), "{text}: CPUs");
        assert_eq!(ours.cores(), hw.cores(), "{text}: cores");
        assert_eq!(ours.llcs(), hw.llcs(), "{text}: LLC domains");
        assert_eq!(ours.packages(), hw.packages(), "{text}: packages");
        assert_eq!(ours.nodes(), hw.nodes(), "{text}: nodes");
        let sizes = |t: &Topology| -> Vec<(u8, u64, String)> {
            t.caches()
                .iter()
                .map(|c| (c.level, c.size, c.span.to_string()))
                .collect()
        };
        assert_eq!(sizes(&ours), sizes(&hw), "{text}: caches");
    }
}
