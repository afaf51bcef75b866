//! LTO-IR: NVVM IR for link-time optimization, as NVRTC (`-dlto`) and nvcc (`-dlto`) write it.
//!
//! Current toolkits wrap it in an NVVM container whose header records the target architecture;
//! older ones wrote plain LLVM bitcode, possibly in the bitcode wrapper.

use object::pod::{self, Pod};
use object::{LittleEndian as LE, U16, U32};

use crate::parse_error::{ParseError, Problem};

/// How the LTO-IR is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LtoIrFormat {
    /// The NVVM container (magic `7f4e43ed`), as CUDA 12 and 13 write it.
    NvvmContainer,
    /// Raw LLVM bitcode (`BC C0 DE`).
    Bitcode,
    /// LLVM bitcode inside the bitcode wrapper (`DE C0 17 0B`).
    BitcodeWrapper,
}

/// What an LTO-IR image says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LtoIr {
    /// Its storage format.
    pub format: LtoIrFormat,
    /// The SM architecture it was compiled for (e.g. 90), when the container records it.
    pub arch: Option<u32>,
}

const NVVM_CONTAINER: &[u8] = &[0xed, 0x43, 0x4e, 0x7f];
const BITCODE: &[u8] = b"BC\xc0\xde";
const BITCODE_WRAPPER: &[u8] = &[0xde, 0xc0, 0x17, 0x0b];

/// The start of an NVVM container's header, up to the size of the whole header.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[allow(
    dead_code,
    reason = "the fields cudyn does not read are named for the layout"
)]
struct NvvmHeader {
    /// `NVVM_CONTAINER`.
    magic: [u8; 4],
    /// Versions of the container and its IR, which cudyn does not read.
    versions: [u8; 12],
    /// The size of the whole header, after which the IR begins (40 in CUDA 12 and 13).
    header_size: U32<LE>,
}

/// The NVVM container header's fields after [`NvvmHeader`], up to the architecture.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[allow(
    dead_code,
    reason = "the fields cudyn does not read are named for the layout"
)]
struct NvvmTarget {
    /// Fields cudyn does not read.
    reserved: [u8; 6],
    /// The architecture, as ten times the SM number (900 for sm_90).
    arch: U16<LE>,
}

// SAFETY: both are `repr(C)` structs of bytes and of object's byte-array integers (alignment 1,
// the `unaligned` feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for NvvmHeader {}
// SAFETY: as above.
unsafe impl Pod for NvvmTarget {}

/// The bytes of an NVVM container's header up to its architecture: the least a header is.
const NVVM_HEADER_MIN: usize =
    std::mem::size_of::<NvvmHeader>() + std::mem::size_of::<NvvmTarget>();

/// The LTO-IR format of `bytes`, if they are LTO-IR.
pub(crate) fn format(bytes: &[u8]) -> Option<LtoIrFormat> {
    [
        (NVVM_CONTAINER, LtoIrFormat::NvvmContainer),
        (BITCODE, LtoIrFormat::Bitcode),
        (BITCODE_WRAPPER, LtoIrFormat::BitcodeWrapper),
    ]
    .into_iter()
    .find_map(|(magic, format)| bytes.starts_with(magic).then_some(format))
}

/// Reads an LTO-IR header. An NVVM container must hold its whole header and some IR after it;
/// the IR itself is NVIDIA's own encoding, which nothing but nvJitLink reads, so damage inside
/// it is found only by a link.
pub fn parse(bytes: &[u8]) -> Result<LtoIr, ParseError> {
    let format = format(bytes).ok_or_else(|| {
        ParseError::new(
            "LTO-IR header",
            Problem::WrongFormat,
            "no LTO-IR magic number",
        )
    })?;
    let mut arch = None;
    if format == LtoIrFormat::NvvmContainer {
        let read = pod::from_bytes::<NvvmHeader>(bytes).ok();
        let header = read
            .and_then(|(header, _)| usize::try_from(header.header_size.get(LE)).ok())
            .filter(|&size| size >= NVVM_HEADER_MIN);
        match header {
            Some(size) if bytes.len() > size => {}
            Some(size) => {
                return Err(ParseError::new(
                    "NVVM container",
                    Problem::Truncated,
                    format!(
                        "its header is {size} bytes, with the IR after it, and only {} bytes \
                         are given: it is cut short",
                        bytes.len()
                    ),
                ))
            }
            None => {
                return Err(ParseError::new(
                    "NVVM container header",
                    Problem::Truncated,
                    format!(
                        "{} bytes are too few for the header, or its size field is damaged: it \
                         is cut short or damaged",
                        bytes.len()
                    ),
                ))
            }
        }
        // The header is whole, so its target is there.
        arch = read
            .and_then(|(_, rest)| pod::from_bytes::<NvvmTarget>(rest).ok())
            .map(|(target, _)| target.arch.get(LE))
            .filter(|tenfold| *tenfold >= 100 && tenfold % 10 == 0)
            .map(|tenfold| u32::from(tenfold / 10));
    }
    Ok(LtoIr { format, arch })
}
