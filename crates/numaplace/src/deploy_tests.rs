//! The fleet files (`deploy/`) against numaplace itself: the Grafana
//! dashboard queries only metrics `metrics::render` writes, and the
//! Kubernetes manifest's daemon command line, config and ports are what
//! numaplace's own parsers accept and what the metrics sidecar and the
//! Prometheus annotations point at.

use std::collections::BTreeSet;
use std::path::Path;

use clap::Parser as _;
use serde_yaml::Value;

use crate::cli::{Cli, Command};
use crate::config::Config;
use crate::daemon::metrics::{Listen, MetricsState, parse_listen, render};

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names after `# TYPE` in the metrics text.
fn exported() -> BTreeSet<String> {
    render(&MetricsState::default())
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// Every `numaplace_...` identifier in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("numaplace_") {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// Every `expr` of every panel's targets, and the template variables'
/// queries.
fn queries(dash: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            out.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = v["query"]["query"].as_str() {
            out.push(q.to_string());
        }
    }
    out
}

#[test]
fn the_dashboard_queries_only_metrics_numaplace_exports() {
    let dash: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/numaplace.json")).expect("JSON");
    let have = exported();
    assert!(have.contains("numaplace_rounds_total"), "{have:?}");
    let mut used = BTreeSet::new();
    for q in queries(&dash) {
        let names = metric_names(&q);
        for n in names {
            assert!(have.contains(&n), "{n} (in {q}) is not exported: {have:?}");
            used.insert(n);
        }
    }
    // Every metric has a panel.
    let unused: Vec<_> = have.difference(&used).collect();
    assert!(unused.is_empty(), "not on the dashboard: {unused:?}");
    // Labels the dashboard filters on are labels numaplace writes.
    let text = render(&MetricsState::default());
    assert!(text.contains("outcome=\"applied\"") && text.contains("dry_run=\""));
}

#[test]
fn metric_names_are_found_in_promql() {
    assert_eq!(
        metric_names("sum by (outcome) (rate(numaplace_actions_total{a=\"numaplace_x\"}[5m]))"),
        ["numaplace_actions_total", "numaplace_x"]
    );
    assert!(metric_names("my_numaplace_thing").is_empty());
}

/// The manifest's documents by kind.
fn manifest() -> Vec<Value> {
    let text = read("deploy/kubernetes/numaplace-daemonset.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("YAML"))
        .collect()
}

use serde::Deserialize as _;

fn kind<'a>(docs: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == k).collect();
    assert_eq!(found.len(), 1, "one {k}");
    found[0]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn the_daemonset_runs_a_command_line_and_config_numaplace_accepts() {
    let docs = manifest();
    for d in &docs {
        assert_eq!(
            d["metadata"]["namespace"].as_str().unwrap_or("numaplace"),
            "numaplace"
        );
    }
    let cm = kind(&docs, "ConfigMap");
    let toml = cm["data"]["numaplace.toml"]
        .as_str()
        .expect("numaplace.toml");
    let config = Config::parse(toml).unwrap_or_else(|e| panic!("the ConfigMap's config: {e}"));
    assert!(!config.scope.is_empty());
    assert!(
        config
            .scope
            .cgroups
            .iter()
            .any(|c| c.starts_with("/kubepods"))
    );
    config.scope.validate().unwrap();

    let ds = kind(&docs, "DaemonSet");
    let pod = &ds["spec"]["template"];
    let spec = &pod["spec"];
    assert_eq!(spec["hostPID"], Value::Bool(true), "the node's pids");
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        pod["metadata"]["labels"]
    );
    let containers = spec["containers"].as_sequence().unwrap();
    let daemon = containers
        .iter()
        .find(|c| c["name"] == "numaplace")
        .unwrap();

    // nsenter into the host's cgroup namespace, then numaplace's own
    // command line, which its parser takes.
    let cmd = strings(&daemon["command"]);
    let at = cmd.iter().position(|a| a == "--").expect("nsenter ... --");
    assert_eq!(cmd[0], "nsenter");
    assert!(cmd[..at].contains(&"--cgroup=/proc/1/ns/cgroup".to_string()));
    let argv = &cmd[at + 1..];
    assert_eq!(argv[0], "/usr/bin/numaplace");
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let Command::Run(run) = cli.command else {
        panic!("{argv:?} is not `numaplace run`");
    };
    // The config it names is where the ConfigMap is mounted.
    let config_path = run.choice.config.expect("--config");
    let mounts = daemon["volumeMounts"].as_sequence().unwrap();
    let cm_mount = mounts
        .iter()
        .find(|m| m["name"] == "config")
        .expect("config mount");
    let dir = Path::new(cm_mount["mountPath"].as_str().unwrap());
    assert_eq!(config_path, dir.join("numaplace.toml"));
    let volume = spec["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);

    // The host's /sys read-only; the state file on the node's disk.
    let sys = mounts.iter().find(|m| m["mountPath"] == "/sys").unwrap();
    assert_eq!(sys["readOnly"], Value::Bool(true));
    let state_dir = config.state.parent().unwrap().to_str().unwrap().to_string();
    assert!(
        mounts
            .iter()
            .any(|m| m["mountPath"].as_str() == Some(&state_dir)),
        "{state_dir} is a mount"
    );

    // A Guaranteed pod (requests equal to limits everywhere): its own
    // cgroup is not under the Burstable/BestEffort subtrees in scope.
    for c in containers {
        let r = &c["resources"];
        assert!(r["limits"]["cpu"].is_string() && r["limits"]["memory"].is_string());
        assert_eq!(
            r["requests"],
            r["limits"],
            "{}",
            c["name"].as_str().unwrap()
        );
    }
    assert!(
        config
            .scope
            .cgroups
            .iter()
            .all(|c| c.contains("burstable") || c.contains("besteffort")),
        "{:?}",
        config.scope.cgroups
    );

    // Only the daemon is privileged; the sidecar has no capability.
    let sidecar = containers.iter().find(|c| c["name"] == "metrics").unwrap();
    assert_eq!(daemon["securityContext"]["privileged"], Value::Bool(true));
    assert_ne!(sidecar["securityContext"]["privileged"], Value::Bool(true));
    assert_eq!(
        strings(&sidecar["securityContext"]["capabilities"]["drop"]),
        ["ALL"]
    );

    // Metrics: the daemon on the pod's loopback (its parser's rule), the
    // sidecar relaying the annotated port to that address.
    let listen = config.metrics.listen.as_deref().expect("[metrics] listen");
    let Listen::Tcp(addr) = parse_listen(listen).unwrap() else {
        panic!("{listen}: the sidecar relays TCP");
    };
    let relay = strings(&sidecar["command"]);
    assert_eq!(relay[0], "socat");
    let target = format!("TCP:{addr}");
    assert!(
        relay
            .iter()
            .any(|a| a == &target || a.starts_with(&format!("{target},"))),
        "{relay:?} relays to {target}"
    );
    let notes = &pod["metadata"]["annotations"];
    assert_eq!(notes["prometheus.io/scrape"], "true");
    assert_eq!(notes["prometheus.io/path"], "/metrics");
    let port: u16 = notes["prometheus.io/port"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        relay[1].starts_with(&format!("TCP-LISTEN:{port},")),
        "{relay:?} listens on {port}"
    );
    let ports = sidecar["ports"].as_sequence().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["containerPort"].as_u64() == Some(port.into()))
    );
}
