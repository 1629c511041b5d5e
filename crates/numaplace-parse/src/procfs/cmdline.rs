//! `/proc/<pid>/cmdline`: the arguments, each followed by a NUL.

/// Splits a `cmdline` into its arguments (bytes that are not UTF-8 kept,
/// see `name_from_bytes`). Empty for kernel
/// threads and zombies (empty file). One trailing NUL ends the last
/// argument; empty arguments in between are kept (`a\0\0b\0` is `a`, ``,
/// `b`). A process that rewrote its argument area (`setproctitle`) may
/// have no NUL at all: that is one argument. Untrusted.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let body = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    body.split(|&b| b == 0)
        .map(numaplace_model::task::name_from_bytes)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_capture() {
        // `/proc/<pid>/cmdline` of `sleep 30` on the development VM.
        assert_eq!(parse_cmdline(b"sleep\x0030\x00"), ["sleep", "30"]);
    }

    #[test]
    fn edge_cases() {
        assert!(parse_cmdline(b"").is_empty());
        assert_eq!(parse_cmdline(b"\0"), [""]);
        assert_eq!(parse_cmdline(b"a\0\0b\0"), ["a", "", "b"]);
        assert_eq!(parse_cmdline(b"prog\0\0"), ["prog", ""]);
        assert_eq!(
            parse_cmdline(b"nginx: worker process"),
            ["nginx: worker process"]
        );
        assert_eq!(parse_cmdline(b"caf\xe9\0x\0"), ["caf\u{10ffe9}", "x"]);
        assert_eq!(
            parse_cmdline(b"qemu-system-x86_64\0-name\0guest=vm1\0"),
            ["qemu-system-x86_64", "-name", "guest=vm1"]
        );
    }
}
