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
    if let Some(facts) = read.as_ref().and_then(|read| LOADABLE.recall(read)) {
        return Ok(facts);
    }
    #[cfg(test)]
    WALKS.set(WALKS.get() + 1);
    let facts = image(bytes, detected, digest).map_err(|refusal| refused(refusal, what(), kind))?;
    if let Some(read) = read {
        LOADABLE.remember(&read, facts);
    }
    Ok(facts)
}

/// Images found whole and loadable, each remembered with what its check found, so that loads of
/// the same bytes again (a library loaded once per context, thread or plugin, unloaded and
/// loaded again, or loaded by two runtimes) compare them rather than walk them: at most 64
/// images and 2 MiB of them, and of those named by their bytes only ones of up to
/// [`MAX_RECALLED_BYTES`]. The copy is made when an image is found whole the second time, so
/// that an image loaded once pays only for its key.
static LOADABLE: Verdicts = Verdicts::new(64, 2 << 20, Keep::WhenSeenAgain);

/// The largest image recalled by its bytes. Comparing bytes runs at tens of GB/s where the
/// check of a small image takes 0.4-0.9 µs whatever its size (it walks headers and tables, not
/// code): up to 32 KiB the comparison costs less, past it the check.
const MAX_RECALLED_BYTES: usize = 32 << 10;

#[cfg(test)]
thread_local! {
    /// Images this thread checked in full for a load, not recalled: what the tests count.
    static WALKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What the check of `bytes` for a load reads, for its recall: the bytes themselves, or their
/// blake3 `digest` when the caller has it, which covers every byte without reading them again;
/// `None` for bytes too many to compare cheaply and no digest.
fn loadable_read<'a>(bytes: &'a [u8], digest: Option<&Digest>) -> Option<Read<'a>> {
    match digest {
        Some(digest) => Some(Read::new(digest.as_bytes().to_vec(), &[])),
        None => (bytes.len() <= MAX_RECALLED_BYTES).then(|| Read::new(Vec::new(), bytes)),
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
    use super::*;
    use crate::compile::{Arch, Output, Program};

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

    #[test]
    fn an_image_found_whole_is_compared_not_walked_again() {
        let source = "// an_image_found_whole_is_compared_not_walked_again\n\
                      __device__ int counter;\n\
                      extern \"C\" __global__ void k(int *x) { x[threadIdx.x] = ++counter; }";
        let cubin = compiled(source, Output::Cubin);
        assert!(cubin.len() <= MAX_RECALLED_BYTES, "{} bytes", cubin.len());
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
        // Every byte counts, not only those the key samples: a byte of code in no sample,
        // changed, is a new image, checked in full (and whole: the check does not read code).
        let unsampled = unsampled_code_byte(&cubin);
        let mut other_code = cubin.clone();
        other_code[unsampled] ^= 0x01;
        assert_eq!(
            Read::new(Vec::new(), &other_code).key(),
            Read::new(Vec::new(), &cubin).key()
        );
        assert_eq!(walks_of_three(&other_code, false), [1, 1, 0]);
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
        assert_eq!(walks(|| load_check(&other_code, false).unwrap()).0, 0);
    }

    /// The offset of a byte of the first code section (`.text.*`) of `cubin` that no sample of
    /// its key covers.
    fn unsampled_code_byte(cubin: &[u8]) -> usize {
        use crate::formats::remembered::KEY_SAMPLE;
        use object::{Object, ObjectSection};
        let file = object::File::parse(cubin).unwrap();
        let text = file
            .sections()
            .find(|section| section.name().is_ok_and(|name| name.starts_with(".text.")))
            .unwrap();
        let (offset, size) = text.file_range().unwrap();
        let middle = (cubin.len() - KEY_SAMPLE) / 2;
        let sampled = |at: usize| {
            at < KEY_SAMPLE
                || (middle..middle + KEY_SAMPLE).contains(&at)
                || at >= cubin.len() - KEY_SAMPLE
        };
        (usize::try_from(offset).unwrap()..usize::try_from(offset + size).unwrap())
            .find(|&at| !sampled(at))
            .expect("a code byte outside the samples")
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

    /// An image too big to compare cheaply is checked in full each time, unless the load names
    /// it by its digest, which covers every byte without reading them.
    #[test]
    fn a_big_image_is_recalled_only_by_its_digest() {
        let source = format!(
            "// a_big_image_is_recalled_only_by_its_digest\n\
             __constant__ unsigned char table[{}] = {{1}};\n\
             extern \"C\" __global__ void k(unsigned char *x) {{ x[0] = table[x[1]]; }}",
            MAX_RECALLED_BYTES
        );
        let cubin = compiled(&source, Output::Cubin);
        assert!(cubin.len() > MAX_RECALLED_BYTES, "{} bytes", cubin.len());
        assert_eq!(walks_of_three(&cubin, false), [1, 1, 1]);
        assert_eq!(walks_of_three(&cubin, true), [1, 1, 0]);
        // A digest names exactly its bytes: a byte changed is another digest.
        let mut changed = cubin.clone();
        changed[unsampled_code_byte(&cubin)] ^= 0x01;
        assert_eq!(walks(|| load_check(&changed, true).unwrap()).0, 1);
    }
}
