//! Tests of the `numa_maps` parser: real captures, every form by hand, garbage.

use super::*;

/// `cat /proc/self/numa_maps` on the development VM (Linux 6.18, x86_64,
/// one node). The three `default` lines without pages are vvar/vdso.
const CAT_SELF: &str = r#"55b4d0d3b000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=4
55b4d0d3d000 default file=/usr/bin/cat mapped=5 N0=5 kernelpagesize_kB=4
55b4d0d42000 default file=/usr/bin/cat mapped=3 N0=3 kernelpagesize_kB=4
55b4d0d45000 default file=/usr/bin/cat anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
55b4d0d46000 default file=/usr/bin/cat anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
55b504048000 default heap anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7fab94faa000 default anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7fab94fcc000 default file=/usr/lib/locale/C.utf8/LC_CTYPE mapped=32 mapmax=13 N0=32 kernelpagesize_kB=4
7fab95023000 default file=/usr/lib/locale/C.utf8/LC_NUMERIC mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95024000 default file=/usr/lib/locale/C.utf8/LC_TIME mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95025000 default file=/usr/lib/locale/C.utf8/LC_COLLATE mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95026000 default file=/usr/lib/locale/C.utf8/LC_MONETARY mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95027000 default file=/usr/lib/locale/C.utf8/LC_MESSAGES/SYS_LC_MESSAGES mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95028000 default file=/usr/lib/locale/C.utf8/LC_PAPER mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95029000 default anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7fab9502c000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=38 mapmax=7 N0=38 kernelpagesize_kB=4
7fab95052000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=190 mapmax=14 N0=190 kernelpagesize_kB=4
7fab951a8000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=40 mapmax=12 N0=40 kernelpagesize_kB=4
7fab951fb000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7fab951ff000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7fab95201000 default anon=5 dirty=5 active=0 N0=5 kernelpagesize_kB=4
7fab9520e000 default file=/usr/lib/locale/C.utf8/LC_NAME mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab9520f000 default file=/usr/lib/locale/C.utf8/LC_ADDRESS mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95210000 default file=/usr/lib/locale/C.utf8/LC_TELEPHONE mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95211000 default file=/usr/lib/locale/C.utf8/LC_MEASUREMENT mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95212000 default file=/usr/lib/x86_64-linux-gnu/gconv/gconv-modules.cache mapped=7 mapmax=7 N0=7 kernelpagesize_kB=4
7fab95219000 default file=/usr/lib/locale/C.utf8/LC_IDENTIFICATION mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab9521a000 default anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7fab9521c000 default
7fab95220000 default
7fab95222000 default
7fab95224000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=1 mapmax=7 N0=1 kernelpagesize_kB=4
7fab95225000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=38 mapmax=7 N0=38 kernelpagesize_kB=4
7fab9524b000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=10 mapmax=7 N0=10 kernelpagesize_kB=4
7fab95255000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7fab95257000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7ffece06f000 default stack anon=3 dirty=3 active=1 N0=3 kernelpagesize_kB=4
"#;

/// A test program's own `numa_maps` on the same host, after it set a policy
/// on each of several anonymous mappings with `mbind` (bind, interleave,
/// prefer, `=static` / `=relative` flags, local, prefer-many, weighted
/// interleave), mapped a file named "with space=and<TAB>tab" (then deleted
/// it), a memfd named "np memfd", one 2 MiB hugetlb page
/// (`MAP_HUGETLB`) and 4 MiB of transparent huge pages (`MADV_HUGEPAGE`,
/// reported in 4 kB pages: the 1024-page line).
const POLICIES: &str = r#"565401fb7000 default file=/tmp/npcap/cap dirty=1 N0=1 kernelpagesize_kB=4
565401fb8000 default file=/tmp/npcap/cap dirty=1 N0=1 kernelpagesize_kB=4
565401fb9000 default file=/tmp/npcap/cap dirty=1 N0=1 kernelpagesize_kB=4
565401fba000 default file=/tmp/npcap/cap anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
565401fbb000 default file=/tmp/npcap/cap anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbd800000 default anon=1024 dirty=1024 active=0 N0=1024 kernelpagesize_kB=4
7f2cbdc00000 default file=/anon_hugepage\040(deleted) huge anon=1 dirty=1 N0=1 kernelpagesize_kB=2048
7f2cbde2f000 default file=/memfd:np\040memfd\040(deleted) dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbde33000 default file=/tmp/npcap/with\040space\075and\011tab\040(deleted) dirty=2 active=0 N0=2 kernelpagesize_kB=4
7f2cbde37000 weighted interleave:0 anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbde3b000 prefer (many):0 anon=3 dirty=3 active=0 N0=3 kernelpagesize_kB=4
7f2cbde3f000 local anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbde43000 interleave=relative:0 anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbde47000 prefer=static:0 anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbde4b000 default anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7f2cbde4e000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=38 mapmax=5 N0=38 kernelpagesize_kB=4
7f2cbde74000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=156 mapmax=7 N0=156 kernelpagesize_kB=4
7f2cbdfca000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6
7f2cbe01d000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7f2cbe021000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7f2cbe023000 default anon=5 dirty=5 active=0 N0=5 kernelpagesize_kB=4
7f2cbe030000 prefer:0 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7f2cbe034000 interleave:0 anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7f2cbe038000 bind:0 anon=4 dirty=4 active=0 N0=4 kernelpagesize_kB=4
7f2cbe03c000 default anon=1 dirty=1 active=0 N0=1 kernelpagesize_kB=4
7f2cbe03e000 default
7f2cbe042000 default
7f2cbe044000 default
7f2cbe046000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=1 mapmax=5 N0=1 kernelpagesize_kB=4
7f2cbe047000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=38 mapmax=5 N0=38 kernelpagesize_kB=4
7f2cbe06d000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 mapped=10 mapmax=5 N0=10 kernelpagesize_kB=4
7f2cbe077000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7f2cbe079000 default file=/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 anon=2 dirty=2 active=0 N0=2 kernelpagesize_kB=4
7ffcb6d8b000 default stack anon=6 dirty=6 active=1 N0=6 kernelpagesize_kB=4
"#;

const MIB: u64 = 1 << 20;

#[test]
fn real_capture_of_cat() {
    let m = parse_numa_maps(CAT_SELF);
    assert_eq!((m.mappings, m.skipped_lines), (37, 0));
    assert_eq!(m.nodes.keys().copied().collect::<Vec<_>>(), [0]);
    let want = NodePages {
        anon: 65536,
        file: 1593344,
        huge: 0,
    };
    assert_eq!(m.node(0), want);
    assert_eq!(m.total(), want);
    assert_eq!(m.node(1), NodePages::default());
}

#[test]
fn real_capture_with_every_policy() {
    let m = parse_numa_maps(POLICIES);
    assert_eq!((m.mappings, m.skipped_lines), (34, 0));
    assert_eq!(
        m.total(),
        NodePages {
            anon: 4321280,
            file: 1069056,
            huge: 2 * MIB,
        }
    );
    let policies: Vec<String> = POLICIES
        .lines()
        .map(|l| parse_numa_maps_line(l).unwrap().policy)
        .collect();
    for p in [
        "default",
        "bind:0",
        "interleave:0",
        "prefer:0",
        "prefer=static:0",
        "interleave=relative:0",
        "local",
        "prefer (many):0",
        "weighted interleave:0",
    ] {
        assert!(policies.iter().any(|q| q == p), "{p} not in {policies:?}");
    }
}

#[test]
fn policies_with_spaces_end_at_the_first_field() {
    let l = parse_numa_maps_line(
        "7f2cbde3b000 prefer (many):0 anon=3 dirty=3 active=0 N0=3 kernelpagesize_kB=4",
    )
    .unwrap();
    assert_eq!(l.policy, "prefer (many):0");
    assert_eq!(
        (l.kind, l.node_pages.as_slice()),
        (MappingKind::Anon, &[(0, 3)][..])
    );
    let l = parse_numa_maps_line(
        "7f00 weighted interleave=static:0-3 file=/x N2=1 kernelpagesize_kB=4",
    )
    .unwrap();
    assert_eq!(
        (l.policy.as_str(), l.file.as_deref()),
        ("weighted interleave=static:0-3", Some("/x"))
    );
    let l = parse_numa_maps_line("7f00 prefer (many)=relative:1 heap").unwrap();
    assert_eq!(
        (l.policy.as_str(), l.page_size),
        ("prefer (many)=relative:1", 0)
    );
}

#[test]
fn every_form_by_hand() {
    /// (line, kind, bytes per node)
    type Case = (&'static str, MappingKind, &'static [(u32, u64)]);
    let cases: &[Case] = &[
        // two nodes, bind
        (
            "00400000 bind:1 anon=3 dirty=3 N1=3 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(1, 3 * 4096)],
        ),
        // interleave over two nodes
        (
            "7f0000000000 interleave:0-1 anon=4 dirty=4 active=2 N0=2 N1=2 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(0, 8192), (1, 8192)],
        ),
        (
            "7f0000000000 prefer:1 heap anon=10 dirty=10 N0=4 N1=6 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(0, 4 * 4096), (1, 6 * 4096)],
        ),
        (
            "7ffd00000000 local stack anon=6 dirty=6 active=1 N0=6 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(0, 6 * 4096)],
        ),
        // a thread stack on kernels before 4.5
        (
            "7f5a00000000 default stack:4711 anon=2 dirty=2 N1=2 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(1, 8192)],
        ),
        // every counter
        (
            "7f00 default file=/lib/x.so anon=1 dirty=2 mapped=9 mapmax=3 swapcache=1 active=4 writeback=1 N0=5 N3=4 kernelpagesize_kB=4",
            MappingKind::File,
            &[(0, 5 * 4096), (3, 4 * 4096)],
        ),
        // a path with escaped space, tab, '=' and newline
        (
            r"7f00 default file=/data/my\040file\075x\011y\012z mapped=2 N0=2 kernelpagesize_kB=4",
            MappingKind::File,
            &[(0, 8192)],
        ),
        // hugetlb: named huge, and by page size alone
        (
            r"7f2cbdc00000 bind:1 file=/anon_hugepage\040(deleted) huge anon=1 dirty=1 N1=1 kernelpagesize_kB=2048",
            MappingKind::Huge,
            &[(1, 2 * MIB)],
        ),
        (
            "7f40000000 default file=/dev/hugepages/db huge dirty=2 N0=1 N1=1 kernelpagesize_kB=1048576",
            MappingKind::Huge,
            &[(0, 1 << 30), (1, 1 << 30)],
        ),
        (
            "7f40000000 default anon=1 N0=1 kernelpagesize_kB=2048",
            MappingKind::Huge,
            &[(0, 2 * MIB)],
        ),
        // 64 kB base pages (arm64, ppc64): not huge
        (
            "ffff80000000 default anon=2 dirty=2 N0=2 kernelpagesize_kB=64",
            MappingKind::Anon,
            &[(0, 2 * 65536)],
        ),
        // no pages at all
        ("7f2cbe03e000 default", MappingKind::Anon, &[]),
        (
            "7f2cbdfca000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6",
            MappingKind::File,
            &[],
        ),
        // a path holding bytes the kernel does not escape (\r, form feed)
        // that spell field names: still one token
        (
            "7f00 default file=/tmp/a\rhuge\x0cheap mapped=1 N0=1 kernelpagesize_kB=4",
            MappingKind::File,
            &[(0, 4096)],
        ),
        // a newer kernel's unknown word and field are ignored
        (
            "7f00 default anon=1 N0=1 kernelpagesize_kB=4 shiny newfield=7",
            MappingKind::Anon,
            &[(0, 4096)],
        ),
        // node ids above 255 on big machines
        (
            "7f00 bind:1023 anon=1 N1023=1 kernelpagesize_kB=4",
            MappingKind::Anon,
            &[(1023, 4096)],
        ),
    ];
    for &(line, kind, bytes) in cases {
        let m = parse_numa_maps_line(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(m.kind, kind, "{line:?}");
        assert_eq!(m.node_bytes().collect::<Vec<_>>(), bytes, "{line:?}");
    }

    let text: String = cases.iter().map(|c| format!("{}\n", c.0)).collect();
    let all = parse_numa_maps(&text);
    assert_eq!((all.mappings, all.skipped_lines), (cases.len(), 0));
    assert_eq!(all.node(1).huge, 2 * MIB + (1 << 30));
    assert_eq!(all.node(1023).anon, 4096);
}

#[test]
fn a_path_keeps_the_kernels_escapes() {
    let m = parse_numa_maps_line(r"7f00 default file=/my\040dir/a\040b N0=1 kernelpagesize_kB=4")
        .unwrap();
    assert_eq!(m.file.as_deref(), Some(r"/my\040dir/a\040b"));
    assert_eq!(m.start, 0x7f00);
}

#[test]
fn malformed_lines_are_counted_and_left_out() {
    let bad = [
        "zzzz default N0=1 kernelpagesize_kB=4",
        "7f00",
        "7f00 N0=1 kernelpagesize_kB=4",
        "7f00 default N0=1",
        "7f00 default N0=x kernelpagesize_kB=4",
        "7f00 default Nx=1 kernelpagesize_kB=4",
        "7f00 default N99999999999=1 kernelpagesize_kB=4",
        "7f00 default N0=1 N0=2 kernelpagesize_kB=4",
        "7f00 default N0=1 kernelpagesize_kB=four",
        "7f00 default N0=1 kernelpagesize_kB=4 kernelpagesize_kB=4",
        "7f00 default anon=-1 N0=1 kernelpagesize_kB=4",
        "7f00 default file=/a file=/b",
        "7f00 default N0=18446744073709551615 kernelpagesize_kB=4",
        "7f00 default N0=1 kernelpagesize_kB=18446744073709551615",
        "7f00000000000000000 default",
        "+7f00 default",
        "\u{feff}7f00 default",
    ];
    for line in bad {
        assert!(parse_numa_maps_line(line).is_err(), "accepted {line:?}");
    }
    let mut text = String::from("7f00 default anon=1 N0=1 kernelpagesize_kB=4\n\n  \n");
    for line in bad {
        text.push_str(line);
        text.push('\n');
    }
    let m = parse_numa_maps(&text);
    assert_eq!((m.mappings, m.skipped_lines), (1, bad.len()));
    assert_eq!(m.total().anon, 4096);
}

#[test]
fn garbage_never_fails() {
    for text in [
        "",
        "\n\n\n",
        "hello world",
        "\0\0\0",
        "N0=1 N1=2",
        "kernelpagesize_kB=4",
        &"x".repeat(10_000),
        &"7f00 default N0=1 kernelpagesize_kB=4\n".repeat(1000),
    ] {
        let m = parse_numa_maps(text);
        assert!(m.mappings + m.skipped_lines <= text.lines().count());
    }
    let m = parse_numa_maps(&"7f00 default N0=1 kernelpagesize_kB=4\n".repeat(1000));
    assert_eq!((m.mappings, m.node(0).anon), (1000, 1000 * 4096));
}

#[test]
fn sums_saturate_instead_of_overflowing() {
    let line = format!("7f00 default N0={} kernelpagesize_kB=1\n", u64::MAX / 1024);
    let m = parse_numa_maps(&line.repeat(3));
    assert_eq!((m.mappings, m.node(0).anon), (3, u64::MAX));
    assert_eq!(m.total().anon, u64::MAX);
}

#[test]
fn memory_under_an_explicit_policy_is_what_the_kernel_does_not_balance() {
    let line = |p: &str| {
        parse_numa_maps_line(&format!("7f0000000000 {p} anon=2 N1=2 kernelpagesize_kB=4"))
    };
    assert!(line("default").unwrap().kernel_balances());
    assert!(line("bind=balancing:0-1").unwrap().kernel_balances());
    assert!(line("bind=static,balancing:1").unwrap().kernel_balances());
    for p in [
        "bind:1",
        "interleave:0-1",
        "prefer:1",
        "prefer=static:1",
        "prefer (many)=relative:0-1",
        "local",
        "weighted interleave:0-1",
    ] {
        assert!(!line(p).unwrap().kernel_balances(), "{p}");
    }
    let m = parse_numa_maps(
        "7f0000000000 bind:1 anon=3 N1=3 kernelpagesize_kB=4\n\
         7f0000100000 default anon=5 N0=5 kernelpagesize_kB=4\n\
         7f0000200000 interleave:0-1 anon=4 N0=2 N1=2 kernelpagesize_kB=4\n",
    );
    assert_eq!(m.explicit_policy_bytes, 7 * 4096);
    assert_eq!(m.total().anon, 12 * 4096);
}
