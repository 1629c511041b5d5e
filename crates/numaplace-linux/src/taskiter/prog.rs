//! The iterator's BPF program, assembled here from the field offsets the
//! running kernel's BTF gives (no compiler, no CO-RE relocations: the
//! offsets are this kernel's, found at load time).
//!
//! For each task the kernel's task iterator visits, the program copies a
//! fixed-size record of the task's fields onto its stack and writes it to
//! the iterator's `seq_file` with `bpf_seq_write`; for the end-of-walk
//! call (`ctx->task == NULL`) it writes nothing. Loads from `task` are
//! the verifier's BTF-checked loads (`PTR_TO_BTF_ID`), the same as a C
//! program's `task->pid`.
//!
//! Instruction encodings: the kernel's `Documentation/bpf/standardization/
//! instruction-set.rst` (opcode = operation | source | class; registers in
//! one byte, destination in the low nibble).

use super::btf::{Btf, BtfError, Field};

/// One `struct bpf_insn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(super) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const CLASS_LDX: u8 = 0x01;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_MEM: u8 = 0x60;
const SRC_X: u8 = 0x08;
const OP_ADD: u8 = 0x00;
const OP_MOV: u8 = 0xb0;
const OP_JEQ: u8 = 0x10;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;

/// `BPF_FUNC_seq_write` (include/uapi/linux/bpf.h).
const HELPER_SEQ_WRITE: i32 = 127;

const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R6: u8 = 6;
const R7: u8 = 7;
const R10: u8 = 10;

fn size_bits(size: u32) -> u8 {
    match size {
        4 => 0x00,
        2 => 0x08,
        1 => 0x10,
        8 => 0x18,
        _ => unreachable!("checked by the layout"),
    }
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

fn ldx(size: u32, dst: u8, src: u8, off: i16) -> Insn {
    insn(CLASS_LDX | MODE_MEM | size_bits(size), dst, src, off, 0)
}

fn stx(size: u32, dst: u8, src: u8, off: i16) -> Insn {
    insn(CLASS_STX | MODE_MEM | size_bits(size), dst, src, off, 0)
}

fn mov_reg(dst: u8, src: u8) -> Insn {
    insn(CLASS_ALU64 | OP_MOV | SRC_X, dst, src, 0, 0)
}

fn mov_imm(dst: u8, imm: i32) -> Insn {
    insn(CLASS_ALU64 | OP_MOV, dst, 0, 0, imm)
}

fn add_imm(dst: u8, imm: i32) -> Insn {
    insn(CLASS_ALU64 | OP_ADD, dst, 0, 0, imm)
}

/// A record's slots, in order: (name, the `task_struct` field path or
/// paths tried in order, bytes kept in the record).
pub(super) const SLOTS: &[(&str, &[&str], u32)] = &[
    ("tid", &["pid"], 4),
    ("tgid", &["tgid"], 4),
    // Linux 5.5 renamed real_start_time.
    ("start_boottime", &["start_boottime", "real_start_time"], 8),
    ("utime", &["utime"], 8),
    ("stime", &["stime"], 8),
    ("sum_exec_runtime", &["se.sum_exec_runtime"], 8),
    ("prev_utime", &["prev_cputime.utime"], 8),
    ("prev_stime", &["prev_cputime.stime"], 8),
    ("min_flt", &["min_flt"], 8),
    ("maj_flt", &["maj_flt"], 8),
    // Linux 5.14 renamed state (a long) to __state (an unsigned int).
    ("state", &["__state", "state"], 4),
    ("exit_state", &["exit_state"], 4),
    // task_cpu(): in thread_info where the architecture keeps it there
    // (x86 since 5.16), else in task_struct.
    ("cpu", &["thread_info.cpu", "cpu"], 4),
    ("flags", &["flags"], 4),
    // Counts the task's execs (u32 before Linux 5.7): with the start
    // time, the program it runs.
    ("exec_id", &["self_exec_id"], 8),
    ("comm", &["comm"], 16),
];

/// Slots a kernel may lack: the record then holds zeros there.
const OPTIONAL: &[&str] = &["prev_utime", "prev_stime", "exec_id"];

/// The most words of a task's allowed CPUs a record holds (1,024 CPUs);
/// on a machine with more, the collector asks `sched_getaffinity`.
pub(super) const MAX_CPU_WORDS: u32 = 16;

/// Where each slot's field is in this kernel's `task_struct`, and where
/// it goes in the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// Per slot: the field (`None` for an optional one this kernel lacks)
    /// and the slot's offset in the record.
    pub fields: Vec<(Option<Field>, u32)>,
    /// The task's allowed CPUs (`task_struct.cpus_mask`, what
    /// `sched_getaffinity` reads): its first words, where in the record.
    pub cpus: Option<CpuWords>,
    /// The first word of the task's memory nodes (`mems_allowed`, its
    /// cpuset's nodes: what `Mems_allowed_list` shows) where every node
    /// id is below 64: (offset in `task_struct`, slot).
    pub mems: Option<(u32, u32)>,
    /// The id of the task's cgroup in the unified hierarchy (its
    /// directory's inode number: `task->cgroups->dfl_cgrp->kn->id`),
    /// which changes when it is moved: the three pointers' offsets, the
    /// id's offset in `kernfs_node`, and the slot.
    pub cgroup: Option<([u32; 3], u32, u32)>,
    pub record_size: u32,
}

/// The first `words` 64-bit words of `cpus_mask` at `offset` in
/// `task_struct`, copied to `slot` in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CpuWords {
    pub offset: u32,
    pub words: u32,
    pub slot: u32,
}

impl Layout {
    /// The layout for this kernel, with the first `cpu_words` words of each
    /// task's allowed CPUs where that is at most [`MAX_CPU_WORDS`] and the
    /// kernel's mask has them (Linux 5.3+: `cpus_mask`).
    pub(super) fn from_btf(btf: &Btf, cpu_words: u32, node_words: u32) -> Result<Layout, BtfError> {
        let mut fields = Vec::new();
        let mut at = 0u32;
        for &(name, paths, keep) in SLOTS {
            let found = paths.iter().find_map(|p| btf.field("task_struct", p).ok());
            let field = match found {
                Some(f)
                    if f.size == keep
                        || (keep == 4 && f.size == 8 && name == "state")
                        || (keep == 8 && f.size == 4 && name == "exec_id") =>
                {
                    Some(f)
                }
                Some(f) => {
                    return Err(BtfError::Missing(format!(
                        "task_struct.{} of {} bytes (numaplace reads {keep})",
                        paths[0], f.size
                    )));
                }
                None if OPTIONAL.contains(&name) => None,
                None => {
                    return Err(BtfError::Missing(format!("field task_struct.{}", paths[0])));
                }
            };
            // Slots of 8 bytes and more are 8-aligned.
            if keep >= 8 {
                at = at.next_multiple_of(8);
            }
            fields.push((field, at));
            at += keep;
        }
        let cpus = match btf.field("task_struct", "cpus_mask") {
            Ok(f) if (1..=MAX_CPU_WORDS).contains(&cpu_words) && f.size >= 8 * cpu_words => {
                at = at.next_multiple_of(8);
                let slot = at;
                at += 8 * cpu_words;
                Some(CpuWords {
                    offset: f.offset,
                    words: cpu_words,
                    slot,
                })
            }
            _ => None,
        };
        let mems = match btf.field("task_struct", "mems_allowed") {
            Ok(f) if node_words == 1 && f.size >= 8 => {
                at = at.next_multiple_of(8);
                at += 8;
                Some((f.offset, at - 8))
            }
            _ => None,
        };
        let chain = [
            btf.field("task_struct", "cgroups"),
            btf.field("css_set", "dfl_cgrp"),
            btf.field("cgroup", "kn"),
            btf.field("kernfs_node", "id"),
        ];
        let cgroup = match chain {
            [Ok(a), Ok(b), Ok(c), Ok(id)] if [a.size, b.size, c.size, id.size] == [8; 4] => {
                at = at.next_multiple_of(8);
                at += 8;
                Some(([a.offset, b.offset, c.offset], id.offset, at - 8))
            }
            _ => None,
        };
        Ok(Layout {
            fields,
            cpus,
            mems,
            cgroup,
            record_size: at.next_multiple_of(8),
        })
    }

    /// The slot's offset in a record.
    pub(super) fn slot(&self, name: &str) -> Option<u32> {
        let i = SLOTS.iter().position(|s| s.0 == name)?;
        Some(self.fields[i].1)
    }

    /// The program: `ctx` in r1 is `struct bpf_iter__task { meta; task; }`.
    pub(super) fn program(&self) -> Vec<Insn> {
        let rec = -(self.record_size as i16);
        let mut p = vec![
            mov_reg(R6, R1),
            ldx(8, R7, R6, 8), // r7 = ctx->task
        ];
        let skip_at = p.len();
        p.push(insn(CLASS_JMP | OP_JEQ, R7, 0, 0, 0)); // if task == NULL, exit
        for (&(_, _, keep), &(field, at)) in SLOTS.iter().zip(&self.fields) {
            let slot = rec + at as i16;
            match field {
                // Wide slots (comm) go over in 8-byte words.
                Some(f) if keep > 8 => {
                    for w in (0..keep).step_by(8) {
                        p.push(ldx(8, R1, R7, (f.offset + w) as i16));
                        p.push(stx(8, R10, R1, slot + w as i16));
                    }
                }
                Some(f) => {
                    p.push(ldx(f.size, R1, R7, f.offset as i16));
                    p.push(stx(keep, R10, R1, slot));
                }
                None => {
                    p.push(mov_imm(R1, 0));
                    p.push(stx(keep, R10, R1, slot));
                }
            }
        }
        // Padding at the end of the record, so the helper reads only
        // initialised stack.
        let end_of_comm = self
            .fields
            .last()
            .map_or(0, |&(_, at)| at + SLOTS.last().unwrap().2);
        let mut pads: Vec<u32> = (end_of_comm..self.record_size).collect();
        if let Some(c) = self.cpus {
            for w in 0..c.words {
                p.push(ldx(8, R1, R7, (c.offset + 8 * w) as i16));
                p.push(stx(8, R10, R1, rec + (c.slot + 8 * w) as i16));
            }
            pads.retain(|&b| b < c.slot || b >= c.slot + 8 * c.words);
        }
        if let Some((offset, slot)) = self.mems {
            p.push(ldx(8, R1, R7, offset as i16));
            p.push(stx(8, R10, R1, rec + slot as i16));
            pads.retain(|&b| b < slot || b >= slot + 8);
        }
        if let Some(([a, b, c], id, slot)) = self.cgroup {
            // Each load from a BTF pointer is checked by the verifier
            // against the pointee's type; a NULL one reads as 0.
            p.push(ldx(8, R2, R7, a as i16));
            p.push(ldx(8, R2, R2, b as i16));
            p.push(ldx(8, R2, R2, c as i16));
            p.push(ldx(8, R1, R2, id as i16));
            p.push(stx(8, R10, R1, rec + slot as i16));
            pads.retain(|&b| b < slot || b >= slot + 8);
        }
        for pad in pads {
            p.push(mov_imm(R1, 0));
            p.push(stx(1, R10, R1, rec + pad as i16));
        }
        p.extend([
            ldx(8, R1, R6, 0), // ctx->meta
            ldx(8, R1, R1, 0), // meta->seq
            mov_reg(R2, R10),
            add_imm(R2, rec as i32),
            mov_imm(R3, self.record_size as i32),
            insn(CLASS_JMP | OP_CALL, 0, 0, 0, HELPER_SEQ_WRITE),
        ]);
        let exit_at = p.len();
        p.extend([mov_imm(R0, 0), insn(CLASS_JMP | OP_EXIT, 0, 0, 0, 0)]);
        p[skip_at].off = (exit_at - skip_at - 1) as i16;
        p
    }

    /// Checks the fields fit the program's encodings: offsets within an
    /// instruction's 16-bit displacement, sizes the loads can take.
    pub(super) fn check(&self) -> Result<(), BtfError> {
        for (&(name, paths, keep), &(field, _)) in SLOTS.iter().zip(&self.fields) {
            if let Some(f) = field {
                let widths_ok = if keep > 8 {
                    f.size == keep && keep % 8 == 0
                } else {
                    matches!(f.size, 1 | 2 | 4 | 8)
                };
                if f.offset + f.size > i16::MAX as u32 || !widths_ok {
                    return Err(BtfError::Missing(format!(
                        "task_struct.{} ({name}) where numaplace can read it (offset {}, {} bytes)",
                        paths[0], f.offset, f.size
                    )));
                }
            }
        }
        if let Some(c) = self.cpus {
            if c.offset + 8 * c.words > i16::MAX as u32 {
                return Err(BtfError::Missing(format!(
                    "task_struct.cpus_mask where numaplace can read it (offset {})",
                    c.offset
                )));
            }
        }
        let far = |o: u32| o + 8 > i16::MAX as u32;
        if self.mems.is_some_and(|(o, _)| far(o))
            || self
                .cgroup
                .is_some_and(|(chain, id, _)| chain.iter().any(|&o| far(o)) || far(id))
        {
            return Err(BtfError::Missing(
                "mems_allowed or the cgroup's id where numaplace can read them".into(),
            ));
        }
        if self.record_size > 256 {
            return Err(BtfError::Missing("a record that fits the BPF stack".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let fields = SLOTS
            .iter()
            .scan(0u32, |at, &(_, _, keep)| {
                if keep >= 8 {
                    *at = at.next_multiple_of(8);
                }
                let here = *at;
                *at += keep;
                Some((
                    Some(Field {
                        offset: 100 + here,
                        size: keep,
                    }),
                    here,
                ))
            })
            .collect::<Vec<_>>();
        let end = fields.last().unwrap().1 + 16;
        let slot = end.next_multiple_of(8);
        Layout {
            fields,
            cpus: Some(CpuWords {
                offset: 900,
                words: 2,
                slot,
            }),
            mems: Some((1000, slot + 16)),
            cgroup: Some(([1100, 16, 24], 32, slot + 24)),
            record_size: slot + 32,
        }
    }

    #[test]
    fn the_program_writes_every_byte_of_the_record_then_calls_seq_write() {
        let l = layout();
        l.check().unwrap();
        let p = l.program();
        let rec = -(l.record_size as i32);
        let mut written = vec![false; l.record_size as usize];
        for i in &p {
            if i.code & 0x07 == CLASS_STX && i.regs & 0x0f == R10 {
                let size = match i.code & 0x18 {
                    0x18 => 8,
                    0x00 => 4,
                    0x08 => 2,
                    _ => 1,
                };
                let start = (i.off as i32 - rec) as usize;
                for b in &mut written[start..start + size] {
                    *b = true;
                }
            }
        }
        assert!(
            written.iter().all(|&w| w),
            "every byte of the record is written"
        );
        let call = p.iter().position(|i| i.code == 0x85).unwrap();
        assert_eq!(p[call].imm, HELPER_SEQ_WRITE);
        assert_eq!(p[call - 1], mov_imm(R3, l.record_size as i32));
        // The NULL check jumps to `r0 = 0; exit`.
        let skip = &p[2];
        assert_eq!(skip.code, 0x15);
        assert_eq!(p[3 + skip.off as usize], mov_imm(R0, 0));
        assert_eq!(p.last().unwrap().code, 0x95);
    }

    #[test]
    fn offsets_beyond_a_displacement_are_refused() {
        let mut l = layout();
        l.fields[0].0 = Some(Field {
            offset: 40_000,
            size: 4,
        });
        assert!(l.check().is_err());
    }
}
