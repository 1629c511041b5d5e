//! Any answer a peer sends is read or refused, never a panic; what is read
//! holds no character that acts on a terminal and no list longer than the
//! daemon sends.

use super::*;
use proptest::prelude::*;

fn http(body: &str) -> Vec<u8> {
    format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}").into_bytes()
}

/// Every string of a state, for the checks.
fn strings(s: &TopState) -> Vec<&str> {
    let mut out = vec![s.policy.as_str()];
    for n in &s.nodes {
        out.push(&n.cpus);
    }
    for g in &s.groups {
        out.extend([g.label.as_str(), &g.kind, &g.cpus]);
        out.extend(g.class.as_deref());
        out.extend(g.signals.iter().map(String::as_str));
        out.extend(g.left_alone.iter().map(String::as_str));
    }
    for d in &s.decisions {
        out.extend([d.label.as_str(), &d.action, &d.reason, &d.outcome]);
    }
    out
}

fn acts_on_a_terminal(c: char) -> bool {
    c.is_control() || numaplace_model::task::is_bidi_or_invisible(c)
}

/// Text with the characters a hostile peer would send.
fn hostile_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("\u{1b}]2;owned\u{7}".to_string()),
            Just("\u{1b}]52;c;ZXZpbA==\u{7}".to_string()),
            Just("\u{1b}[2J".to_string()),
            Just("\u{9b}31m".to_string()),
            Just("\u{202e}".to_string()),
            Just("\\".to_string()),
            "[a-z ]{0,8}",
            any::<char>().prop_map(String::from),
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

fn row(text: String, n: usize) -> serde_json::Value {
    serde_json::json!({"round": n, "time_unix_ns": 1, "pid": 1, "label": text,
        "action": text, "reason": text, "outcome": text})
}

fn group(text: String) -> serde_json::Value {
    serde_json::json!({"pid": 1, "label": text, "kind": text, "in_scope": true, "threads": 1,
        "running": {}, "cpus": text, "busy_cpus": null, "memory": null, "class": text,
        "signals": [text], "left_alone": [text]})
}

proptest! {
    // The lists run past their caps in most cases; 64 are enough for the
    // rules (each state is up to a thousand rows of hostile strings).
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_bytes_are_read_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse_answer(&bytes);
        let mut framed = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = parse_answer(&framed);
    }

    #[test]
    fn a_hostile_state_is_drawn_escaped_and_capped(
        text in hostile_text(),
        groups in 0..(MAX_GROUPS + 40),
        decisions in 0..(MAX_DECISIONS + 40),
        nodes in 0..(MAX_NODES + 40),
    ) {
        let state = serde_json::json!({
            "format": FORMAT, "policy": text, "applies": true, "round": 1,
            "time_unix_ns": 1, "interval_ns": 1,
            "nodes": (0..nodes).map(|i| serde_json::json!({"id": i, "cpus": text,
                "cpu_count": 1, "busy_cpus": null, "mem_total": null, "mem_free": null}))
                .collect::<Vec<_>>(),
            "bandwidth": [],
            "groups": (0..groups).map(|_| group(text.clone())).collect::<Vec<_>>(),
            "groups_left_out": 0,
            "decisions": (0..decisions).map(|i| row(text.clone(), i)).collect::<Vec<_>>(),
        });
        let s = parse_answer(&http(&state.to_string())).unwrap();
        for t in strings(&s) {
            prop_assert!(!t.chars().any(acts_on_a_terminal), "{t:?}");
            prop_assert!(t.chars().count() <= MAX_REASON, "{} chars", t.chars().count());
        }
        prop_assert_eq!(s.groups.len(), groups.min(MAX_GROUPS));
        prop_assert_eq!(s.decisions.len(), decisions.min(MAX_DECISIONS));
        prop_assert_eq!(s.nodes.len(), nodes.min(MAX_NODES));
        // The newest decisions are the ones kept.
        if let Some(last) = s.decisions.last() {
            prop_assert_eq!(last.round as usize, decisions - 1);
        }
    }
}

#[test]
fn another_format_and_other_statuses_are_refused_in_one_line() {
    let e = parse_answer(&http(&format!(
        "{{\"format\": {}, \"policy\": \"x\", \"applies\": true, \"round\": 1, \"time_unix_ns\": 1, \
         \"interval_ns\": 1, \"nodes\": [], \"bandwidth\": [], \"groups\": [], \
         \"groups_left_out\": 0, \"decisions\": []}}",
        FORMAT + 1
    )))
    .unwrap_err();
    assert!(e.contains("format"), "{e}");
    let e = parse_answer(b"HTTP/1.0 403 Forbidden\r\n\r\nserved on the UNIX socket only\n")
        .unwrap_err();
    assert!(e.contains("403") && e.contains("UNIX socket"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}
