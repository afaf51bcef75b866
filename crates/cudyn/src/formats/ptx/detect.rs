//! What is PTX text: bytes read as text, and detection by the `.version` and `.target`
//! directives of its first lines.

use super::tokens;

/// Whether `bytes` are PTX text: printable text (a trailing NUL, as NVRTC writes, allowed) whose
/// lines include a `.version` and a `.target` directive.
pub(crate) fn looks_like_ptx(bytes: &[u8]) -> bool {
    recognized_text(bytes).is_some()
}

/// The text of `bytes` (without trailing NULs) when they [look like PTX](looks_like_ptx): read
/// as text once, for detection, and handed to [`validate_text`](super::validate_text), which then need not read it so
/// again.
pub(crate) fn recognized_text(bytes: &[u8]) -> Option<&str> {
    let text = text(bytes)?;
    let directive = |line: &str, name: &str| {
        line.strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(char::is_whitespace))
    };
    // One pass for both: they are the first lines of PTX, and the text is read no further.
    let (mut version, mut target) = (false, false);
    let mut rest = text;
    while !rest.is_empty() {
        // The lines of `str::lines`, each found with `find`, sixteen bytes at a time, and its
        // start read as bytes: with `lines` and `trim_start`, this took longer than the check
        // of the whole text's bytes.
        let line = match tokens::find(rest.as_bytes(), b'\n') {
            Some(end) => {
                let line = rest.get(..end).unwrap_or_default();
                rest = rest.get(end + 1..).unwrap_or_default();
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => std::mem::take(&mut rest),
        };
        // The line without its leading blanks: ASCII ones passed over as bytes, any other by
        // `trim_start`. Only a line that then starts with `.` can be either directive.
        let blank = |b: &u8| matches!(b, b'\t' | b'\x0b' | b'\x0c' | b'\r' | b' ');
        let start = line.bytes().position(|b| !blank(&b));
        let line = match start.and_then(|start| Some((start, *line.as_bytes().get(start)?))) {
            Some((start, b'.')) => line.get(start..).unwrap_or(line),
            Some((_, b)) if !b.is_ascii() => line.trim_start(),
            _ => continue,
        };
        version |= directive(line, ".version");
        target |= directive(line, ".target");
        if version && target {
            return Some(text);
        }
    }
    None
}

/// The text of a PTX image: valid UTF-8 up to trailing NULs, with no NUL inside.
pub(super) fn text(bytes: &[u8]) -> Option<&str> {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let bytes = &bytes[..end];
    if is_ascii_without_nul(bytes) {
        // SAFETY: every byte is ASCII, as just checked, and ASCII is UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    let text = std::str::from_utf8(bytes).ok()?;
    (!has_nul(text.as_bytes())).then_some(text)
}

/// Whether every byte of `bytes` is ASCII other than NUL: what PTX nearly always is, told in one
/// pass where UTF-8 validation and a search for a NUL take two, each slower.
#[cfg(target_arch = "x86_64")]
fn is_ascii_without_nul(bytes: &[u8]) -> bool {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, the one feature the function requires.
        unsafe { is_ascii_without_nul_avx2(bytes) }
    } else {
        // SAFETY: every x86-64 processor has SSE2, the one feature the function requires.
        unsafe { is_ascii_without_nul_sse2(bytes) }
    }
}

/// [`is_ascii_without_nul`] without SSE2. `b - 1` wraps to 0xff for 0 alone, so the high bit of
/// `(b - 1) | b` is set for 0 and for the bytes beyond ASCII. Each loop over 64 bytes has no
/// early exit, which lets the compiler test many bytes at once.
#[cfg(not(target_arch = "x86_64"))]
fn is_ascii_without_nul(bytes: &[u8]) -> bool {
    let outside = |bytes: &[u8]| {
        bytes
            .iter()
            .fold(0, |seen, &b| seen | b.wrapping_sub(1) | b)
    };
    let (blocks, tail) = bytes.as_chunks::<64>();
    blocks.iter().all(|block| outside(block) < 0x80) && outside(tail) < 0x80
}

/// [`is_ascii_without_nul`] with SSE2: the least and the greatest byte, two instructions for
/// sixteen bytes, with no early exit (PTX is nearly always ASCII, read to its end).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn is_ascii_without_nul_sse2(bytes: &[u8]) -> bool {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_max_epu8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_set_epi64x, _mm_setzero_si128,
    };
    let (blocks, tail) = bytes.as_chunks::<16>();
    let (mut least, mut greatest) = (_mm_set1_epi8(-1), _mm_setzero_si128());
    for block in blocks {
        // Built from the bytes rather than loaded through a pointer: no unsafe code, and the
        // compiler makes it the same one unaligned load.
        let x = u128::from_le_bytes(*block);
        let x = _mm_set_epi64x((x >> 64) as i64, x as i64);
        least = _mm_min_epu8(least, x);
        greatest = _mm_max_epu8(greatest, x);
    }
    // A NUL makes a lane of `least` 0; a byte beyond ASCII sets the high bit of one of
    // `greatest`, which is what the mask collects.
    let nul = _mm_cmpeq_epi8(least, _mm_setzero_si128());
    _mm_movemask_epi8(_mm_or_si128(nul, greatest)) == 0 && tail.iter().all(|&b| b != 0 && b < 0x80)
}

/// [`is_ascii_without_nul_sse2`] with AVX2: 32 bytes to an instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn is_ascii_without_nul_avx2(bytes: &[u8]) -> bool {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256,
    };
    let (blocks, tail) = bytes.as_chunks::<32>();
    let (mut least, mut greatest) = (_mm256_set1_epi8(-1), _mm256_setzero_si256());
    for block in blocks {
        // SAFETY: `block` is 32 bytes to read; the load needs no alignment.
        let x = unsafe { _mm256_loadu_si256(block.as_ptr().cast()) };
        least = _mm256_min_epu8(least, x);
        greatest = _mm256_max_epu8(greatest, x);
    }
    // As in `is_ascii_without_nul_sse2`.
    let nul = _mm256_cmpeq_epi8(least, _mm256_setzero_si256());
    _mm256_movemask_epi8(_mm256_or_si256(nul, greatest)) == 0
        && tail.iter().all(|&b| b != 0 && b < 0x80)
}

/// Whether `bytes` hold a 0. Each loop over 64 bytes has no early exit, which lets the compiler
/// test many bytes at once: several times faster than `memchr` on PTX, which has no NUL.
fn has_nul(bytes: &[u8]) -> bool {
    let (blocks, tail) = bytes.as_chunks::<64>();
    blocks
        .iter()
        .any(|block| block.iter().fold(false, |nul, &b| nul | (b == 0)))
        || tail.contains(&0)
}
