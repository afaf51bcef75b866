//! The check every image passes before the driver or nvJitLink sees it (see
//! [`Image::validate`]): by its kind, through the check of its format, with the verdict as a
//! cudyn [`Error`].
//!
//! [`Image::validate`]: super::Image::validate

use super::detect::{detect, Detected, Unrecognized};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::formats::remembered::{Keep, Read, Verdicts};
use crate::formats::{archive, cubin, fatbin, host, ptx, Facts, Purpose, Refusal};
use crate::kinds::ImageKind;
use crate::parse_error::{ParseError, Problem};

/// What was found of `bytes`, `detected` as they were (by [`detected`](super::detected), or of
/// a kind known otherwise), once they are checked whole and loadable as they are (see
/// [`Image::validate`](super::Image::validate)); `what` names them in errors (a file name, or
/// "the N-byte image given").
///
/// Library loading calls this before any CUDA call: the driver trusts an image's own headers.
/// Bytes found whole here before are recalled rather than checked again (see [`LOADABLE`]).
///
/// `digest`, when the caller hashed the bytes already, names them for that recall and spares the
/// check hashing a fatbin's compressed entries to recall them (see `formats::fatbin`).
pub(crate) fn validate_loadable(
    bytes: &[u8],
    detected: Detected<'_>,
    digest: Option<&Digest>,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    let kind = detected.kind;
    require_loadable(kind, what)?;
    let read = loadable_read(bytes, digest);
    if let Some(facts) = LOADABLE.recall(&read) {
        return Ok(facts);
    }
    #[cfg(test)]
    WALKS.set(WALKS.get() + 1);
    let facts = image(bytes, detected, digest).map_err(|refusal| refused(refusal, what(), kind))?;
    LOADABLE.remember(&read, facts, || match (digest, kind) {
        (Some(_), _) => Vec::new(),
        (None, ImageKind::Cubin) => cubin::unread_contents(bytes),
        (None, ImageKind::Fatbin) => fatbin::unread_contents(bytes),
        (None, _) => Vec::new(),
    });
    Ok(facts)
}

/// Images found whole and loadable, each remembered with what its check found, so that loads of
/// the same bytes again (a library loaded once per context, thread or plugin, unloaded and
/// loaded again, or loaded by two runtimes) compare them rather than walk them: at most 64
/// images and 2 MiB of copies, each of up to [`MAX_COMPARED_BYTES`]. The copy is made when an
/// image is found whole the second time, so that an image loaded once pays only for its key;
/// it leaves out the contents of a cubin's code and data sections, which the check does not
/// read (`cubin::unread_contents`), so that a cubin's copy and comparison are of its headers
/// and tables, a few KiB, whatever its size.
static LOADABLE: Verdicts = Verdicts::new(64, 2 << 20, MAX_COMPARED_BYTES, Keep::WhenSeenAgain);

/// The most bytes an image's recall compares. Comparing runs at tens of GB/s where the check of
/// a small image takes 0.4-0.9 µs (it walks headers and tables, not code): up to 32 KiB the
/// comparison costs less, past it the check.
const MAX_COMPARED_BYTES: usize = 32 << 10;

#[cfg(test)]
thread_local! {
    /// Images this thread checked in full for a load, not recalled: what the tests count.
    static WALKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What the check of `bytes` for a load reads, for its recall: the bytes themselves, or their
/// blake3 `digest` when the caller has it, which covers every byte without reading them again.
fn loadable_read<'a>(bytes: &'a [u8], digest: Option<&Digest>) -> Read<'a> {
    match digest {
        Some(digest) => Read::new(digest.as_bytes().to_vec(), &[]),
        None => Read::new(Vec::new(), bytes),
    }
}

/// Checks an input of kind `kind` before nvJitLink reads it (see [`link_input`]).
pub(crate) fn validate_link_input(
    bytes: &[u8],
    kind: ImageKind,
    what: &dyn Fn() -> String,
) -> Result<()> {
    link_input(bytes, kind).map_err(|error| Error::MalformedImage {
        what: what(),
        kind,
        error,
    })
}

/// Whether `bytes`, a cubin that passed its check, is an executable one (`ET_EXEC`) rather than
/// relocatable code.
pub(crate) fn is_executable_cubin(bytes: &[u8]) -> bool {
    cubin::is_executable(bytes)
}

/// [`validate_loadable`] for output of NVRTC or nvJitLink, which needs less checking (see
/// [`compiler_output`]).
pub(crate) fn validate_compiler_output(
    bytes: &[u8],
    detected: Detected<'_>,
    what: &dyn Fn() -> String,
) -> Result<Facts> {
    let kind = detected.kind;
    require_loadable(kind, what)?;
    compiler_output(bytes, detected).map_err(|refusal| refused(refusal, what(), kind))
}

/// [`Error::NotLoadable`] for a kind the driver cannot load.
fn require_loadable(kind: ImageKind, what: &dyn Fn() -> String) -> Result<()> {
    match kind.unloadable_advice() {
        Some(advice) => Err(Error::NotLoadable {
            what: what(),
            kind,
            advice,
        }),
        None => Ok(()),
    }
}

/// The error of `refusal`, of `what`, an image of `kind`.
fn refused(refusal: Refusal, what: String, kind: ImageKind) -> Error {
    match refusal {
        Refusal::Malformed(error) => Error::MalformedImage { what, kind, error },
        Refusal::NeedsLinking(reason) => Error::NeedsLinking { what, reason },
    }
}

/// Checks `bytes` of a loadable kind, as `detected`; kinds the driver cannot load are refused
/// before this. PTX already read as text by detection is not read so again.
fn image(
    bytes: &[u8],
    detected: Detected<'_>,
    digest: Option<&Digest>,
) -> std::result::Result<Facts, Refusal> {
    match detected.kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Load),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Load, digest),
        ImageKind::Ptx => match detected.ptx_text {
            Some(text) => ptx::validate_text(text),
            None => ptx::validate(bytes),
        }
        .map_err(Refusal::Malformed),
        ImageKind::LtoIr | ImageKind::HostBinary | ImageKind::Archive => Ok(Facts::UNKNOWN),
    }
}

/// Checks `bytes` of `kind` before nvJitLink reads them. nvJitLink trusts its inputs' headers as
/// the driver does (a truncated fatbin has made it loop forever, a cubin with a damaged section
/// header crash), so every input gets the check a load would give it, relocatable code included:
/// a host object's embedded fatbins, and each member of a static library that holds device code
/// (its other members are host code nvJitLink passes over). LTO-IR is known by its magic number
/// alone: its contents are NVIDIA's own encoding, which only nvJitLink reads.
fn link_input(bytes: &[u8], kind: ImageKind) -> std::result::Result<(), ParseError> {
    let malformed = |refusal: Refusal| match refusal {
        Refusal::Malformed(error) => error,
        Refusal::NeedsLinking(reason) => {
            ParseError::new("relocatable code", Problem::Unsupported, reason)
        }
    };
    match kind {
        ImageKind::Cubin => cubin::validate(bytes, Purpose::Link)
            .map(drop)
            .map_err(malformed),
        ImageKind::Fatbin => fatbin::validate(bytes, Purpose::Link, None)
            .map(drop)
            .map_err(malformed),
        ImageKind::Ptx => ptx::validate(bytes).map(drop),
        ImageKind::LtoIr => Ok(()),
        ImageKind::HostBinary => host_object(bytes),
        ImageKind::Archive => static_library(bytes),
    }
}

/// The fatbins a host object embeds; none is no damage (an object of host code only).
fn host_object(bytes: &[u8]) -> std::result::Result<(), ParseError> {
    host::check_section_extents(bytes)?;
    for (index, fatbin) in host::fatbin_slices(bytes)?.into_iter().enumerate() {
        link_input(fatbin, ImageKind::Fatbin)
            .map_err(|error| error.inside(&format!("embedded fatbin {index}")))?;
    }
    Ok(())
}

/// Every member holding device code. An archive inside the archive is refused rather than
/// checked: no tool writes one, and following them would let nesting decide the depth of
/// the check's recursion.
fn static_library(bytes: &[u8]) -> std::result::Result<(), ParseError> {
    for (name, member) in archive::members(bytes)? {
        let checked = match detect(member) {
            Ok(ImageKind::Archive) => Err(ParseError::new(
                "its contents",
                Problem::Unsupported,
                "it is an archive inside the archive, which no tool writes",
            )),
            Ok(kind) => link_input(member, kind),
            // An object file that is not device code: readable, it is host code.
            Err(Unrecognized::Host(_)) => host_object(member),
            Err(_) => Ok(()),
        };
        checked.map_err(|error| error.inside(&format!("member {name}")))?;
    }
    Ok(())
}

/// The checks output of NVRTC or nvJitLink (a [`Compiled`](crate::compile::Compiled), fresh or
/// read back from the compile cache, whose checksum covers it) still needs before a load: a
/// cubin's ELF header saying it is executable rather than relocatable. Its structure was written
/// by the compiler, not by whoever handed cudyn the bytes, and the full walk of [`image`] costs
/// a new process tens of microseconds, as much as the load itself. Other kinds get the full
/// check.
fn compiler_output(bytes: &[u8], detected: Detected<'_>) -> std::result::Result<Facts, Refusal> {
    match detected.kind {
        ImageKind::Cubin => cubin::compiler_output(bytes),
        _ => image(bytes, detected, None),
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::*;
    use crate::compile::{Arch, FatbinBuilder, Output, Program};
    use crate::formats::remembered::KEY_SAMPLE;

    /// NVRTC's output for sm_90 of `source`, which names the test so that no other test checks
    /// the same bytes first.
    fn compiled(source: &str, output: Output) -> Vec<u8> {
        Program::new(source)
            .arch(Arch::new(9, 0))
            .output(output)
            .compile()
            .expect("NVRTC compiles (run the tests with the CUDA wheels' venv)")
            .code()
            .to_vec()
    }

    /// A load's check of `bytes`, as detected; given their digest when `by_digest`.
    fn load_check(bytes: &[u8], by_digest: bool) -> Result<Facts> {
        let detected = super::super::detected_with_text(bytes, &String::new)?;
        let digest = by_digest.then(|| Digest::of(bytes));
        validate_loadable(bytes, detected, digest.as_ref(), &String::new)
    }

    /// How many full checks `check` made, with what it returned.
    fn walks<T>(check: impl FnOnce() -> T) -> (usize, T) {
        let before = WALKS.get();
        let result = check();
        (WALKS.get() - before, result)
    }

    /// The full checks each of three checks of `bytes` in a row made: an image found whole is
    /// walked the first time, walked and copied the second, compared with the copy after.
    fn walks_of_three(bytes: &[u8], by_digest: bool) -> [usize; 3] {
        std::array::from_fn(|_| walks(|| load_check(bytes, by_digest).unwrap()).0)
    }

    /// The file range of the first section of `cubin` whose name starts with `prefix`.
    fn section(cubin: &[u8], prefix: &str) -> Range<usize> {
        use object::{Object, ObjectSection};
        let file = object::File::parse(cubin).unwrap();
        let section = file
            .sections()
            .find(|section| section.name().is_ok_and(|name| name.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no section {prefix}*"));
        let (offset, size) = section.file_range().unwrap();
        usize::try_from(offset).unwrap()..usize::try_from(offset + size).unwrap()
    }

    /// A byte of `range` of `bytes` that no sample of their key covers, and is not `0`.
    fn unsampled(bytes: &[u8], range: Range<usize>) -> usize {
        let middle = (bytes.len() - KEY_SAMPLE) / 2;
        let sampled = |at: usize| {
            at < KEY_SAMPLE
                || (middle..middle + KEY_SAMPLE).contains(&at)
                || at >= bytes.len() - KEY_SAMPLE
        };
        range
            .into_iter()
            .find(|&at| !sampled(at) && bytes[at] != 0)
            .expect("a byte outside the samples")
    }

    #[test]
    fn an_image_found_whole_is_compared_not_walked_again() {
        let source = "// an_image_found_whole_is_compared_not_walked_again\n\
                      __device__ int counter;\n\
                      extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = ++counter; }";
        let cubin = compiled(source, Output::Cubin);
        let (first, facts) = walks(|| load_check(&cubin, false).unwrap());
        assert_eq!(first, 1);
        assert!(facts.defines_variables, "{facts:?}");
        let (second, _) = walks(|| load_check(&cubin, false).unwrap());
        assert_eq!(second, 1, "seen again: walked, and copied");
        let (third, recalled) = walks(|| load_check(&cubin, false).unwrap());
        assert_eq!(
            (third, recalled),
            (0, facts),
            "recalled, with what was found"
        );

        // Code the check does not read, changed where the key does not sample it: the same
        // verdict, recalled.
        let mut other_code = cubin.clone();
        other_code[unsampled(&cubin, section(&cubin, ".text."))] ^= 0x01;
        let (walked, recalled) = walks(|| load_check(&other_code, false).unwrap());
        assert_eq!((walked, recalled), (0, facts));
        // Every byte the check reads counts, not only those the key samples: a changed symbol
        // name, with the same key, is a new image, walked.
        let mut other_name = cubin.clone();
        let strings = section(&cubin, ".strtab");
        let name = unsampled(&cubin, strings.start + 1..strings.end);
        other_name[name] = if cubin[name] == b'a' { b'b' } else { b'a' };
        assert_eq!(
            Read::new(Vec::new(), &other_name).key(),
            Read::new(Vec::new(), &cubin).key()
        );
        assert_eq!(walks_of_three(&other_name, false), [1, 1, 0]);
        // Damage is found again each time, never remembered.
        let mut damaged = cubin.clone();
        damaged.truncate(cubin.len() - 100);
        for _ in 0..2 {
            let (walked, refused) = walks(|| load_check(&damaged, false).unwrap_err());
            assert_eq!(walked, 1);
            assert!(matches!(refused, Error::MalformedImage { .. }), "{refused}");
        }
        // Refusals leave the table as it was: the image of the same key as the first, which took
        // its place, is still recalled.
        assert_eq!(walks(|| load_check(&other_name, false).unwrap()).0, 0);
    }

    /// `source` compiled by nvcc (from a CUDA toolkit or the CUDA wheels) with `options`.
    fn nvcc(source: &str, options: &[&str]) -> Vec<u8> {
        let nvcc =
            cudyn_build::nvcc::find(cudyn_build::nvcc::candidates(|key| std::env::var_os(key)))
                .expect("nvcc (run scripts/cuda-wheels and activate its venv)");
        let folder = tempfile::tempdir().unwrap();
        let (input, output) = (folder.path().join("k.cu"), folder.path().join("k.out"));
        std::fs::write(&input, source).unwrap();
        let status = std::process::Command::new(&nvcc.path)
            .args(options)
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .status()
            .unwrap();
        assert!(status.success(), "nvcc {options:?} failed");
        std::fs::read(&output).unwrap()
    }

    /// The check's verdict does not depend on the bytes it is said not to read: each of them
    /// changed, the full check (no recall) finds the image whole, with the same facts. Cubins
    /// of NVRTC and nvcc, an nvFatbin fatbin and an nvcc one.
    #[test]
    fn the_check_reads_none_of_the_bytes_said_unread() {
        let source = "// the_check_reads_none_of_the_bytes_said_unread\n\
                      __constant__ float scale[64] = {2.0f};\n\
                      __device__ int seen;\n\
                      extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= scale[0]; seen = 1; }\n\
                      extern \"C\" __global__ void empty() {}";
        let cubin = compiled(source, Output::Cubin);
        let ptx = compiled(source, Output::Ptx);
        let mut fatbin = FatbinBuilder::new().expect("nvFatbin (the CUDA wheels' venv)");
        fatbin
            .add_cubin(&cubin, Arch::new(9, 0), "k.cu")
            .unwrap()
            .add_ptx(&ptx, Arch::new(9, 0), "k.cu")
            .unwrap();
        let fatbin = fatbin.finish().unwrap();
        let nvcc_cubin = nvcc(source, &["-cubin", "-arch=sm_90"]);
        let nvcc_fatbin = nvcc(source, &["-fatbin", "-arch=sm_90"]);
        let text = section(&cubin, ".text.k");
        assert!(cubin::unread_contents(&cubin)
            .iter()
            .any(|range| range.contains(&text.start) && range.contains(&(text.end - 1))));
        for bytes in [&cubin, &fatbin, &nvcc_cubin, &nvcc_fatbin] {
            let detected = super::super::detected_with_text(bytes, &String::new).unwrap();
            let unread = match detected.kind {
                ImageKind::Cubin => cubin::unread_contents(bytes),
                _ => fatbin::unread_contents(bytes),
            };
            let facts = image(bytes, detected, None).unwrap();
            let count: usize = unread.iter().map(Range::len).sum();
            // The code and constants of two kernels, and no header or table.
            assert!(
                count > 512 && count < bytes.len() / 2,
                "{count} of {}",
                bytes.len()
            );
            assert!(unread.windows(2).all(|pair| pair[0].end < pair[1].start));
            let mut changed = bytes.to_vec();
            for at in unread.into_iter().flatten() {
                changed[at] ^= 0xff;
                let checked = image(&changed, detected, None);
                assert_eq!(checked.ok(), Some(facts), "byte {at} changed");
                changed[at] ^= 0xff;
            }
        }
    }

    #[test]
    fn ptx_is_recalled_too() {
        let ptx = compiled(
            "// ptx_is_recalled_too\nextern \"C\" __global__ void k(float *x) { x[0] = 1; }",
            Output::Ptx,
        );
        assert_eq!(walks_of_three(&ptx, false), [1, 1, 0]);
        let mut open = ptx.clone();
        open.truncate(open.iter().rposition(|&byte| byte == b'}').unwrap());
        for _ in 0..2 {
            assert_eq!(walks(|| load_check(&open, false).is_err()), (1, true));
        }
    }

    /// A cubin's copy and comparison are of its headers and tables, however big its data: one
    /// with a 40 KiB table of constants is recalled.
    #[test]
    fn a_big_cubin_is_compared_by_its_tables() {
        let source = format!(
            "// a_big_cubin_is_compared_by_its_tables\n\
             __constant__ unsigned char table[{}] = {{1}};\n\
             extern \"C\" __global__ void k(unsigned char *x) {{ x[0] = table[x[1]]; }}",
            MAX_COMPARED_BYTES + (8 << 10)
        );
        let cubin = compiled(&source, Output::Cubin);
        assert!(cubin.len() > MAX_COMPARED_BYTES, "{} bytes", cubin.len());
        assert_eq!(walks_of_three(&cubin, false), [1, 1, 0]);
    }

    /// PTX is read whole: past the bytes a recall compares, it is checked in full each time,
    /// unless the load names it by its digest, which covers every byte without reading them.
    #[test]
    fn big_ptx_is_recalled_only_by_its_digest() {
        let ptx = compiled(
            "// big_ptx_is_recalled_only_by_its_digest\n\
             extern \"C\" __global__ void k(float *x) { x[0] = 2; }",
            Output::Ptx,
        );
        let mut big = ptx.strip_suffix(b"\0").unwrap_or(&ptx).to_vec();
        while big.len() <= MAX_COMPARED_BYTES {
            big.extend_from_slice(b"// a comment that makes the text longer\n");
        }
        assert_eq!(walks_of_three(&big, false), [1, 1, 1]);
        assert_eq!(walks_of_three(&big, true), [1, 1, 0]);
        // A digest names exactly its bytes: a byte changed is another digest.
        let mut changed = big.clone();
        let last = changed.len() - 2;
        changed[last] = b'!';
        assert_eq!(walks(|| load_check(&changed, true).unwrap()).0, 1);
    }
}
