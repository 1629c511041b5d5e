//! What QEMU's replies hold, checked: the vCPU list of `query-cpus-fast`
//! and the name of `query-name`.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{MAX_NAME_BYTES, MAX_VCPUS, QmpError, QmpVcpu};

/// The start of an untrusted text, for a message.
pub(super) fn excerpt(s: &str) -> &str {
    match s.char_indices().nth(80) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[derive(Deserialize)]
struct CpuInfoFast {
    #[serde(rename = "cpu-index")]
    cpu_index: u32,
    #[serde(rename = "thread-id")]
    thread_id: i64,
    #[serde(default)]
    props: Option<CpuProps>,
}

#[derive(Deserialize)]
struct CpuProps {
    #[serde(rename = "node-id")]
    node_id: Option<u32>,
    #[serde(rename = "socket-id")]
    socket_id: Option<u32>,
}

/// `query-cpus-fast`'s reply (QEMU's `qapi/machine.json`, `CpuInfoFast`).
pub(super) fn parse_cpus(path: &Path, v: Value) -> Result<Vec<QmpVcpu>, QmpError> {
    let nonsense = |what: String| QmpError::Nonsense {
        path: path.to_path_buf(),
        what,
    };
    let Value::Array(items) = v else {
        return Err(nonsense("query-cpus-fast returned no list".into()));
    };
    if items.len() > MAX_VCPUS {
        return Err(nonsense(format!(
            "query-cpus-fast listed {} vCPUs, more than {MAX_VCPUS}",
            items.len()
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let c: CpuInfoFast = serde_json::from_value(item)
            .map_err(|e| nonsense(format!("a vCPU of query-cpus-fast: {e}")))?;
        let tid = i32::try_from(c.thread_id)
            .ok()
            .filter(|&t| t > 0)
            .ok_or_else(|| {
                nonsense(format!(
                    "vCPU {} runs in thread {}, which is no thread id",
                    c.cpu_index, c.thread_id
                ))
            })?;
        out.push(QmpVcpu {
            index: c.cpu_index,
            tid,
            node: c.props.as_ref().and_then(|p| p.node_id),
            socket: c.props.as_ref().and_then(|p| p.socket_id),
        });
    }
    out.sort_by_key(|c| c.index);
    if let Some(w) = out.windows(2).find(|w| w[0].index == w[1].index) {
        return Err(nonsense(format!(
            "query-cpus-fast listed vCPU {} twice",
            w[0].index
        )));
    }
    Ok(out)
}

/// `query-name`'s reply: `{"name": "..."}`, or `{}` for a guest without one.
pub(super) fn parse_name(path: &Path, v: Value) -> Result<Option<String>, QmpError> {
    let nonsense = |what: String| QmpError::Nonsense {
        path: path.to_path_buf(),
        what,
    };
    let Value::Object(o) = v else {
        return Err(nonsense("query-name returned no object".into()));
    };
    match o.get("name") {
        None => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_NAME_BYTES => {
            Ok((!s.is_empty()).then(|| s.clone()))
        }
        Some(Value::String(s)) => Err(nonsense(format!(
            "a guest name of {} bytes, more than {MAX_NAME_BYTES}",
            s.len()
        ))),
        Some(other) => Err(nonsense(format!("a guest name that is not text: {other}"))),
    }
}
