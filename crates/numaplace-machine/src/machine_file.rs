//! Machines in files: what `numaplace calibrate` writes after measuring a
//! real machine, and what `--machine FILE` simulates. JSON: the topology
//! as numaplace reads it, and every parameter with its source.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::machine::{Machine, MachineError, MachineParams, Param};

/// What the file says it is.
pub const FORMAT: &str = "numaplace-machine";
/// The version of the file's layout this numaplace writes and reads.
pub const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    version: u32,
    #[serde(flatten)]
    machine: Machine,
}

fn error(path: &Path, message: impl Into<String>) -> MachineError {
    MachineError::File {
        path: path.display().to_string(),
        message: message.into(),
    }
}

impl Machine {
    /// Reads a machine file and checks its numbers.
    pub fn load(path: &Path) -> Result<Machine, MachineError> {
        let text =
            numaplace_io::bounded::read_to_string(path, numaplace_io::bounded::CONFIG_MAX_BYTES)
                .map_err(|e| error(path, format!("cannot read the machine file: {e}")))?;
        Self::parse(&text, path)
    }

    /// Parses the text of a machine file read from `path` (named in
    /// errors) and checks its numbers.
    pub fn parse(text: &str, path: &Path) -> Result<Machine, MachineError> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            error(
                path,
                format!("not a numaplace machine file: {e} (numaplace calibrate writes them)"),
            )
        })?;
        if file.format != FORMAT {
            return Err(error(
                path,
                format!("format {:?}, expected {FORMAT:?}", file.format),
            ));
        }
        if file.version > VERSION {
            return Err(error(
                path,
                format!(
                    "version {} was written by a newer numaplace (this one reads up to {VERSION})",
                    file.version
                ),
            ));
        }
        check(&file.machine).map_err(|m| error(path, m))?;
        Ok(file.machine)
    }

    /// The machine file's text (JSON), as [`Machine::load`] reads it
    /// back; the binary writes it with its one atomic write.
    pub fn to_file_text(&self) -> String {
        let file = File {
            format: FORMAT.into(),
            version: VERSION,
            machine: self.clone(),
        };
        let mut text = serde_json::to_string_pretty(&file).expect("a machine encodes as JSON");
        text.push('\n');
        text
    }
}

/// The numbers the model divides by or scales with are positive and
/// finite, and the latency matrix is nodes × nodes.
fn check(m: &Machine) -> Result<(), String> {
    let p: &MachineParams = &m.params;
    let positive: [(&str, &Param); 7] = [
        ("ghz", &p.ghz),
        ("local_latency_ns", &p.local_latency_ns),
        ("llc_hit_ns", &p.llc_hit_ns),
        ("queueing_k_ns", &p.queueing_k_ns),
        ("node_bandwidth_gbs", &p.node_bandwidth_gbs),
        ("link_bandwidth_gbs", &p.link_bandwidth_gbs),
        ("hitm_same_socket_ns", &p.hitm_same_socket_ns),
    ];
    for (name, v) in positive
        .into_iter()
        .chain([("hitm_cross_socket_ns", &p.hitm_cross_socket_ns)])
    {
        if !(v.value.is_finite() && v.value > 0.0) {
            return Err(format!(
                "params.{name} is {}: give a positive number",
                v.value
            ));
        }
    }
    let n = m.topology.nodes().len();
    if p.latency_ns.len() != n * n {
        return Err(format!(
            "params.latency_ns has {} entries; the topology has {n} nodes, so it needs {}",
            p.latency_ns.len(),
            n * n
        ));
    }
    if let Some(bad) = p.latency_ns.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(format!(
            "params.latency_ns holds {bad}: give positive numbers"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_survives_the_round_trip_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let m = Machine::preset("barcelona-4s").unwrap();
        std::fs::write(&path, m.to_file_text()).unwrap();
        let back = Machine::load(&path).unwrap();
        assert_eq!(back.params, m.params);
        assert_eq!(back.topology, m.topology);
        assert_eq!(back.name, "barcelona-4s");

        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["params"]["ghz"]["value"] = serde_json::json!(-1.0);
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, v.to_string()).unwrap();
        let e = Machine::load(&bad).unwrap_err().to_string();
        assert!(e.contains("params.ghz is -1"), "{e}");
        std::fs::write(&bad, "{}").unwrap();
        let e = Machine::load(&bad).unwrap_err().to_string();
        assert!(e.contains("not a numaplace machine file"), "{e}");
        let e = Machine::load(&dir.path().join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read the machine file"), "{e}");
    }
}
