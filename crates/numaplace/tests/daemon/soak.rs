//! A one-minute run of `tests/host/soak.sh` (the full soak is ten minutes:
//! `tests/host/soak.sh 600`). Ignored: it needs root and takes a minute.

use crate::common;

#[test]
#[ignore = "needs root; one minute"]
fn one_minute_soak_keeps_rss_and_fds_bounded_and_restores_every_affinity() {
    let script = common::repo_root().join("tests/host/soak.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("60")
        .env("NUMAPLACE_BIN", env!("CARGO_BIN_EXE_numaplace"))
        .output()
        .expect("run soak.sh");
    let text = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("every affinity restored"), "{text}");
}
