//! `numaplace top --connect`'s reader of a peer's answer to `GET /state`
//! on arbitrary bytes: never a panic, and whatever it accepts holds no
//! character that acts on a terminal and no list longer than the daemon's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_view::{MAX_DECISIONS, MAX_GROUPS, MAX_NODES, MAX_REASON, TopState, parse_answer};

fn strings(s: &TopState) -> Vec<&str> {
    let mut out = vec![s.policy.as_str()];
    out.extend(s.nodes.iter().map(|n| n.cpus.as_str()));
    for g in &s.groups {
        out.extend([g.label.as_str(), &g.kind, &g.cpus]);
        out.extend(g.class.as_deref());
        out.extend(g.signals.iter().chain(&g.left_alone).map(String::as_str));
    }
    for d in &s.decisions {
        out.extend([d.label.as_str(), &d.action, &d.reason, &d.outcome]);
    }
    out
}

fn check(s: &TopState) {
    assert!(s.groups.len() <= MAX_GROUPS);
    assert!(s.decisions.len() <= MAX_DECISIONS);
    assert!(s.nodes.len() <= MAX_NODES && s.bandwidth.len() <= MAX_NODES);
    for t in strings(s) {
        assert!(t.chars().count() <= MAX_REASON, "{} chars", t.chars().count());
        assert!(
            !t.chars()
                .any(|c| c.is_control() || numaplace_model::task::is_bidi_or_invisible(c)),
            "{t:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    // As it came, and as the body of a 200 answer (most mutations of a
    // whole answer break its head first).
    if let Ok(s) = parse_answer(data) {
        check(&s);
    }
    let mut framed = b"HTTP/1.0 200 OK\r\n\r\n".to_vec();
    framed.extend_from_slice(data);
    if let Ok(s) = parse_answer(&framed) {
        check(&s);
    }
});
