//! libpfm4, loaded at run time: the encodings of model-specific events for
//! the CPU it detects (or the one named by `LIBPFM_FORCE_PMU`, which it
//! reads once, in `pfm_initialize`).
//!
//! The library is opened with `dlopen("libpfm.so.4")` rather than linked,
//! so the daemon still starts on a machine without it; the counters that
//! needed it then say so ([`LIBPFM_MISSING`]). Four calls are used:
//! `pfm_initialize`, `pfm_strerror`, `pfm_get_pmu_info` (which core PMU is
//! present) and `pfm_get_os_event_encoding` with `PFM_OS_PERF_EVENT_EXT`
//! (an event string to a `perf_event_attr`). The struct layouts below are
//! those of libpfm 4.13's `include/perfmon/pfmlib.h` and
//! `pfmlib_perf_event.h` (Debian `libpfm4-dev` 4.13.0; `size` fields set to
//! `sizeof`, as the API requires: the library checks them against its ABI
//! sizes, `PFM_PMU_INFO_ABI0` = 56 and `PFM_PERF_ENCODE_ABI0` = 40 on
//! 64-bit).
//!
//! [`EventEncoder`] is what the resolvers ask; [`host_encoder`] gives the
//! process's libpfm4 (loaded and initialised once) or why there is none.
//! Tests give their own encoder.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

use perf_event_open_sys::bindings::perf_event_attr;

/// What a counter that needed libpfm4 says where the library is absent.
pub const LIBPFM_MISSING: &str =
    "libpfm4 not found: install Debian's libpfm4 for model-specific events";

/// The shared object opened (Debian's `libpfm4` package, soname 4).
pub const LIBPFM_SONAME: &str = "libpfm.so.4";

// pfmlib.h 4.13: error code, privilege level and enum values used here.
const PFM_SUCCESS: c_int = 0;
/// `PFM_PLM3`: count at user level. Only for libpfm's canonical string:
/// numaplace sets `exclude_kernel` itself when it opens the event.
const PFM_PLM3: c_int = 0x08;
/// `pfm_os_t`: `PFM_OS_NONE` = 0, `PFM_OS_PERF_EVENT` = 1,
/// `PFM_OS_PERF_EVENT_EXT` = 2.
const PFM_OS_PERF_EVENT_EXT: c_int = 2;
/// `pfm_pmu_type_t`: `PFM_PMU_TYPE_CORE` = 1.
const PFM_PMU_TYPE_CORE: c_int = 1;
/// PMU ids are tried below this bound. 4.13's `PFM_PMU_MAX` is 517; later
/// versions add ids, and ids beyond the library's own maximum only return
/// `PFM_ERR_INVAL` (`pfm_get_pmu_info` checks the range).
const PMU_ID_BOUND: c_int = 2048;

/// `pfm_pmu_info_t` (pfmlib.h 4.13): 56 bytes on 64-bit.
#[repr(C)]
struct PfmPmuInfo {
    name: *const c_char,
    desc: *const c_char,
    size: usize,
    pmu: c_int,
    type_: c_int,
    nevents: c_int,
    first_event: c_int,
    max_encoding: c_int,
    num_cntrs: c_int,
    num_fixed_cntrs: c_int,
    /// Bit 0 `is_present`, bit 1 `is_dfl` (GCC allocates bit-fields from
    /// the least significant bit on x86-64 and aarch64).
    flags: u32,
}

/// `pfm_perf_encode_arg_t` (pfmlib_perf_event.h 4.13): 40 bytes on 64-bit.
#[repr(C)]
struct PfmPerfEncodeArg {
    attr: *mut perf_event_attr,
    fstr: *mut *mut c_char,
    size: usize,
    idx: c_int,
    cpu: c_int,
    flags: c_int,
    pad0: c_int,
}

const _: () = assert!(size_of::<PfmPmuInfo>() == 56);
const _: () = assert!(size_of::<PfmPerfEncodeArg>() == 40);

type InitializeFn = unsafe extern "C" fn() -> c_int;
type StrerrorFn = unsafe extern "C" fn(c_int) -> *const c_char;
type GetPmuInfoFn = unsafe extern "C" fn(c_int, *mut PfmPmuInfo) -> c_int;
type GetOsEventEncodingFn = unsafe extern "C" fn(*const c_char, c_int, c_int, *mut c_void) -> c_int;

/// An event as libpfm4 encodes it for `perf_event_open`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PfmEncoding {
    /// `perf_event_attr.type` (`PERF_TYPE_RAW` for core events).
    pub pmu_type: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1`.
    pub config1: u64,
    /// `perf_event_attr.config2`.
    pub config2: u64,
    /// libpfm's fully qualified name, shortened by [`short_fstr`]:
    /// `skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1`.
    pub name: String,
}

/// Who encodes model-specific events: libpfm4, or a stand-in in tests.
pub trait EventEncoder: Send + Sync {
    /// libpfm4's name of the core PMU of this CPU (`skx`,
    /// `amd64_fam19h_zen3`), or why there is none.
    fn core_pmu(&self) -> Result<String, String>;
    /// Encodes `event` (`pmu::EVENT:UMASK:mod=val`).
    fn encode(&self, event: &str) -> Result<PfmEncoding, String>;
}

/// No encoder: every question is answered with `why`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoEncoder(pub String);

impl EventEncoder for NoEncoder {
    fn core_pmu(&self) -> Result<String, String> {
        Err(self.0.clone())
    }
    fn encode(&self, _event: &str) -> Result<PfmEncoding, String> {
        Err(self.0.clone())
    }
}

/// libpfm4, opened and initialised.
pub struct Libpfm {
    strerror: StrerrorFn,
    get_os_event_encoding: GetOsEventEncodingFn,
    /// Present core PMUs (`is_present`, `PFM_PMU_TYPE_CORE`), in id order.
    core_pmus: Vec<String>,
    /// libpfm documents no thread safety for its encoder: one call at a time.
    lock: Mutex<()>,
}

impl std::fmt::Debug for Libpfm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Libpfm")
            .field("core_pmus", &self.core_pmus)
            .finish()
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by the
    // C library, valid until the next dl* call on this thread; it is copied
    // at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "unknown dlopen error".into();
    }
    // SAFETY: non-NULL, NUL-terminated (dlerror's contract).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Looks up `name` in the library behind `handle`.
fn symbol(handle: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: handle comes from a successful dlopen and is never closed;
    // name is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "{LIBPFM_SONAME} has no {}: {}",
            name.to_string_lossy(),
            dlerror()
        ));
    }
    Ok(p)
}

impl Libpfm {
    /// Opens and initialises libpfm4. Call once per process (see
    /// [`host_encoder`]): `pfm_initialize` reads `LIBPFM_FORCE_PMU` then.
    fn load() -> Result<Libpfm, String> {
        let soname = CString::new(LIBPFM_SONAME).expect("no NUL in the soname");
        // SAFETY: dlopen with a NUL-terminated name; libpfm's constructors
        // only set up static tables. The handle is kept open for the life of
        // the process (the function pointers below point into it).
        let handle = unsafe { libc::dlopen(soname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!(
                "{LIBPFM_MISSING} (dlopen {LIBPFM_SONAME}: {})",
                dlerror()
            ));
        }
        let init = symbol(handle, c"pfm_initialize")?;
        let strerror = symbol(handle, c"pfm_strerror")?;
        let pmu_info = symbol(handle, c"pfm_get_pmu_info")?;
        let encode = symbol(handle, c"pfm_get_os_event_encoding")?;
        // SAFETY: each pointer is the symbol of that name in libpfm 4.x,
        // whose C prototypes (pfmlib.h) are the function types here:
        // `pfm_err_t pfm_initialize(void)`, `const char *pfm_strerror(int)`,
        // `pfm_err_t pfm_get_pmu_info(pfm_pmu_t, pfm_pmu_info_t *)`,
        // `pfm_err_t pfm_get_os_event_encoding(const char *, int, pfm_os_t,
        // void *)` (enums and pfm_err_t are int).
        let (init, strerror, pmu_info, encode) = unsafe {
            (
                std::mem::transmute::<*mut c_void, InitializeFn>(init),
                std::mem::transmute::<*mut c_void, StrerrorFn>(strerror),
                std::mem::transmute::<*mut c_void, GetPmuInfoFn>(pmu_info),
                std::mem::transmute::<*mut c_void, GetOsEventEncodingFn>(encode),
            )
        };
        // SAFETY: no arguments; the library serialises nothing else yet, and
        // this runs once per process (host_encoder's OnceLock).
        let rc = unsafe { init() };
        if rc != PFM_SUCCESS {
            return Err(format!(
                "libpfm4 did not initialise: {} (check LIBPFM_FORCE_PMU if set)",
                strerror_with(strerror, rc)
            ));
        }
        let mut core_pmus = Vec::new();
        for id in 0..PMU_ID_BOUND {
            // SAFETY: PfmPmuInfo is plain data (pointers and integers): all
            // zeroes is a valid value.
            let mut info: PfmPmuInfo = unsafe { std::mem::zeroed() };
            info.size = size_of::<PfmPmuInfo>();
            // SAFETY: info is a live, writable pfm_pmu_info_t with its size
            // set; ids the library does not know return an error.
            let rc = unsafe { pmu_info(id, &mut info) };
            if rc != PFM_SUCCESS || info.flags & 1 == 0 || info.type_ != PFM_PMU_TYPE_CORE {
                continue;
            }
            if !info.name.is_null() {
                // SAFETY: a present PMU's name is a static NUL-terminated
                // string of the library.
                let name = unsafe { CStr::from_ptr(info.name) };
                core_pmus.push(name.to_string_lossy().into_owned());
            }
        }
        Ok(Libpfm {
            strerror,
            get_os_event_encoding: encode,
            core_pmus,
            lock: Mutex::new(()),
        })
    }

    /// The present core PMUs, as libpfm4 names them.
    pub fn core_pmus(&self) -> &[String] {
        &self.core_pmus
    }
}

fn strerror_with(f: StrerrorFn, code: c_int) -> String {
    // SAFETY: pfm_strerror accepts any int and returns a static string (or
    // NULL for none).
    let p = unsafe { f(code) };
    if p.is_null() {
        return format!("libpfm error {code}");
    }
    // SAFETY: non-NULL, a static NUL-terminated string of the library.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl EventEncoder for Libpfm {
    fn core_pmu(&self) -> Result<String, String> {
        self.core_pmus.first().cloned().ok_or_else(|| {
            "libpfm4 knows no core PMU for this CPU (a VM without a virtual PMU, or a CPU newer \
             than this libpfm4; LIBPFM_FORCE_PMU=<pmu> names one)"
                .into()
        })
    }

    fn encode(&self, event: &str) -> Result<PfmEncoding, String> {
        let c_event =
            CString::new(event).map_err(|_| format!("event name {event:?} contains a NUL"))?;
        let mut attr = perf_event_attr::default();
        attr.size = size_of::<perf_event_attr>() as u32;
        let mut fstr: *mut c_char = std::ptr::null_mut();
        let mut arg = PfmPerfEncodeArg {
            attr: &mut attr,
            fstr: &mut fstr,
            size: size_of::<PfmPerfEncodeArg>(),
            idx: 0,
            cpu: 0,
            flags: 0,
            pad0: 0,
        };
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: c_event is NUL-terminated; arg is a live
        // pfm_perf_encode_arg_t with its size set, pointing at a live
        // perf_event_attr whose size field says how much libpfm may write
        // (it copies at most that much) and at a NULL fstr it may replace
        // with a malloc'd string.
        let rc = unsafe {
            (self.get_os_event_encoding)(
                c_event.as_ptr(),
                PFM_PLM3,
                PFM_OS_PERF_EVENT_EXT,
                (&mut arg as *mut PfmPerfEncodeArg).cast(),
            )
        };
        let name = if fstr.is_null() {
            event.to_owned()
        } else {
            // SAFETY: libpfm set fstr to a malloc'd NUL-terminated string;
            // it is copied, then freed once, here.
            let s = unsafe { CStr::from_ptr(fstr) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: fstr was allocated with malloc by libpfm and is not
            // used after this.
            unsafe { libc::free(fstr.cast()) };
            s
        };
        if rc != PFM_SUCCESS {
            return Err(format!(
                "libpfm4 cannot encode {event}: {}",
                strerror_with(self.strerror, rc)
            ));
        }
        Ok(PfmEncoding {
            pmu_type: attr.type_,
            config: attr.config,
            // SAFETY: reading a u64 from the unions that hold config1 and
            // config2 (every bit pattern is a valid u64).
            config1: unsafe { attr.__bindgen_anon_3.config1 },
            // SAFETY: as above.
            config2: unsafe { attr.__bindgen_anon_4.config2 },
            name: short_fstr(&name),
        })
    }
}

/// The process's libpfm4, loaded and initialised on first use; or, where
/// it cannot be loaded, an encoder that says why.
pub fn host_encoder() -> &'static dyn EventEncoder {
    static HOST: OnceLock<Box<dyn EventEncoder>> = OnceLock::new();
    HOST.get_or_init(|| match Libpfm::load() {
        Ok(lib) => {
            tracing::debug!(core_pmus = ?lib.core_pmus(), "libpfm4 loaded");
            Box::new(lib)
        }
        Err(why) => {
            tracing::debug!("{why}");
            Box::new(NoEncoder(why))
        }
    })
    .as_ref()
}

/// libpfm's fully qualified event string without the modifiers it spells
/// out at their defaults (`:e=0`, `:u=1`, `:k=0`, `:mh=1` ...): what is left
/// is what the event means. `skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:e=0:i=0:c=1:u=1:k=0`
/// gives `skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1`.
pub fn short_fstr(fstr: &str) -> String {
    // Privilege and host/guest modifiers: numaplace sets these itself.
    const PLACEMENT: [&str; 6] = ["u", "k", "h", "mg", "mh", "excl"];
    let mut kept: Vec<&str> = Vec::new();
    for (i, part) in fstr.split(':').enumerate() {
        // The first part is the PMU; `pmu::EVENT` leaves an empty part
        // between them, kept so the `::` comes back.
        let default = i > 0
            && part
                .split_once('=')
                .is_some_and(|(name, value)| value == "0" || PLACEMENT.contains(&name));
        if !default {
            kept.push(part);
        }
    }
    kept.join(":")
}

/// A stand-in for libpfm4 in tests: one core PMU, and the events it knows
/// with their `(config, config1)`.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct FakeEncoder {
    pub pmu: &'static str,
    pub events: Vec<(&'static str, u64, u64)>,
}

#[cfg(test)]
impl EventEncoder for FakeEncoder {
    fn core_pmu(&self) -> Result<String, String> {
        Ok(self.pmu.into())
    }
    fn encode(&self, event: &str) -> Result<PfmEncoding, String> {
        let (_, config, config1) = self
            .events
            .iter()
            .find(|(name, ..)| *name == event)
            .ok_or_else(|| format!("libpfm4 cannot encode {event}: event not found"))?;
        Ok(PfmEncoding {
            pmu_type: 4,
            config: *config,
            config1: *config1,
            config2: 0,
            name: event.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_fstr_keeps_what_the_event_means() {
        assert_eq!(
            short_fstr(
                "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:e=0:i=0:c=1:t=0:intx=0:\
                 intxcp=0:u=1:k=0:excl=0:mg=0:mh=1"
            ),
            "skx::OFFCORE_REQUESTS_OUTSTANDING:DEMAND_DATA_RD:c=1"
        );
        assert_eq!(
            short_fstr(
                "icx::MEM_TRANS_RETIRED:LOAD_LATENCY:e=0:i=0:c=0:ldlat=30:intx=0:intxcp=0:u=1:\
                 k=0:precise=0:excl=0:mg=0:mh=1"
            ),
            "icx::MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=30"
        );
        assert_eq!(short_fstr("perf::CYCLES"), "perf::CYCLES");
    }

    #[test]
    fn no_encoder_says_why_for_every_question() {
        let e = NoEncoder(LIBPFM_MISSING.into());
        assert_eq!(e.core_pmu().unwrap_err(), LIBPFM_MISSING);
        assert_eq!(e.encode("skx::INST_RETIRED").unwrap_err(), LIBPFM_MISSING);
    }
}
