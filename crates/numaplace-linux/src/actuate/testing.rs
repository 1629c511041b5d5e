//! Live threads and processes for this crate's tests (the actuators'
//! and the state file's).

use std::sync::mpsc;
use std::thread::JoinHandle;

use numaplace_model::{CpuSet, TaskId};

use crate::procfs::ProcReader;
use crate::sysroot::SysRoot;

/// The identity of a live thread of a process.
pub(crate) fn task_id(tgid: i32, tid: i32) -> TaskId {
    let stat = ProcReader::new(SysRoot::host()).stat(tgid, tid).unwrap();
    TaskId {
        tid,
        start_time: stat.start_time,
    }
}

pub(crate) fn pid() -> i32 {
    std::process::id() as i32
}

/// The CPUs this test process may use.
pub(crate) fn allowed() -> CpuSet {
    // SAFETY: a zeroed cpu_set_t is valid; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(r, 0);
    (0..libc::CPU_SETSIZE as u32)
        // SAFETY: in range of the set.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect()
}

enum Cmd {
    PinSelf(u32),
    Exit,
}

/// A thread of this process that waits to be told what to do.
pub(crate) struct Parked {
    pub id: TaskId,
    cmd: mpsc::Sender<Cmd>,
    done: mpsc::Receiver<()>,
    handle: Option<JoinHandle<()>>,
}

impl Parked {
    pub(crate) fn spawn() -> Parked {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (cmd, cmd_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            tid_tx.send(tid).unwrap();
            while let Ok(c) = cmd_rx.recv() {
                match c {
                    Cmd::PinSelf(cpu) => {
                        // SAFETY: a zeroed cpu_set_t is valid.
                        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                        // SAFETY: cpu is below CPU_SETSIZE in tests.
                        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
                        // SAFETY: a valid cpu_set_t of the size given.
                        let r = unsafe {
                            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
                        };
                        assert_eq!(r, 0);
                        done_tx.send(()).unwrap();
                    }
                    Cmd::Exit => break,
                }
            }
        });
        let tid = tid_rx.recv().unwrap();
        Parked {
            id: task_id(pid(), tid),
            cmd,
            done,
            handle: Some(handle),
        }
    }

    /// The thread sets its own affinity to one CPU.
    pub(crate) fn pin_self(&self, cpu: u32) {
        self.cmd.send(Cmd::PinSelf(cpu)).unwrap();
        self.done.recv().unwrap();
    }

    /// Ends the thread and waits until it is gone.
    pub(crate) fn exit(mut self) -> TaskId {
        self.stop();
        self.id
    }

    fn stop(&mut self) {
        let _ = self.cmd.send(Cmd::Exit);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.stop();
    }
}
