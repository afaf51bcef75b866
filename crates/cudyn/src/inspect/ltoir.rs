//! LTO-IR: NVVM IR for link-time optimization, as NVRTC (`-dlto`) and nvcc (`-dlto`) write it.
//!
//! Current toolkits wrap it in an NVVM container whose header records the target architecture;
//! older ones wrote plain LLVM bitcode, possibly in the bitcode wrapper.

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

/// Where the NVVM container keeps the architecture, as ten times the SM number (900 for sm_90).
const NVVM_ARCH_OFFSET: usize = 26;

/// Where the NVVM container keeps the size of its header, after which its IR begins (40 in
/// CUDA 12 and 13).
const NVVM_HEADER_SIZE_OFFSET: usize = 16;

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
pub fn parse(bytes: &[u8]) -> Result<LtoIr, super::ParseError> {
    let format = format(bytes)
        .ok_or_else(|| super::ParseError::new("LTO-IR header", "no LTO-IR magic number"))?;
    if format == LtoIrFormat::NvvmContainer {
        let header = super::u32_at(bytes, NVVM_HEADER_SIZE_OFFSET)
            .and_then(|size| usize::try_from(size).ok())
            .filter(|&size| size > NVVM_ARCH_OFFSET + 1);
        match header {
            Some(size) if bytes.len() > size => {}
            Some(size) => {
                return Err(super::ParseError::new(
                    "NVVM container",
                    format!(
                        "its header is {size} bytes, with the IR after it, and only {} bytes \
                         are given: it is cut short",
                        bytes.len()
                    ),
                ))
            }
            None => {
                return Err(super::ParseError::new(
                    "NVVM container header",
                    format!(
                        "{} bytes are too few for the header, or its size field is damaged: it \
                         is cut short or damaged",
                        bytes.len()
                    ),
                ))
            }
        }
    }
    let arch = match format {
        LtoIrFormat::NvvmContainer => super::u16_at(bytes, NVVM_ARCH_OFFSET)
            .filter(|tenfold| *tenfold >= 100 && tenfold % 10 == 0)
            .map(|tenfold| u32::from(tenfold / 10)),
        LtoIrFormat::Bitcode | LtoIrFormat::BitcodeWrapper => None,
    };
    Ok(LtoIr { format, arch })
}
