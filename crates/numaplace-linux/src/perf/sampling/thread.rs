//! One thread's sampling event and ring buffer: the attributes tried in
//! order until the kernel takes one, the event opened on the thread, its
//! records drained; why an open failed, in words.

use super::*;

/// How the event is opened, as found when probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OpenAttrs {
    pub(super) precise_ip: u8,
    /// User space only; false where the PMU cannot exclude (IBS).
    pub(super) exclude_kernel: bool,
}

/// Which step of opening failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Open,
    Map,
}

#[derive(Debug)]
pub(super) struct OpenFailure {
    pub(super) stage: Stage,
    /// What was being opened (`mem-loads-aux` or the event).
    pub(super) what: String,
    pub(super) err: io::Error,
}

/// One thread's sampling event and ring buffer.
pub(super) struct ThreadSampler {
    pub(super) sampler: Sampler,
    /// `mem-loads-aux`, kept open as the group leader.
    pub(super) _leader: Option<perf_event::Counter>,
}

pub(super) fn skid(precise_ip: u8) -> SampleSkid {
    match precise_ip {
        0 => SampleSkid::Arbitrary,
        1 => SampleSkid::Constant,
        2 => SampleSkid::RequestZero,
        _ => SampleSkid::RequireZero,
    }
}

pub(super) fn raw_builder(ev: &RawEvent) -> Builder<'static> {
    let mut b = Builder::new(Raw::new(ev.config).config1(ev.config1).config2(ev.config2));
    b.attrs_mut().type_ = ev.pmu_type;
    b
}

pub(super) fn exclusions(b: &mut Builder<'_>, tid: i32, attrs: OpenAttrs) {
    if tid != 0 {
        b.observe_pid(tid);
    }
    b.exclude_kernel(attrs.exclude_kernel);
    b.exclude_hv(attrs.exclude_kernel);
}

impl ThreadSampler {
    /// Opens `ev` on `tid` (0: this thread), maps its ring buffer of
    /// `ring_bytes` and enables it.
    pub(super) fn open(
        tid: i32,
        ev: &SampleEvent,
        attrs: OpenAttrs,
        rate: SampleRate,
        ring_bytes: usize,
    ) -> Result<Self, OpenFailure> {
        let fail = |stage, what: &str, err| OpenFailure {
            stage,
            what: what.to_owned(),
            err,
        };
        let mut leader = match &ev.aux {
            Some(aux) => {
                let mut b = raw_builder(aux);
                exclusions(&mut b, tid, attrs);
                Some(b.build().map_err(|e| fail(Stage::Open, &aux.what, e))?)
            }
            None => None,
        };
        let mut b = match &ev.event {
            Some(raw) => raw_builder(raw),
            None => Builder::new(Software::PAGE_FAULTS),
        };
        exclusions(&mut b, tid, attrs);
        b.sample(ev.source.sample_flags());
        b.precise_ip(skid(attrs.precise_ip));
        match rate {
            SampleRate::Frequency(hz) => b.sample_frequency(hz.max(1)),
            SampleRate::Period(n) => b.sample_period(n.max(1)),
        };
        let counter = match &mut leader {
            Some(l) => b.build_with_group(l),
            None => b.build(),
        }
        .map_err(|e| fail(Stage::Open, &ev.what, e))?;
        let mut sampler = counter
            .sampled(ring_bytes)
            .map_err(|e| fail(Stage::Map, &ev.what, e))?;
        match &mut leader {
            Some(l) => l.enable_group(),
            None => sampler.enable(),
        }
        .map_err(|e| fail(Stage::Open, &ev.what, e))?;
        Ok(ThreadSampler {
            sampler,
            _leader: leader,
        })
    }

    pub(super) fn fds(&self) -> usize {
        1 + usize::from(self._leader.is_some())
    }

    /// Whether the sampled thread has exited: a sampling event's fd polls
    /// `POLLHUP` once its task is gone (Linux 3.18 on), which also holds
    /// when the tid has been reused since.
    pub(super) fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.sampler.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; timeout 0 does not block.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents & libc::POLLHUP != 0
    }

    /// Reads every record in the ring buffer into `out` (raw samples) and
    /// `stats`.
    pub(super) fn drain(
        &mut self,
        flags: u64,
        out: &mut Vec<ParsedSample>,
        stats: &mut SampleRound,
    ) {
        while let Some(rec) = self.sampler.next_record() {
            match rec.ty() {
                PERF_RECORD_SAMPLE => {
                    let body = rec.to_contiguous();
                    match parse_sample(flags, &body) {
                        Some(s) => out.push(s),
                        None => stats.malformed += 1,
                    }
                }
                PERF_RECORD_LOST => {
                    let body = rec.to_contiguous();
                    stats.lost += read_u64(&body, 8).unwrap_or(0);
                }
                PERF_RECORD_THROTTLE => stats.throttled += 1,
                _ => {}
            }
        }
    }
}

/// Why opening the sampling event failed, in words to act on.
pub(super) fn failure_reason(ev: &SampleEvent, f: &OpenFailure, host: &HostFacts) -> String {
    let says = format!("perf_event_open({}) says {}", f.what, errno_name(&f.err));
    let code = f.err.raw_os_error();
    if f.stage == Stage::Map {
        return match code {
            Some(libc::EPERM) => format!(
                "mapping the sample buffer of {} says EPERM: the locked memory perf buffers may \
                 use (kernel.perf_event_mlock_kb, RLIMIT_MEMLOCK) is used up: run as root \
                 (CAP_IPC_LOCK) or raise kernel.perf_event_mlock_kb",
                ev.what
            ),
            _ => format!("mapping the sample buffer of {} failed: {}", ev.what, f.err),
        };
    }
    match (ev.source, code) {
        (SampleSource::IbsOp, Some(libc::EINVAL)) => format!(
            "no per-thread IBS here: {says}: this kernel's IBS samples per CPU only (per-thread \
             IBS needs Linux 6.2 or later)"
        ),
        (SampleSource::PebsLoads, Some(libc::EOPNOTSUPP | libc::ENOENT | libc::EINVAL))
            if has_core_pmu(host) =>
        {
            format!(
                "no PEBS here: {says} with precise_ip 1 to 3: this PMU cannot sample loads \
                 precisely{}",
                if host.hypervisor {
                    " (a VM without PEBS virtualisation)"
                } else {
                    ""
                }
            )
        }
        (SampleSource::PebsLoads, Some(libc::ENODATA)) => format!(
            "no PEBS here: {says}: this CPU needs the mem-loads-aux event as group leader, and \
             sysfs does not describe it"
        ),
        (source, _) => {
            let hardware = source != SampleSource::PageFaults;
            let r = open_failure_reason(&f.what, hardware, &f.err, host);
            match r.strip_prefix("no hardware PMU: ") {
                Some(rest) => format!("no PEBS/IBS here: this CPU's PMU is not exposed: {rest}"),
                None => r,
            }
        }
    }
}

/// The ways to open `source`, best first.
pub(super) fn candidates(source: SampleSource) -> &'static [OpenAttrs] {
    const PEBS: [OpenAttrs; 3] = [
        OpenAttrs {
            precise_ip: 3,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 2,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 1,
            exclude_kernel: true,
        },
    ];
    const IBS: [OpenAttrs; 2] = [
        OpenAttrs {
            precise_ip: 0,
            exclude_kernel: true,
        },
        OpenAttrs {
            precise_ip: 0,
            exclude_kernel: false,
        },
    ];
    const SOFTWARE: [OpenAttrs; 1] = [OpenAttrs {
        precise_ip: 0,
        exclude_kernel: true,
    }];
    match source {
        SampleSource::PebsLoads => &PEBS,
        SampleSource::IbsOp => &IBS,
        SampleSource::PageFaults => &SOFTWARE,
    }
}

/// Opens `ev` on this thread the ways it may be opened; the first that
/// works, or why none does.
pub(super) fn probe(
    ev: &SampleEvent,
    rate: SampleRate,
    ring_bytes: usize,
    host: &HostFacts,
) -> Result<OpenAttrs, String> {
    let mut last = None;
    for &attrs in candidates(ev.source) {
        match ThreadSampler::open(0, ev, attrs, rate, ring_bytes) {
            Ok(_) => return Ok(attrs),
            Err(f) => {
                // Only a refused attribute is worth another try.
                let retry = f.stage == Stage::Open
                    && matches!(f.err.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP));
                last = Some(f);
                if !retry {
                    break;
                }
            }
        }
    }
    let f = last.expect("every source has a way to open it");
    Err(failure_reason(ev, &f, host))
}
