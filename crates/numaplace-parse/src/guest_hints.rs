//! The guest's hints: the line protocol `numaplace guest` speaks, inside a
//! VM, to the host's daemon over a virtio-serial port.
//!
//! \[Rao13\] §4.3 and §5 add two hypercalls to the
//! guest kernel, `tag` and `clear`: a vCPU is tagged while it runs a
//! thread whose CPU mask is narrower than the online CPUs, and BRM then
//! migrates only tagged vCPUs. Without a modified guest kernel the same
//! information travels as text, one message per line, ASCII, at most
//! [`MAX_LINE_BYTES`] bytes with its newline:
//!
//! ```text
//! numaplace-hints 1 tag seq=17 vcpus=1
//! numaplace-hints 1 clear seq=18 vcpus=1
//! numaplace-hints 1 set seq=18 interval-ms=1000 online=0-3 tagged=-
//! ```
//!
//! * `set` is the full current state, sent every interval whether or not it
//!   changed: a lost message or a reconnect heals at the next one, and it is
//!   the heartbeat (a host expires the hints of a guest that has sent no
//!   `set` for a few of its intervals). `tagged` is a CPU list in the
//!   kernel's syntax, `-` for none; it lies within `online`.
//! * `tag` / `clear` name the vCPUs that changed since the last `set`, the
//!   paper's two calls made visible; they come before the `set` that
//!   includes them, and a host may apply them at once.
//! * `seq` counts the guest's rounds; `1` is the protocol's version, and a
//!   line of another version is refused, not guessed at.
//!
//! Pure: [`parse_line`] takes a line without its newline and touches
//! nothing; [`Message`]'s `Display` writes one.

use std::fmt;

use numaplace_model::CpuSet;

/// The first word of every line.
pub const MAGIC: &str = "numaplace-hints";
/// The protocol version this numaplace speaks.
pub const VERSION: u32 = 1;
/// The longest line, newline included. A guest's CPU list written as
/// ranges stays far below it (a lone id every other CPU up to 1023 takes
/// about 2,500 bytes).
pub const MAX_LINE_BYTES: usize = 4096;
/// The shortest and longest interval a guest may announce, milliseconds.
pub const MIN_INTERVAL_MS: u32 = 100;
/// See [`MIN_INTERVAL_MS`].
pub const MAX_INTERVAL_MS: u32 = 60_000;
/// The default name of the port (`/dev/virtio-ports/NAME` in the guest,
/// `<target ... name='NAME'/>` in libvirt's channel).
pub const DEFAULT_PORT_NAME: &str = "org.numaplace.hints.0";

/// One line of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// The full current state, and the heartbeat.
    Set {
        /// The message's sequence number: one more than the guest's last.
        seq: u64,
        /// How often the guest sends a `set`.
        interval_ms: u32,
        /// The guest's online CPUs (its vCPUs, by the guest's numbering,
        /// which is QEMU's vCPU index).
        online: CpuSet,
        /// The vCPUs running threads whose affinity is narrower than
        /// `online`.
        tagged: CpuSet,
    },
    /// vCPUs newly tagged since the last `set`.
    Tag {
        /// The message's sequence number.
        seq: u64,
        /// The vCPUs, by the guest's numbering.
        vcpus: CpuSet,
    },
    /// vCPUs no longer tagged since the last `set`.
    Clear {
        /// The message's sequence number.
        seq: u64,
        /// The vCPUs, by the guest's numbering.
        vcpus: CpuSet,
    },
}

impl Message {
    /// Its sequence number, whichever kind it is.
    pub fn seq(&self) -> u64 {
        match self {
            Message::Set { seq, .. } | Message::Tag { seq, .. } | Message::Clear { seq, .. } => {
                *seq
            }
        }
    }
}

/// Why a line was refused: one line of text, the line itself left out (the
/// caller decides how much of untrusted input to show).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HintLineError(pub String);

fn bad(what: impl Into<String>) -> HintLineError {
    HintLineError(what.into())
}

/// Parses one line (without its newline).
pub fn parse_line(line: &str) -> Result<Message, HintLineError> {
    if line.len() >= MAX_LINE_BYTES {
        return Err(bad(format!(
            "a line of {} bytes: at most {} are allowed",
            line.len(),
            MAX_LINE_BYTES - 1
        )));
    }
    if !line.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(bad("a line with bytes that are not printable ASCII"));
    }
    let mut words = line.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(bad(format!("a line not starting with {MAGIC:?}")));
    }
    let version = words.next().unwrap_or("");
    if version != "1" {
        return Err(bad(format!(
            "protocol version {:?}: this numaplace speaks version {VERSION}",
            shorten(version)
        )));
    }
    let verb = words.next().unwrap_or("");
    let mut fields = Fields(words);
    let msg = match verb {
        "set" => {
            let seq = fields.number("seq")?;
            let interval_ms: u32 = fields.number("interval-ms")?;
            if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&interval_ms) {
                return Err(bad(format!(
                    "interval-ms={interval_ms}: must be {MIN_INTERVAL_MS}..={MAX_INTERVAL_MS}"
                )));
            }
            let online = fields.cpus("online")?;
            let tagged = fields.cpus("tagged")?;
            if online.is_empty() {
                return Err(bad("online=-: a guest has at least one CPU"));
            }
            if !tagged.is_subset(&online) {
                return Err(bad(format!(
                    "tagged={tagged} is not within online={online}"
                )));
            }
            Message::Set {
                seq,
                interval_ms,
                online,
                tagged,
            }
        }
        "tag" | "clear" => {
            let seq = fields.number("seq")?;
            let vcpus = fields.cpus("vcpus")?;
            if vcpus.is_empty() {
                return Err(bad(format!("{verb} with no vCPU")));
            }
            if verb == "tag" {
                Message::Tag { seq, vcpus }
            } else {
                Message::Clear { seq, vcpus }
            }
        }
        other => {
            return Err(bad(format!(
                "unknown message {:?} (set, tag or clear)",
                shorten(other)
            )));
        }
    };
    if let Some(extra) = fields.0.next() {
        return Err(bad(format!("unexpected {:?} at the end", shorten(extra))));
    }
    Ok(msg)
}

/// The `key=value` words after the verb, in a fixed order.
struct Fields<'a>(std::str::Split<'a, char>);

impl Fields<'_> {
    fn value(&mut self, key: &str) -> Result<&str, HintLineError> {
        let word = self.0.next().unwrap_or("");
        word.strip_prefix(key)
            .and_then(|w| w.strip_prefix('='))
            .ok_or_else(|| bad(format!("expected {key}=..., found {:?}", shorten(word))))
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str) -> Result<T, HintLineError> {
        let v = self.value(key)?;
        // Digits only: no sign, no `+`, no blanks.
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(format!("{key}={:?}: not a number", shorten(v))));
        }
        v.parse()
            .map_err(|_| bad(format!("{key}={}: out of range", shorten(v))))
    }

    fn cpus(&mut self, key: &str) -> Result<CpuSet, HintLineError> {
        let v = self.value(key)?;
        if v == "-" {
            return Ok(CpuSet::new());
        }
        // Plain lists only (`0-3,8`); the kernel's strided groups are not
        // part of the protocol.
        if v.is_empty()
            || !v
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b',' || b == b'-')
        {
            return Err(bad(format!(
                "{key}={:?}: not a CPU list like 0-3,8",
                shorten(v)
            )));
        }
        CpuSet::parse_list(v).map_err(|e| bad(format!("{key}: {}", e.reason)))
    }
}

/// At most 32 characters of untrusted text, for a message.
fn shorten(s: &str) -> String {
    s.chars().take(32).collect()
}

/// `-` for the empty set, else the kernel's list syntax.
struct List<'a>(&'a CpuSet);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("-")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl fmt::Display for Message {
    /// The line, without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MAGIC} {VERSION} ")?;
        match self {
            Message::Set {
                seq,
                interval_ms,
                online,
                tagged,
            } => write!(
                f,
                "set seq={seq} interval-ms={interval_ms} online={} tagged={}",
                List(online),
                List(tagged)
            ),
            Message::Tag { seq, vcpus } => write!(f, "tag seq={seq} vcpus={}", List(vcpus)),
            Message::Clear { seq, vcpus } => write!(f, "clear seq={seq} vcpus={}", List(vcpus)),
        }
    }
}

/// What a guest sends after a round: `tag` / `clear` for what changed since
/// `before`, then the full `set`, each line ended by a newline.
pub fn round_message(
    seq: u64,
    interval_ms: u32,
    online: &CpuSet,
    before: &CpuSet,
    now: &CpuSet,
) -> String {
    let mut out = String::new();
    let tagged = now.difference(before);
    let cleared = before.difference(now);
    for m in [
        (!tagged.is_empty()).then_some(Message::Tag { seq, vcpus: tagged }),
        (!cleared.is_empty()).then_some(Message::Clear {
            seq,
            vcpus: cleared,
        }),
        Some(Message::Set {
            seq,
            interval_ms,
            online: online.clone(),
            tagged: now.intersection(online),
        }),
    ]
    .into_iter()
    .flatten()
    {
        out.push_str(&m.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
