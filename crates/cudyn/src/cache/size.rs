//! Sizes as people write them (`200M`), for the cache's cap.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{DEFAULT_MAX_BYTES, MAX_BYTES_ENV};

/// Why a text is not a size ([`parse_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Not a number of bytes, with or without a suffix.
    #[error("`{0}` is not a size: write bytes (1048576) or with K, M or G (200M)")]
    NotASize(String),
    /// More bytes than a 64-bit count holds.
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// The size cap [`MAX_BYTES_ENV`] sets, read by [`parse_bytes`]; the default when unset, and
/// when it does not read (a warning printed once per process).
pub(super) fn max_bytes_from_environment() -> u64 {
    let Some(value) = std::env::var_os(MAX_BYTES_ENV) else {
        return DEFAULT_MAX_BYTES;
    };
    let parsed = value
        .to_str()
        .ok_or_else(|| SizeError::NotASize(value.to_string_lossy().into_owned()))
        .and_then(parse_bytes);
    parsed.unwrap_or_else(|problem| {
        static WARNED: AtomicBool = AtomicBool::new(false);
        if !WARNED.swap(true, Ordering::Relaxed) {
            crate::warn::warning!(
                "cudyn: warning: {MAX_BYTES_ENV}: {problem}; the cache keeps its default cap of \
                 {} GiB",
                DEFAULT_MAX_BYTES >> 30
            );
        }
        DEFAULT_MAX_BYTES
    })
}

/// A size in bytes as people write it: a number of bytes (`1048576`), or with a binary suffix
/// `K`, `M` or `G` (`200M` is 200 MiB), either case; surrounding blanks are ignored. What
/// [`MAX_BYTES_ENV`] and `cudyn cache prune --max-bytes` take.
///
/// ```
/// assert_eq!(cudyn::cache::parse_bytes("200M"), Ok(200 << 20));
/// assert!(cudyn::cache::parse_bytes("two hundred").is_err());
/// ```
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let trimmed = text.trim();
    let (digits, shift) = match trimmed.char_indices().last() {
        Some((at, 'k' | 'K')) => (&trimmed[..at], 10),
        Some((at, 'm' | 'M')) => (&trimmed[..at], 20),
        Some((at, 'g' | 'G')) => (&trimmed[..at], 30),
        _ => (trimmed, 0),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| SizeError::NotASize(text.to_owned()))?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| SizeError::TooLarge(text.to_owned()))
}
