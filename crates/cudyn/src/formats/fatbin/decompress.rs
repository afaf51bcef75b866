//! A fatbin entry's code: its payload as stored, or decompressed (zstd or LZ4) to the size its
//! header declares, within bounds that keep a "compression bomb" from exhausting memory.

use std::borrow::Cow;
use std::io::Read;

use object::LittleEndian as LE;

use super::{Compression, RawEntry};
use crate::parse_error::{Fault, Problem};

/// Most bytes one zstd entry may decompress to per compressed byte. zstd reaches about 20x on
/// real device code; the cap keeps a hostile "compression bomb" from exhausting memory.
const MAX_RATIO: u64 = 1024;

/// LZ4 cannot do better than about 255 to 1 (a match length grows by 255 per byte).
const MAX_LZ4_RATIO: u64 = 256;

/// A zstd window this small is accepted whatever the content size.
const MIN_WINDOW: u64 = 1 << 17;

impl RawEntry<'_> {
    /// The payload as the code it holds: decompressed (bounded) when compressed.
    pub(crate) fn code(&self) -> Result<Cow<'_, [u8]>, Fault> {
        let expected = self.header.decompressed_size.get(LE);
        let stream = || {
            // The payload is padded; the compressed stream is the first `compressed_size` bytes.
            let size = self.header.compressed_size.get(LE);
            usize::try_from(size)
                .ok()
                .filter(|&size| size > 0 && size <= self.payload.len())
                .map(|size| &self.payload[..size])
                .ok_or_else(|| {
                    damaged(format!(
                        "its compressed size {size} does not fit its {}-byte payload",
                        self.payload.len()
                    ))
                })
        };
        match self.header.compression().map_err(Fault::from)? {
            Compression::None => Ok(Cow::Borrowed(self.payload)),
            Compression::Zstd => zstd(stream()?, expected).map(Cow::Owned),
            Compression::Lz4 => lz4(stream()?, expected).map(Cow::Owned),
        }
    }
}

/// A compressed stream that does not give what its header declares.
fn damaged(message: String) -> Fault {
    Fault::new(Problem::Compression, message)
}

/// Refuses to decompress `stream` to `expected` bytes when that is more than `ratio` times its
/// size.
fn check_ratio(stream: &[u8], expected: u64, ratio: u64) -> Result<(), Fault> {
    let limit = (stream.len() as u64).saturating_mul(ratio);
    if expected > limit {
        return Err(damaged(format!(
            "declares {expected} decompressed bytes from {} compressed ones, more than cudyn \
             believes",
            stream.len()
        )));
    }
    Ok(())
}

/// Decompresses a zstd stream that should give `expected` bytes, refusing to produce more than
/// [`MAX_RATIO`] times the stream's size.
fn zstd(stream: &[u8], expected: u64) -> Result<Vec<u8>, Fault> {
    check_ratio(stream, expected, MAX_RATIO)?;
    // The decoder allocates the window the frame header asks for; a real frame's window is no
    // bigger than its content, so a larger one is damage, refused before it costs memory.
    let header_damaged =
        |error: &dyn std::fmt::Display| damaged(format!("zstd frame header is damaged: {error}"));
    let (frame, _) = ruzstd::frame::read_frame_header(stream).map_err(|e| header_damaged(&e))?;
    let window = frame.header.window_size().map_err(|e| header_damaged(&e))?;
    if window > expected.max(MIN_WINDOW) {
        return Err(damaged(format!(
            "zstd window of {window} bytes is larger than the {expected} bytes it should give"
        )));
    }
    let stream_damaged =
        |error: &dyn std::fmt::Display| damaged(format!("zstd stream is damaged: {error}"));
    let mut source = stream;
    let decoder = ruzstd::StreamingDecoder::new(&mut source).map_err(|e| stream_damaged(&e))?;
    let mut out = Vec::new();
    decoder
        .take(expected.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| stream_damaged(&e))?;
    expect_len(out, expected)
}

/// Decompresses an LZ4 block (the framing of nvcc's `fatbinary` and of nvFatbin: one raw block,
/// no frame header) that should give `expected` bytes. The output is allocated whole before
/// decoding, so the bound is LZ4's own largest ratio rather than [`MAX_RATIO`].
fn lz4(stream: &[u8], expected: u64) -> Result<Vec<u8>, Fault> {
    check_ratio(stream, expected, MAX_LZ4_RATIO)?;
    let size =
        usize::try_from(expected).map_err(|_| damaged("too large to decompress".to_string()))?;
    let out = lz4_flex::block::decompress(stream, size)
        .map_err(|error| damaged(format!("LZ4 block is damaged: {error}")))?;
    expect_len(out, expected)
}

/// `out`, when it is the `expected` length.
fn expect_len(out: Vec<u8>, expected: u64) -> Result<Vec<u8>, Fault> {
    if out.len() as u64 != expected {
        return Err(damaged(format!(
            "decompressed to {} bytes, but the header says {expected}",
            out.len()
        )));
    }
    Ok(out)
}
