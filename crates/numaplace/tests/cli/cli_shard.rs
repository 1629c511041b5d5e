//! `compare --random N --shard K/M` and `numaplace merge`: a sweep split
//! into shards and joined again is the sweep, to the byte; what is not one
//! sweep once is refused with the reason (exit status 2).

use crate::common;

use common::{numaplace, ok, refused, text};

/// A small sweep: 3 mixes, 2 seeds, the two Linuxes (about 12 runs).
const SWEEP: [&str; 10] = [
    "compare",
    "--random",
    "3",
    "--seed",
    "41000",
    "--seeds",
    "2",
    "--policies",
    "default,autonuma",
    "--no-report",
];

/// What `numaplace args` prints, which must succeed.
#[track_caller]
fn run(args: &[&str]) -> String {
    text(&ok(args).stdout)
}

#[test]
fn a_sweep_split_into_shards_and_merged_is_the_sweep_to_the_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = run(&[&SWEEP[..], &["--json"]].concat());
    let mut files = Vec::new();
    for k in 1..=2 {
        let spec = format!("{k}/2");
        let shard = run(&[&SWEEP[..], &["--shard", &spec]].concat());
        let v: serde_json::Value = serde_json::from_str(&shard).expect("a shard is JSON");
        assert_eq!(v["index"], k);
        assert_eq!(v["cases_total"], 3);
        let file = tmp.path().join(format!("shard-{k}.json"));
        std::fs::write(&file, shard).unwrap();
        files.push(file.to_string_lossy().into_owned());
    }
    // In any order.
    let merged = run(&["merge", "--json", "--no-report", &files[1], &files[0]]);
    assert_eq!(merged, whole, "merged shards differ from the whole sweep");
    let table = run(&["merge", "--no-report", &files[0], &files[1]]);
    assert!(table.contains("against the faster Linux"), "{table}");

    // One shard twice and one missing; not a shard; another sweep.
    let twice = ["merge", "--no-report", &files[0], &files[0]];
    refused(&twice, "missing 2/2");
    refused(&twice, "twice 1/2");
    let junk = tmp.path().join("junk.json");
    std::fs::write(&junk, "{\"numaplace_shard\": 1}").unwrap();
    refused(
        &["merge", "--no-report", &junk.to_string_lossy()],
        "not a shard",
    );
    let other = run(&[
        "compare",
        "--random",
        "1",
        "--seed",
        "41000",
        "--seeds",
        "1",
        "--policies",
        "default",
        "--no-report",
        "--shard",
        "2/2",
    ]);
    let other_file = tmp.path().join("other.json");
    std::fs::write(&other_file, other).unwrap();
    refused(
        &[
            "merge",
            "--no-report",
            &files[0],
            &other_file.to_string_lossy(),
        ],
        "another sweep",
    );
}

#[test]
fn a_bad_shard_spec_is_refused() {
    for bad in ["0/2", "3/2", "two", "1/0"] {
        refused(
            &["compare", "--random", "1", "--seeds", "1", "--shard", bad],
            "K/M",
        );
    }
    let o = numaplace(&["compare", "--seeds", "1", "--shard", "1/2"]);
    assert_eq!(o.status.code(), Some(2), "--shard without --random");
}
