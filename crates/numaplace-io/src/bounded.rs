//! Bounded reads of files a user names (configs, scenarios, recordings,
//! machine files, counters files, XML topologies): every reader of such a
//! file opens it here, so none of them can be made to read `/dev/zero`
//! forever, block on a FIFO, or take a device for a file. Std only, no
//! parsing: it sits below every crate that reads such a file.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A config file (TOML), a counters file, a machine file, a parameters file.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;
/// A scenario file.
pub const SCENARIO_MAX_BYTES: u64 = 4 << 20;
/// An hwloc XML topology (a 1,000-CPU machine's is a few MB).
pub const XML_MAX_BYTES: u64 = 64 << 20;
/// One line of a recording (one snapshot of a machine).
pub const RECORD_LINE_MAX_BYTES: u64 = 256 << 20;
/// A sysfs list file (`node/online`).
pub const SYSFS_MAX_BYTES: u64 = 64 << 10;
/// Any file read under a root (`/proc`, `/sys`, or a snapshot of them):
/// the largest, `numa_maps` or `maps` of a process at the kernel's default
/// `vm.max_map_count` (65,530 mappings), is about 15 MiB.
pub const ROOT_FILE_MAX_BYTES: u64 = 64 << 20;
/// The kernel's BTF (`/sys/kernel/btf/vmlinux`): 5-10 MiB on distribution
/// kernels.
pub const BTF_MAX_BYTES: u64 = 128 << 20;
/// A shard of a sweep (`compare --random N --shard K/M`): one of 100,000
/// mixes over ten policies and ten seeds is about 150 MiB.
pub const SHARD_MAX_BYTES: u64 = 1 << 30;

const O_NONBLOCK: i32 = 0o4000;
const O_CLOEXEC: i32 = 0o2000000;

/// Opens `path` for reading if it is a regular file: a device, FIFO,
/// socket or directory is refused (`InvalidInput`) without blocking on it.
pub fn open_regular(path: &Path) -> io::Result<File> {
    // O_NONBLOCK: opening a FIFO for reading does not wait for a writer.
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK | O_CLOEXEC)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "a device, FIFO or socket"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what}, not a regular file"),
        ));
    }
    Ok(f)
}

fn too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than {max} bytes, the most numaplace reads of such a file"),
    )
}

/// The whole of a regular file of at most `max` bytes (a device, FIFO,
/// socket or directory refused without blocking).
pub fn read_bytes(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// The whole text of a regular file of at most `max` bytes.
pub fn read_to_string(path: &Path, max: u64) -> io::Result<String> {
    let bytes = read_bytes(path, max)?;
    String::from_utf8(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

/// Reads one line (without its `\n`) of at most `max` bytes into `line`;
/// `Ok(false)` at the end of input.
pub fn read_line(r: &mut impl BufRead, line: &mut String, max: u64) -> io::Result<bool> {
    let mut bytes = Vec::new();
    r.take(max + 1).read_until(b'\n', &mut bytes)?;
    if bytes.is_empty() {
        return Ok(false);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    } else if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    line.clear();
    line.push_str(
        std::str::from_utf8(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not UTF-8: {e}")))?,
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading() {
        for p in ["/dev/zero", "/dev/null", "/"] {
            let e = read_to_string(Path::new(p), 10).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{p}: {e}");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_to_string(&fifo, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    unsafe extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }

    #[test]
    fn files_above_the_limit_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_to_string(&p, 10).unwrap(), "0123456789");
        let e = read_to_string(&p, 9).unwrap_err();
        assert!(e.to_string().contains("larger than 9 bytes"), "{e}");
    }

    #[test]
    fn lines_are_bounded() {
        let mut r = io::Cursor::new(b"ab\ncdef\nxyz".to_vec());
        let mut line = String::new();
        assert!(read_line(&mut r, &mut line, 4).unwrap());
        assert_eq!(line, "ab");
        assert!(read_line(&mut r, &mut line, 4).unwrap());
        assert_eq!(line, "cdef");
        assert!(read_line(&mut r, &mut line, 4).unwrap());
        assert_eq!(line, "xyz");
        assert!(!read_line(&mut r, &mut line, 4).unwrap());
        let mut r = io::Cursor::new(b"abcdefgh\n".to_vec());
        assert!(read_line(&mut r, &mut line, 4).is_err());
    }
}
