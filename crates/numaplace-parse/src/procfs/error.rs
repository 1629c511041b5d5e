//! Why the text of a procfs file was refused ([`ParseError`]).

use numaplace_model::CpuSetParseError;
use thiserror::Error;

/// Why the text of one procfs file was refused. `file` names the kind of
/// file (`stat`, `status`); the reader adds the path.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The text does not have the file's shape at all.
    #[error("{file}: {what}")]
    Malformed {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
        /// What is wrong with it.
        what: String,
    },
    /// Fewer fields than the kernel has always written: a cut-off read or
    /// not the file it claims to be.
    #[error(
        "{file}: truncated: {found} fields after the command name, need at least {needed} \
         (up to {field})"
    )]
    Truncated {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
        /// Fields found after the command name.
        found: usize,
        /// Fields needed.
        needed: usize,
        /// The last field needed.
        field: &'static str,
    },
    /// The text does not end with the newline the kernel always writes:
    /// the read was cut short, possibly inside a number.
    #[error("{file}: no newline at the end: the read was cut short")]
    Unterminated {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
    },
    /// A field every kernel writes is missing.
    #[error("{file}: no {field} line")]
    MissingField {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
        /// The field (`Tgid`, `Cpus_allowed_list`).
        field: &'static str,
    },
    /// A field is there but its value is not what the kernel writes.
    #[error("{file}: {field}: {value:?} is not {expected}")]
    InvalidField {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
        /// The field.
        field: &'static str,
        /// The offending value, cut to a readable length.
        value: String,
        /// What the kernel writes there (`a number`).
        expected: &'static str,
    },
    /// A CPU or node list field failed to parse.
    #[error("{file}: {field}: {source}")]
    List {
        /// The kind of file (`stat`, `status`).
        file: &'static str,
        /// The field.
        field: &'static str,
        /// Why the list did not parse.
        source: CpuSetParseError,
    },
}

impl ParseError {
    /// [`ParseError::InvalidField`], with `value` cut to a readable length.
    pub fn invalid(
        file: &'static str,
        field: &'static str,
        value: &str,
        expected: &'static str,
    ) -> Self {
        ParseError::InvalidField {
            file,
            field,
            value: shorten(value),
            expected,
        }
    }
}

/// At most 64 characters of `s`, so that an error about garbage input stays
/// one readable line.
pub fn shorten(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_cuts_long_values_on_char_boundaries() {
        assert_eq!(shorten("abc"), "abc");
        let long = "é".repeat(100);
        let s = shorten(&long);
        assert!(s.ends_with("..."));
        assert_eq!(s.chars().count(), 67);
    }
}
