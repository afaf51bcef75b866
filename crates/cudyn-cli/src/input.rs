//! Reading the files commands are given, within bounds: a regular file, or standard input when
//! the name is `-`, of at most `--max-input-bytes` (1 GiB unless raised), its first bytes judged
//! before the rest is read.
//!
//! Anything else is refused before a byte is read, with what to do instead: a folder, a FIFO
//! (opening one for reading would wait for a writer for ever), a device (`/dev/zero` never ends),
//! a socket. A file larger than the limit is refused by its size, and one whose first 64 KiB
//! already show it is not what the command reads (a sparse file of zeros handed to `inspect`, a
//! binary handed to `compile`) is refused without reading the rest.

use std::fs::{Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::output::CliError;

/// The limit on one input when `--max-input-bytes` is not given: 1 GiB.
pub const DEFAULT_LIMIT: &str = "1G";

/// How much of an input is judged before the rest is read.
const HEAD: usize = 64 * 1024;

/// `--max-input-bytes`, which every command that reads files takes.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Limit {
    /// Refuse an input file larger than this: bytes, or with a suffix K, M or G (KiB, MiB, GiB).
    #[arg(
        long = "max-input-bytes",
        value_name = "N",
        value_parser = cudyn::cache::parse_bytes,
        default_value = DEFAULT_LIMIT
    )]
    pub bytes: u64,
}

/// What a command reads, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Device code: PTX, cubins, fatbins, LTO-IR, host binaries, static libraries.
    DeviceCode,
    /// CUDA C++ source.
    Source,
    /// The contents of a buffer (`cudyn run --arg buf:TYPE:@FILE`).
    Data,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::DeviceCode => "device code",
            Kind::Source => "CUDA C++ source",
            Kind::Data => "buffer contents",
        }
    }
}

/// Whether `path` names standard input.
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new("-")
}

/// How messages name `path`.
pub fn display(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    }
}

/// The device code in `path` (`-`: standard input), within `limit` bytes.
pub fn device_code(path: &Path, limit: Limit) -> Result<Vec<u8>, CliError> {
    read(path, limit, Kind::DeviceCode, |head| {
        device_code_head(head).map_err(|error| not_device_code(path, error))
    })
}

/// The device code in `path` (`-`: standard input), within `limit` bytes, as an image of the
/// kind its bytes show.
pub fn image(path: &Path, limit: Limit) -> Result<cudyn::Image<'static>, CliError> {
    cudyn::Image::new(device_code(path, limit)?).map_err(|error| not_device_code(path, error))
}

/// Says that `path` is not device code, as `error` (the library's) explains.
fn not_device_code(path: &Path, error: cudyn::Error) -> CliError {
    match error {
        cudyn::Error::NotDeviceCode { reason, .. } => {
            CliError::new(format!("{} is not device code: {reason}", display(path)))
        }
        other => other.into(),
    }
}

/// The CUDA C++ source in `path` (`-`: standard input), within `limit` bytes: text, with no NUL
/// byte, in UTF-8.
pub fn source(path: &Path, limit: Limit) -> Result<String, CliError> {
    let bytes = read(path, limit, Kind::Source, |head| {
        // The head may end inside a character; only what it holds whole is judged.
        let whole = match std::str::from_utf8(head) {
            Err(error) if error.error_len().is_none() => &head[..error.valid_up_to()],
            _ => head,
        };
        source_text(path, whole)
    })?;
    source_text(path, &bytes)?;
    String::from_utf8(bytes).map_err(|error| not_source(path, &error.to_string()))
}

/// The bytes of `path` (`-`: standard input), within `limit` bytes.
pub fn data(path: &Path, limit: Limit) -> Result<Vec<u8>, CliError> {
    read(path, limit, Kind::Data, |_| Ok(()))
}

/// Whether `bytes` are source text, or why not: a NUL byte, or bytes that are not UTF-8.
fn source_text(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if let Some(at) = bytes.iter().position(|&byte| byte == 0) {
        return Err(not_source(
            path,
            &format!("it holds a NUL byte at byte {at}"),
        ));
    }
    std::str::from_utf8(bytes).map(drop).map_err(|error| {
        not_source(
            path,
            &format!("it is not UTF-8 text from byte {}", error.valid_up_to()),
        )
    })
}

fn not_source(path: &Path, why: &str) -> CliError {
    CliError::new(format!(
        "{} is not CUDA C++ source: {why}. Is it device code? `cudyn inspect {}` shows what \
         a cubin, fatbin, PTX or LTO-IR file holds",
        display(path),
        path.display()
    ))
}

/// Refuses `head`, the first bytes of an input, when they already show it is not device code:
/// binary bytes with no magic number of a kind cudyn reads. Every binary kind is told by its
/// first bytes, so the rest could not change the verdict. Text (PTX may declare itself further
/// on) and host binaries of any format (whose device code is found by reading them whole) pass.
fn device_code_head(head: &[u8]) -> Result<(), cudyn::Error> {
    match cudyn::Image::detect(head) {
        Ok(_) => Ok(()),
        Err(_) if !head.contains(&0) => Ok(()),
        Err(_) if object::FileKind::parse(head).is_ok() => Ok(()),
        Err(error) => Err(error),
    }
}

/// Refuses a command line naming standard input (`-`) more than once among `paths`: it can be
/// read once, and a second read would find it empty.
pub fn refuse_stdin_twice(paths: &[std::path::PathBuf]) -> Result<(), CliError> {
    if paths.iter().filter(|path| is_stdin(path)).count() > 1 {
        return Err(twice());
    }
    Ok(())
}

fn twice() -> CliError {
    CliError::usage("standard input (-) is named twice: it can be read once")
}

/// Standard input is read once: a second `-` would find it empty.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// Reads `path` as the module documentation says; `judge_head` sees the first bytes (all of
/// them for a short input) before the rest is read.
fn read(
    path: &Path,
    limit: Limit,
    kind: Kind,
    judge_head: impl FnOnce(&[u8]) -> Result<(), CliError>,
) -> Result<Vec<u8>, CliError> {
    let cannot_read = |error: std::io::Error| {
        CliError::new(format!("cannot read {}", display(path))).source(error)
    };
    let mut bytes = Vec::new();
    if is_stdin(path) {
        if STDIN_TAKEN.swap(true, Ordering::Relaxed) {
            return Err(twice());
        }
        let mut stdin = std::io::stdin().lock();
        read_bounded(&mut stdin, &mut bytes, limit, judge_head)
            .map_err(|failure| failure.into_error(path, limit, cannot_read))?;
        return Ok(bytes);
    }
    // Not blocking: opening a FIFO for reading would otherwise wait for a writer. What was
    // opened is judged by its own metadata, so a file swapped for a FIFO after a look at its
    // name is caught too.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(cannot_read)?;
    let metadata = file.metadata().map_err(cannot_read)?;
    refuse_unless_regular(path, &metadata, kind)?;
    if metadata.len() > limit.bytes {
        return Err(too_large(path, metadata.len(), limit));
    }
    bytes.reserve_exact(usize::try_from(metadata.len()).unwrap_or(0));
    read_bounded(&mut file, &mut bytes, limit, judge_head)
        .map_err(|failure| failure.into_error(path, limit, cannot_read))?;
    Ok(bytes)
}

/// Why [`read_bounded`] stopped.
enum Stop {
    Io(std::io::Error),
    TooLarge(u64),
    Refused(CliError),
}

impl Stop {
    fn into_error(
        self,
        path: &Path,
        limit: Limit,
        cannot_read: impl FnOnce(std::io::Error) -> CliError,
    ) -> CliError {
        match self {
            Stop::Io(error) => cannot_read(error),
            Stop::TooLarge(size) => too_large(path, size, limit),
            Stop::Refused(error) => error,
        }
    }
}

/// Reads `reader` into `bytes`: the head, judged, then the rest, at most `limit` bytes in all.
fn read_bounded(
    reader: &mut impl Read,
    bytes: &mut Vec<u8>,
    limit: Limit,
    judge_head: impl FnOnce(&[u8]) -> Result<(), CliError>,
) -> Result<(), Stop> {
    let head = (HEAD as u64).min(limit.bytes.saturating_add(1));
    reader.take(head).read_to_end(bytes).map_err(Stop::Io)?;
    judge_head(bytes).map_err(Stop::Refused)?;
    let rest = limit
        .bytes
        .saturating_add(1)
        .saturating_sub(bytes.len() as u64);
    reader.take(rest).read_to_end(bytes).map_err(Stop::Io)?;
    if bytes.len() as u64 > limit.bytes {
        return Err(Stop::TooLarge(bytes.len() as u64));
    }
    Ok(())
}

fn too_large(path: &Path, size: u64, limit: Limit) -> CliError {
    let size = if is_stdin(path) {
        "holds more".to_owned()
    } else {
        format!("is {size} bytes, more")
    };
    CliError::new(format!(
        "{} {size} than the limit of {} bytes on one input: if it is the right file, raise the \
         limit with --max-input-bytes (e.g. --max-input-bytes 4G)",
        display(path),
        limit.bytes
    ))
}

/// Refuses what `metadata` describes unless it is a regular file.
fn refuse_unless_regular(path: &Path, metadata: &Metadata, kind: Kind) -> Result<(), CliError> {
    let file_type = metadata.file_type();
    let what = if file_type.is_file() {
        return Ok(());
    } else if file_type.is_dir() {
        return Err(CliError::new(format!(
            "{} is a folder, not a file: name the files in it",
            path.display()
        )));
    } else if file_type.is_fifo() {
        "a FIFO (a named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(CliError::new(format!(
        "{} is {what}, not a regular file: cudyn reads {} from files, and from standard input \
         when the file is named `-` (cat {} | cudyn ... -)",
        path.display(),
        kind.what(),
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(bytes: u64) -> Limit {
        Limit { bytes }
    }

    #[test]
    fn a_reader_is_cut_at_the_limit_and_judged_by_its_head() {
        let mut bytes = Vec::new();
        let mut long = std::io::repeat(b'x').take(10_000);
        match read_bounded(&mut long, &mut bytes, limit(4096), |_| Ok(())) {
            Err(Stop::TooLarge(size)) => assert_eq!(size, 4097),
            _ => panic!("a reader longer than the limit was taken"),
        }
        let mut bytes = Vec::new();
        let mut seen = 0;
        read_bounded(&mut &[7u8; 100][..], &mut bytes, limit(100), |head| {
            seen = head.len();
            Ok(())
        })
        .ok()
        .unwrap();
        assert_eq!((seen, bytes.len()), (100, 100));
        let mut endless = std::io::repeat(0);
        let refused = read_bounded(&mut endless, &mut Vec::new(), limit(u64::MAX), |head| {
            assert_eq!(head.len(), HEAD);
            Err(CliError::new("no"))
        });
        assert!(matches!(refused, Err(Stop::Refused(_))));
    }

    #[test]
    fn a_binary_head_is_refused_and_text_or_a_host_binary_read_on() {
        assert!(device_code_head(&[0; 4096]).is_err());
        assert!(device_code_head(b"// PTX comes later\n").is_ok());
        let mut elf = vec![0u8; 4096];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[6] = 1;
        assert!(
            device_code_head(&elf).is_ok(),
            "a host ELF file is read whole"
        );
    }

    #[test]
    fn sources_are_text_without_nul() {
        let path = Path::new("k.cu");
        assert!(source_text(path, b"__global__ void k() {}").is_ok());
        let nul = source_text(path, b"abc\0def").unwrap_err().to_string();
        assert!(nul.contains("NUL byte at byte 3"), "{nul}");
        assert!(nul.contains("cudyn inspect k.cu"), "{nul}");
        let latin = source_text(path, b"caf\xe9").unwrap_err().to_string();
        assert!(latin.contains("not UTF-8 text from byte 3"), "{latin}");
    }
}
