//! The few answers the task iterator needs from the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`): where a field of `struct task_struct`
//! lies and how wide it is, and the type id of the iterator's attach
//! function (`bpf_iter_task`).
//!
//! The format is the kernel's `Documentation/bpf/btf.rst` (the
//! `struct btf_header`, then `struct btf_type` records, each followed by
//! data whose size its kind gives, then a string section). Only what the
//! lookups walk is kept; the parser takes bytes and touches no file, and
//! every offset it follows is checked, so a short or corrupt blob is an
//! error, never a panic.

/// `BTF_MAGIC`, read in the host's byte order.
const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// What went wrong reading a BTF blob.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    #[error("not BTF: {0}")]
    /// The BTF blob does not parse.
    Malformed(String),
    #[error("the kernel's BTF has no {0}")]
    /// A type or member the iterator needs is missing.
    Missing(String),
}

/// One type record: its kind, name, `size` or `type` word, and where its
/// trailing data starts in the type section.
#[derive(Debug, Clone, Copy)]
struct Type {
    kind: u32,
    kind_flag: bool,
    vlen: u32,
    name_off: u32,
    size_or_type: u32,
    data: usize,
}

/// A parsed BTF blob (types indexed by id; id 0 is `void`).
#[derive(Debug)]
pub struct Btf<'a> {
    types: Vec<u32>,
    type_section: &'a [u8],
    strings: &'a [u8],
}

/// A field found by [`Btf::field`]: its byte offset from the start of the
/// outer struct and its size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: u32,
    pub size: u32,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)
        .map(|s| u32::from_ne_bytes(s.try_into().unwrap()))
}

impl<'a> Btf<'a> {
    /// Parses a BTF blob (`/sys/kernel/btf/vmlinux`).
    pub fn parse(blob: &'a [u8]) -> Result<Btf<'a>, BtfError> {
        let bad = |what: &str| BtfError::Malformed(what.to_string());
        let magic = blob
            .get(0..2)
            .ok_or_else(|| bad("shorter than its header"))?;
        if u16::from_ne_bytes([magic[0], magic[1]]) != MAGIC {
            return Err(bad("wrong magic (another byte order, or not BTF)"));
        }
        let word = |at| u32_at(blob, at).ok_or_else(|| bad("shorter than its header"));
        let hdr_len = word(4)? as usize;
        let (type_off, type_len) = (word(8)? as usize, word(12)? as usize);
        let (str_off, str_len) = (word(16)? as usize, word(20)? as usize);
        let section = |off: usize, len: usize| {
            let start = hdr_len.checked_add(off)?;
            blob.get(start..start.checked_add(len)?)
        };
        let type_section =
            section(type_off, type_len).ok_or_else(|| bad("type section out of bounds"))?;
        let strings =
            section(str_off, str_len).ok_or_else(|| bad("string section out of bounds"))?;
        // Where each type's record starts (id 0, `void`, has none): four
        // bytes a type, each decoded again when looked at.
        let mut types = vec![u32::MAX];
        let mut at = 0usize;
        while at < type_section.len() {
            let word =
                |o: usize| u32_at(type_section, at + o).ok_or_else(|| bad("truncated type record"));
            // The record's three words must be there; its kind and count
            // say how long its trailing data is.
            word(8)?;
            let info = word(4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let trailing = match kind {
                KIND_INT | 14 | 17 => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | 15 | KIND_ENUM64 => 12 * vlen as usize,
                KIND_ENUM | 13 => 8 * vlen as usize,
                KIND_PTR | 7 | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
                | KIND_FUNC | 16 | KIND_TYPE_TAG => 0,
                k => return Err(BtfError::Malformed(format!("unknown type kind {k}"))),
            };
            types.push(u32::try_from(at).map_err(|_| bad("type section over 4 GiB"))?);
            at = at + 12 + trailing;
        }
        if at != type_section.len() {
            return Err(bad("type section ends inside a record"));
        }
        // No index by name: the few lookups scan the types (a daemon
        // reads this once; an index of a kernel's 100,000-odd names would
        // cost more memory than the blob).
        Ok(Btf {
            types,
            type_section,
            strings,
        })
    }

    fn name(&self, off: u32) -> &'a [u8] {
        let rest = self.strings.get(off as usize..).unwrap_or(&[]);
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        &rest[..end]
    }

    fn ty(&self, id: u32) -> Result<Type, BtfError> {
        let at = *self
            .types
            .get(id as usize)
            .ok_or_else(|| BtfError::Malformed(format!("type id {id} out of range")))?;
        if at == u32::MAX {
            return Ok(Type {
                kind: 0,
                kind_flag: false,
                vlen: 0,
                name_off: 0,
                size_or_type: 0,
                data: 0,
            });
        }
        let at = at as usize;
        // Checked when the section was parsed.
        let word = |o: usize| u32_at(self.type_section, at + o).unwrap_or(0);
        let info = word(4);
        Ok(Type {
            kind: (info >> 24) & 0x1f,
            kind_flag: info >> 31 == 1,
            vlen: info & 0xffff,
            name_off: word(0),
            size_or_type: word(8),
            data: at + 12,
        })
    }

    /// The id of the named type of this kind.
    fn named(&self, kind: u32, name: &str) -> Option<u32> {
        (1..self.types.len() as u32).find(|&id| {
            self.ty(id)
                .is_ok_and(|t| t.kind == kind && self.name(t.name_off) == name.as_bytes())
        })
    }

    /// The type id of the kernel function `name` (e.g. `bpf_iter_task`).
    pub fn func(&self, name: &str) -> Result<u32, BtfError> {
        self.named(KIND_FUNC, name)
            .ok_or_else(|| BtfError::Missing(format!("function {name}")))
    }

    /// Follows typedefs and qualifiers to the type they name.
    fn resolve(&self, mut id: u32) -> Result<Type, BtfError> {
        for _ in 0..32 {
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Ok(t),
            }
        }
        Err(BtfError::Malformed(format!(
            "type {id}: a chain of more than 32 typedefs"
        )))
    }

    /// Size in bytes of a type.
    fn size_of(&self, id: u32) -> Result<u32, BtfError> {
        let t = self.resolve(id)?;
        match t.kind {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 => Ok(t.size_or_type),
            KIND_PTR => Ok(8),
            KIND_ARRAY => {
                let elem = self.word(t.data)?;
                let n = self.word(t.data + 8)?;
                self.size_of(elem)?
                    .checked_mul(n)
                    .ok_or_else(|| BtfError::Malformed("array size overflows".into()))
            }
            k => Err(BtfError::Malformed(format!("type of kind {k} has no size"))),
        }
    }

    fn word(&self, at: usize) -> Result<u32, BtfError> {
        u32_at(self.type_section, at).ok_or_else(|| BtfError::Malformed("truncated member".into()))
    }

    /// The member `name` of a struct or union (looking into anonymous
    /// members), as (byte offset, type id); `None` if it has none.
    fn member(&self, t: Type, name: &[u8]) -> Result<Option<(u32, u32)>, BtfError> {
        if t.kind != KIND_STRUCT && t.kind != KIND_UNION {
            return Ok(None);
        }
        for i in 0..t.vlen as usize {
            let at = t.data + 12 * i;
            let (name_off, ty, raw) = (self.word(at)?, self.word(at + 4)?, self.word(at + 8)?);
            // With kind_flag, the low 24 bits are the bit offset and the
            // high 8 a bitfield's size.
            let bits = if t.kind_flag { raw & 0xff_ffff } else { raw };
            let m_name = self.name(name_off);
            if m_name == name {
                if bits % 8 != 0 {
                    return Err(BtfError::Malformed(format!(
                        "member {} is a bitfield",
                        String::from_utf8_lossy(name)
                    )));
                }
                return Ok(Some((bits / 8, ty)));
            }
            if m_name.is_empty() {
                let inner = self.resolve(ty)?;
                if let Some((off, ty)) = self.member(inner, name)? {
                    return Ok(Some((bits / 8 + off, ty)));
                }
            }
        }
        Ok(None)
    }

    /// A field of struct `strukt` by its dotted path (`se.sum_exec_runtime`).
    pub fn field(&self, strukt: &str, path: &str) -> Result<Field, BtfError> {
        let missing = || BtfError::Missing(format!("field {strukt}.{path}"));
        let id = self
            .named(KIND_STRUCT, strukt)
            .ok_or_else(|| BtfError::Missing(format!("struct {strukt}")))?;
        let mut t = self.ty(id)?;
        let mut offset = 0u32;
        let mut last = id;
        for part in path.split('.') {
            let (off, ty) = self.member(t, part.as_bytes())?.ok_or_else(missing)?;
            offset += off;
            last = ty;
            t = self.resolve(ty)?;
        }
        Ok(Field {
            offset,
            size: self.size_of(last)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF blob: `int` (4 bytes), `unsigned long` (8), a typedef
    /// `u64` of it, `char[16]`, `struct inner { u64 sum; }`, and
    /// `struct task_struct { int pid; union { int a; int tgid; }; struct inner se; char comm[16]; }`,
    /// and a function `bpf_iter_task`.
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0unsigned long\0u64\0inner\0sum\0task_struct\0pid\0tgid\0se\0comm\0bpf_iter_task\0a\0char\0";
        let s = |name: &str| {
            let hay = strings.windows(name.len() + 2).position(|w| {
                w[0] == 0 && &w[1..=name.len()] == name.as_bytes() && w[name.len() + 1] == 0
            });
            hay.unwrap() as u32 + 1
        };
        let mut t = Vec::new();
        let mut rec = |name: u32, kind: u32, vlen: u32, flag: bool, st: u32, extra: &[u32]| {
            let info = (kind << 24) | vlen | if flag { 1 << 31 } else { 0 };
            for w in [name, info, st].iter().chain(extra) {
                t.extend_from_slice(&w.to_ne_bytes());
            }
        };
        rec(s("int"), KIND_INT, 0, false, 4, &[32]); // 1
        rec(s("unsigned long"), KIND_INT, 0, false, 8, &[64]); // 2
        rec(s("u64"), KIND_TYPEDEF, 0, false, 2, &[]); // 3
        rec(s("char"), KIND_INT, 0, false, 1, &[8]); // 4
        rec(0, KIND_ARRAY, 0, false, 0, &[4, 1, 16]); // 5: char[16]
        rec(s("inner"), KIND_STRUCT, 1, false, 8, &[s("sum"), 3, 0]); // 6
        rec(0, KIND_UNION, 2, false, 4, &[s("a"), 1, 0, s("tgid"), 1, 0]); // 7
        rec(
            s("task_struct"),
            KIND_STRUCT,
            4,
            false,
            32,
            &[s("pid"), 1, 0, 0, 7, 32, s("se"), 6, 64, s("comm"), 5, 128],
        ); // 8
        rec(s("bpf_iter_task"), KIND_FUNC, 0, false, 0, &[]); // 9
        let mut b = Vec::new();
        for w in [0xeb9fu16.to_ne_bytes()[..].to_vec(), vec![1, 0]] {
            b.extend(w);
        }
        for w in [
            24u32,
            0,
            t.len() as u32,
            t.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        b.extend(t);
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn finds_fields_through_anonymous_unions_typedefs_and_nested_structs() {
        let b = blob();
        let btf = Btf::parse(&b).unwrap();
        assert_eq!(
            btf.field("task_struct", "pid").unwrap(),
            Field { offset: 0, size: 4 }
        );
        assert_eq!(
            btf.field("task_struct", "tgid").unwrap(),
            Field { offset: 4, size: 4 }
        );
        assert_eq!(
            btf.field("task_struct", "se.sum").unwrap(),
            Field { offset: 8, size: 8 }
        );
        assert_eq!(
            btf.field("task_struct", "comm").unwrap(),
            Field {
                offset: 16,
                size: 16
            }
        );
        assert_eq!(btf.func("bpf_iter_task").unwrap(), 9);
        assert!(matches!(
            btf.field("task_struct", "nope"),
            Err(BtfError::Missing(_))
        ));
        assert!(matches!(
            btf.field("mm_struct", "pid"),
            Err(BtfError::Missing(_))
        ));
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error_not_a_panic() {
        let b = blob();
        for n in 0..b.len() {
            let _ = Btf::parse(&b[..n]);
        }
        for i in 0..b.len() {
            for x in [0u8, 0xff, 0x80, 1] {
                let mut c = b.clone();
                c[i] = x;
                if let Ok(btf) = Btf::parse(&c) {
                    let _ = btf.field("task_struct", "se.sum");
                    let _ = btf.field("task_struct", "comm");
                    let _ = btf.func("bpf_iter_task");
                }
            }
        }
    }

    /// The running kernel's own BTF, where there is one.
    #[test]
    fn reads_the_running_kernels_task_struct() {
        let Ok(blob) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("skipped: no /sys/kernel/btf/vmlinux on this kernel");
            return;
        };
        let btf = Btf::parse(&blob).unwrap();
        let pid = btf.field("task_struct", "pid").unwrap();
        let tgid = btf.field("task_struct", "tgid").unwrap();
        assert_eq!((pid.size, tgid.size), (4, 4));
        assert_eq!(tgid.offset, pid.offset + 4, "pid and tgid sit side by side");
        assert_eq!(btf.field("task_struct", "comm").unwrap().size, 16);
        assert_eq!(
            btf.field("task_struct", "se.sum_exec_runtime")
                .unwrap()
                .size,
            8
        );
        assert!(btf.func("bpf_iter_task").is_ok());
    }
}
