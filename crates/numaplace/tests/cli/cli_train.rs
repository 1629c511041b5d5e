//! `numaplace train` writes adaptive-mapping's coefficient file, and the
//! policy refuses a coefficient file it cannot use, naming it.

use crate::common;

use common::{numaplace, text};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[test]
fn train_writes_a_private_coefficient_file_the_policy_reads() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("models.json");
    // An older file there is replaced, not appended to.
    std::fs::write(&out, "old").unwrap();
    let o = numaplace(&["train", "--seeds", "1", "--out", s(&out)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("R²"), "{stdout}");
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("JSON");
    assert!(v.is_object(), "{v}");
    // Nothing left behind but the file itself.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("models.json")]);

    // The policy takes it: `advise` with a config naming it runs a round.
    let config = dir.path().join("np.toml");
    std::fs::write(
        &config,
        format!(
            "[policy]\nname = \"adaptive-mapping\"\ncoefficients = \"{}\"\n",
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let me = std::process::id().to_string();
    let o = numaplace(&["advise", "--config", s(&config), "--pid", &me]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn unusable_coefficients_and_outputs_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(&corrupt, "{ not json").unwrap();
    let missing = dir.path().join("missing.json");
    let me = std::process::id().to_string();
    for (file, want) in [(&corrupt, "corrupt.json"), (&missing, "missing.json")] {
        let config = dir.path().join("np.toml");
        std::fs::write(
            &config,
            format!(
                "[policy]\nname = \"adaptive-mapping\"\ncoefficients = \"{}\"\n",
                file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = numaplace(&["advise", "--config", s(&config), "--pid", &me]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(want) && err.contains("numaplace train"),
            "{err}"
        );
    }
    let o = numaplace(&["train", "--seeds", "1", "--out", "/nonexistent-dir/m.json"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent-dir does not exist"), "{err}");
    let m = dir.path().join("m.json");
    let o = numaplace(&["train", "--suite", "spec2006", "--out", s(&m)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}
