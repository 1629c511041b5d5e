//! numaplace's side of the hwloc XML path (`topology --xml`,
//! `HWLOC_XMLFILE`) on arbitrary text: the checks made before hwloc reads
//! a file never panic, refuse every document whose `<object>` elements
//! nest deeper than the limit (counted again here by a real XML parser),
//! and let hwloc see only well-formed XML.
//!
//! hwloc's own parse is not fuzzed here: hwlocality runs hwloc's
//! consistency check after every load in debug builds (as this one is),
//! and that check aborts the process on a topology hwloc built from
//! well-formed but contradictory XML (a child's cpuset outside its
//! parent's). Release builds do not run it; numaplace's own topology
//! checks (`Topology` construction) stand in.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numaplace_linux::topology::{MAX_XML_DEPTH, check_xml, check_xml_depth};

fn is_object(n: &roxmltree::Node<'_, '_>) -> bool {
    n.is_element() && n.tag_name().name() == "object"
}

/// The deepest nesting of `object` elements (without recursion: a deep
/// document must not overflow this check's own stack).
fn object_depth(doc: &roxmltree::Document<'_>) -> usize {
    doc.descendants()
        .filter(is_object)
        .map(|n| n.ancestors().filter(is_object).count())
        .max()
        .unwrap_or(0)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let depth = check_xml_depth(text);
    let whole = check_xml(text);
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: 4 << 20,
    };
    match roxmltree::Document::parse_with_options(text, opts) {
        Ok(doc) => {
            if object_depth(&doc) > MAX_XML_DEPTH {
                assert!(depth.is_err(), "nested past {MAX_XML_DEPTH} and let through");
            }
            assert_eq!(whole.is_ok(), depth.is_ok());
        }
        // Not XML: never let through to hwloc.
        Err(_) => assert!(whole.is_err()),
    }
});
