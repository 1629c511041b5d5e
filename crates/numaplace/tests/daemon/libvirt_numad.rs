//! `numaplace advise --numad-w` against libvirt's side of the numad
//! contract: the argument built as libvirt builds it, the output parsed
//! as libvirt parses it, on real 2-, 4- and 8-node machines' sysfs trees.
//!
//! libvirt (src/util/virnuma.c, virNumaGetAutoPlacementAdvice) runs
//! `numad -w "%d:%llu"` with the domain's vCPUs and
//! `VIR_DIV_UP(memory_KiB, 1024)`, keeps the whole of stdout, and
//! src/qemu/qemu_process.c (qemuProcessPrepareDomainNUMAPlacement) hands
//! it to `virBitmapParse(nodeset, &numadNodeset, VIR_DOMAIN_CPUMASK_LEN)`.
//! [`vir_bitmap_parse`] below is that parser's rules written again.

use crate::common;
use crate::snapshot;

use std::collections::BTreeSet;
use std::path::Path;

use common::{numaplace, repo_root, text};
use snapshot::Machine;

/// libvirt's `VIR_DOMAIN_CPUMASK_LEN` (src/conf/domain_conf.h): the size
/// of the bitmap the advice is parsed into.
const VIR_DOMAIN_CPUMASK_LEN: usize = 1024;

/// `virSkipSpaces` (src/util/virstring.c): skips `g_ascii_isspace`
/// characters (space, \t, \n, \v, \f, \r).
fn skip_spaces(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        *i += 1;
    }
}

/// `virStrToLong_i(cur, &end, 10, &val)` (src/util/virstring.c): C's
/// `strtol` (leading blanks, an optional sign, decimal digits), an error
/// when no digit was read, on overflow, or when the value is not an `int`.
fn str_to_long_i(b: &[u8], i: &mut usize) -> Result<i64, String> {
    let mut j = *i;
    skip_spaces(b, &mut j);
    let negative = match b.get(j) {
        Some(b'-') => {
            j += 1;
            true
        }
        Some(b'+') => {
            j += 1;
            false
        }
        _ => false,
    };
    let digits = j;
    let mut v: i64 = 0;
    while j < b.len() && b[j].is_ascii_digit() {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(b[j] - b'0')))
            .ok_or("strtol overflow (ERANGE)")?;
        j += 1;
    }
    if j == digits {
        return Err(format!("no number at byte {}", *i));
    }
    let v = if negative { -v } else { v };
    if i32::try_from(v).is_err() {
        return Err(format!("{v} is not an int"));
    }
    *i = j;
    Ok(v)
}

/// `virBitmapParse(str, &bitmap, size)` (src/util/virbitmap.c): a new
/// bitmap of `size` bits filled by `virBitmapParseInternal(str, bitmap,
/// limited = true)`, whose rules these are:
/// - blanks first are skipped, and an empty (or all-blank) string fails;
/// - fields are `N`, `N-M` (N <= M) or `^N` (clears N), separated by
///   commas, each number starting with a digit; blanks may stand after a
///   number, around the `-` and after a comma;
/// - anything else after a field fails, and so does a bit at or past
///   `size` (virBitmapSetBit/ClearBit refuse it when limited);
/// - the string ends at its NUL (a C string), so a trailing comma is
///   accepted: the loop stops at the end.
fn vir_bitmap_parse(s: &str, size: usize) -> Result<BTreeSet<usize>, String> {
    parse_internal(s, size).map_err(|why| format!("Failed to parse bitmap '{s}': {why}"))
}

fn parse_internal(s: &str, size: usize) -> Result<BTreeSet<usize>, String> {
    let b = s.as_bytes();
    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
    let mut set = BTreeSet::new();
    let mut put = |bit: i64, on: bool| -> Result<(), String> {
        let bit = usize::try_from(bit).map_err(|_| format!("{bit} < 0"))?;
        if bit >= size {
            return Err(format!("bit {bit} past the bitmap's {size}"));
        }
        if on {
            set.insert(bit);
        } else {
            set.remove(&bit);
        }
        Ok(())
    };
    let mut i = 0;
    skip_spaces(b, &mut i);
    if i == b.len() {
        return Err("empty".into());
    }
    let mut neg = false;
    while i < b.len() {
        if b[i] == b'^' {
            i += 1;
            neg = true;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return Err(format!("byte {i} does not start a number"));
        }
        let start = str_to_long_i(b, &mut i)?;
        skip_spaces(b, &mut i);
        match b.get(i) {
            Some(b',') | None => put(start, !neg)?,
            Some(b'-') => {
                if neg {
                    return Err("a range after ^".into());
                }
                i += 1;
                skip_spaces(b, &mut i);
                let last = str_to_long_i(b, &mut i)?;
                if last < start {
                    return Err(format!("range {start}-{last} goes down"));
                }
                for bit in start..=last {
                    put(bit, true)?;
                }
                skip_spaces(b, &mut i);
            }
            Some(_) => {}
        }
        match b.get(i) {
            Some(b',') => {
                i += 1;
                skip_spaces(b, &mut i);
                neg = false;
            }
            None => break,
            Some(c) => return Err(format!("unexpected {:?} at byte {i}", *c as char)),
        }
    }
    Ok(set)
}

#[test]
fn the_parser_follows_virbitmapparse() {
    let p = |s: &str| vir_bitmap_parse(s, VIR_DOMAIN_CPUMASK_LEN);
    let set = |v: &[usize]| Ok(v.iter().copied().collect::<BTreeSet<_>>());
    assert_eq!(p("0-1,3\n"), set(&[0, 1, 3]), "numad's own format");
    assert_eq!(p("  2 \n"), set(&[2]));
    assert_eq!(p("0 - 2 , 5"), set(&[0, 1, 2, 5]));
    assert_eq!(p("0-3,^1"), set(&[0, 2, 3]));
    assert_eq!(p("4,"), set(&[4]), "a trailing comma ends the loop");
    assert_eq!(p("1023"), set(&[1023]));
    assert_eq!(p("1\0garbage"), set(&[1]), "a C string ends at NUL");
    for bad in [
        "",
        " \n",
        "a",
        "-1",
        "1-",
        "3-1",
        "^1-2",
        "1 2",
        "1;2",
        "1024",
        "0-1024",
        ",1",
        "99999999999",
    ] {
        assert!(p(bad).is_err(), "{bad:?} parsed: {:?}", p(bad));
    }
}

/// The `-w` argument exactly as libvirt formats it: `"%d:%llu"` of the
/// vCPUs and `VIR_DIV_UP(kib, 1024)`.
fn libvirt_w(vcpus: u16, memory_kib: u64) -> String {
    format!("{}:{}", vcpus, memory_kib.div_ceil(1024))
}

/// `advise --numad-w W` on this machine: the node set libvirt would
/// take, stdout checked to be exactly numad's `LIST\n`, and stderr.
fn advise(m: &Machine, w: &str) -> (BTreeSet<usize>, String) {
    let o = numaplace(&[
        "advise",
        "--numad-w",
        w,
        "--sysfs-root",
        m.root.to_str().unwrap(),
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "-w {w}: {err}");
    assert!(
        out.ends_with('\n') && out.lines().count() == 1,
        "one line: {out:?}"
    );
    let set = vir_bitmap_parse(&out, VIR_DOMAIN_CPUMASK_LEN)
        .unwrap_or_else(|e| panic!("-w {w}: libvirt refuses {out:?}: {e}"));
    for n in &set {
        assert!(
            m.root
                .join(format!("sys/devices/system/node/node{n}"))
                .is_dir(),
            "node {n} is not the machine's: {out:?}"
        );
    }
    (set, err)
}

fn nodes(v: &[usize]) -> BTreeSet<usize> {
    v.iter().copied().collect()
}

/// Two QEMU nodes of 2 CPUs and 512 MiB (tests/fixtures/README.md).
#[test]
fn two_nodes() {
    let m = Machine::new(
        &repo_root().join("tests/fixtures/qemu-2node.tar.xz"),
        &[300, 420],
    );
    // One vCPU and 200 MiB (204800 KiB) fit one node: the freer one.
    assert_eq!(advise(&m, &libvirt_w(1, 204_800)).0, nodes(&[1]));
    // Three vCPUs need both nodes' CPUs.
    assert_eq!(advise(&m, &libvirt_w(3, 102_400)).0, nodes(&[0, 1]));
    // 2 GiB is more than the machine has: every node, said on stderr.
    let (set, err) = advise(&m, &libvirt_w(2, 2 << 20));
    assert_eq!(set, nodes(&[0, 1]));
    assert!(err.contains("more than the machine has free"), "{err}");
}

/// Four QEMU nodes of 2 CPUs and 256 MiB in a square 0-1-3-2-0: 16 one
/// hop, 22 across.
#[test]
fn four_nodes() {
    let m = Machine::new(
        &repo_root().join("tests/fixtures/qemu-4node.tar.xz"),
        &[200, 220, 180, 240],
    );
    assert_eq!(
        advise(&m, &libvirt_w(1, 65_536)).0,
        nodes(&[3]),
        "the freest"
    );
    // 200 MiB: no node has it beside numad's 100 MiB margin, two do; the
    // freest node and its freer neighbour, one hop apart.
    let (two, _) = advise(&m, &libvirt_w(2, 204_800));
    assert_eq!(two, nodes(&[1, 3]));
    let v: Vec<usize> = two.into_iter().collect();
    assert_eq!(m.distance(v[0], v[1]), 16, "neighbours");
    // Three vCPUs: two nodes again, never the two across (0 and 3).
    let (three, _) = advise(&m, &libvirt_w(3, 1024));
    assert_eq!(three.len(), 2);
    let v: Vec<usize> = three.into_iter().collect();
    assert_eq!(m.distance(v[0], v[1]), 16, "neighbours: {v:?}");
    let (all, err) = advise(&m, &libvirt_w(9, 1024));
    assert_eq!(all, nodes(&[0, 1, 2, 3]));
    assert!(err.contains("advising every node"), "{err}");
}

/// hwloc's 16ia64-8n2s: 8 nodes of 2 CPUs in two groups of four, 25 within
/// a group and 29 across.
#[test]
fn eight_nodes() {
    let m = Machine::new(
        &repo_root().join("tests/fixtures/sysfs/hwloc-linux/16ia64-8n2s.tar.bz2"),
        &[1000, 900, 1100, 800, 1200, 2000, 1500, 1300],
    );
    assert_eq!(advise(&m, &libvirt_w(2, 1 << 20)).0, nodes(&[5]));
    // Three vCPUs: node 5 and the freest of its own group, not node 2
    // across the machine.
    let (two, _) = advise(&m, &libvirt_w(3, 1 << 20));
    assert_eq!(two, nodes(&[5, 6]));
    assert_eq!(m.distance(5, 6), 25);
    // 3000 MiB: 5 and 6 hold 3300 less two margins of 100: enough.
    assert_eq!(advise(&m, &libvirt_w(1, 3000 << 10)).0, nodes(&[5, 6]));
    // 4 nodes' CPUs: one whole group, the one holding the free memory.
    assert_eq!(advise(&m, &libvirt_w(8, 1 << 20)).0, nodes(&[4, 5, 6, 7]));
    let (all, err) = advise(&m, &libvirt_w(4, 64 << 20));
    assert_eq!(all, (0..8).collect());
    assert!(err.contains("advising every node"), "{err}");
}

#[test]
fn this_host_answers_with_its_own_nodes() {
    let o = numaplace(&["advise", "--numad-w", &libvirt_w(1, 1024)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let set = vir_bitmap_parse(&text(&o.stdout), VIR_DOMAIN_CPUMASK_LEN).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap();
    for n in &set {
        assert!(
            Path::new(&format!("/sys/devices/system/node/node{n}")).is_dir(),
            "{n} of {set:?} not in {online}"
        );
    }
    assert!(!set.is_empty());
}

#[test]
fn bad_requests_fail_with_one_line_and_print_nothing() {
    for w in ["0:1024", "four:1024", "4:lots", "4:-1", ""] {
        let o = numaplace(&["advise", "--numad-w", w]);
        assert_eq!(o.status.code(), Some(2), "-w {w:?}");
        assert!(o.stdout.is_empty(), "-w {w:?}: {}", text(&o.stdout));
        let err = text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("NCPUS[:MB]"), "{err}");
    }
}
