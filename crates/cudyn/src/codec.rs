//! The one binary encoding of cudyn's own bytes: the compile cache's files (entries and remembered
//! toolchains) and the compile workers' messages.
//!
//! **Fields.** Numbers are little-endian: `u8`, `u64`. A byte string or a text is its length (a
//! `u64`) and its bytes; a path is its bytes as the operating system has them; a list is its
//! count (a `u64`) and its items; an optional value is a `u64` 0 (none) or 1 followed by the
//! value; a switch is a `u8` 0 or 1. Nothing else: each format keeps its own magic, tags and
//! order of fields where it is defined (`cache::entry`, `cache::resolved`, `workers::wire`).
//!
//! **Reading trusts nothing.** Every read checks that its bytes are there; a length or a count
//! larger than the bytes left is refused before anything is allocated for it, so damaged or
//! hostile bytes cost no more than their own size; a failure says what is wrong ([`Malformed`])
//! without allocating or formatting, because the cache reads its files on every warm start.
//!
//! **The seal.** A file or a message is sealed by 16 bytes at its end, the xxh3-128 hash of
//! everything before ([`seal`], [`unsealed`]). It finds damage (a file cut short, a flipped bit,
//! the bytes of another file, a pipe's message cut off), not a deliberate change: whoever can
//! write the cache's folder (the user's alone, see [`crate::cache`]) or a worker's pipe could seal
//! what they write. xxh3 needs no detection of the CPU's features and hashes several times faster
//! than blake3, which a warm start would otherwise run over every byte of the code it loads;
//! blake3 stays for the names that must not collide ([`crate::Digest`]).
//!
//! A leaf: it imports nothing of cudyn's.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Fields appended to bytes; `.0` is what was written.
#[derive(Debug, Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, value: u8) -> &mut Self {
        self.0.push(value);
        self
    }

    pub(crate) fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A switch: 1 or 0.
    pub(crate) fn bool(&mut self, value: bool) -> &mut Self {
        self.u8(u8::from(value))
    }

    /// The length, then the bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.u64(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    pub(crate) fn text(&mut self, text: &str) -> &mut Self {
        self.bytes(text.as_bytes())
    }

    /// A path's bytes, as the operating system has them.
    pub(crate) fn path(&mut self, path: &Path) -> &mut Self {
        self.bytes(path.as_os_str().as_bytes())
    }

    /// The count, then each item as `write` writes it.
    pub(crate) fn list<T>(
        &mut self,
        items: &[T],
        mut write: impl FnMut(&mut Self, &T),
    ) -> &mut Self {
        self.u64(items.len() as u64);
        for item in items {
            write(self, item);
        }
        self
    }

    /// `Some` as 1 and the value as `write` writes it, `None` as 0.
    pub(crate) fn optional<T>(
        &mut self,
        value: Option<T>,
        write: impl FnOnce(&mut Self, T),
    ) -> &mut Self {
        match value {
            Some(value) => {
                self.u64(1);
                write(self, value);
            }
            None => {
                self.u64(0);
            }
        }
        self
    }
}

/// What is wrong with bytes that do not read; no allocation, no formatting until shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// The bytes end inside a field.
    EndsEarly,
    /// A length or a count claims more than the bytes left.
    TooLong,
    /// A byte string has another length than its field's.
    WrongLength,
    /// A text is not UTF-8.
    NotUtf8,
    /// A field holds a value its format does not know: the field's name.
    Unknown(&'static str),
    /// Bytes are left after the last field.
    Trailing,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::EndsEarly => f.write_str("it ends inside a field"),
            Malformed::TooLong => f.write_str("a length or a count exceeds the bytes left"),
            Malformed::WrongLength => f.write_str("a field has the wrong length"),
            Malformed::NotUtf8 => f.write_str("a text is not UTF-8"),
            Malformed::Unknown(field) => write!(f, "it holds an unknown {field}"),
            Malformed::Trailing => f.write_str("bytes follow its last field"),
        }
    }
}

impl std::error::Error for Malformed {}

/// Fields read from the front of bytes; `.0` is what is left.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    /// The next `count` bytes, unprefixed.
    fn take(&mut self, count: usize) -> Result<&'a [u8], Malformed> {
        if count > self.0.len() {
            return Err(Malformed::EndsEarly);
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(taken)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        let (&first, rest) = self.0.split_first().ok_or(Malformed::EndsEarly)?;
        self.0 = rest;
        Ok(first)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        let (head, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or(Malformed::EndsEarly)?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    /// What [`Writer::bool`] wrote.
    pub(crate) fn bool(&mut self) -> Result<bool, Malformed> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed::Unknown("switch")),
        }
    }

    /// A length or a count: no more than the bytes left, each item taking a byte at least.
    pub(crate) fn count(&mut self) -> Result<usize, Malformed> {
        usize::try_from(self.u64()?)
            .ok()
            .filter(|&count| count <= self.0.len())
            .ok_or(Malformed::TooLong)
    }

    /// What [`Writer::bytes`] wrote, in place.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.count()?;
        self.take(len)
    }

    /// What [`Writer::bytes`] wrote of exactly `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        self.bytes()?.try_into().map_err(|_| Malformed::WrongLength)
    }

    /// What [`Writer::text`] wrote, in place.
    pub(crate) fn str(&mut self) -> Result<&'a str, Malformed> {
        std::str::from_utf8(self.bytes()?).map_err(|_| Malformed::NotUtf8)
    }

    /// What [`Writer::text`] wrote.
    pub(crate) fn text(&mut self) -> Result<String, Malformed> {
        self.str().map(str::to_owned)
    }

    /// What [`Writer::path`] wrote.
    pub(crate) fn path(&mut self) -> Result<PathBuf, Malformed> {
        Ok(PathBuf::from(OsStr::from_bytes(self.bytes()?)))
    }

    /// What [`Writer::list`] wrote: the count, bounded by the bytes left so that a damaged count
    /// cannot ask for a huge allocation, then each item as `item` reads it.
    pub(crate) fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Vec<T>, Malformed> {
        let count = self.count()?;
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// What [`Writer::optional`] wrote.
    pub(crate) fn optional<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, Malformed>,
    ) -> Result<Option<T>, Malformed> {
        match self.u64()? {
            0 => Ok(None),
            1 => read(self).map(Some),
            _ => Err(Malformed::Unknown("presence flag")),
        }
    }

    /// Fails unless every byte was read.
    pub(crate) fn end(&self) -> Result<(), Malformed> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(Malformed::Trailing),
        }
    }
}

/// The length of the checksum that seals bytes.
pub(crate) const CHECKSUM: usize = 16;

/// The checksum of `body`: what [`seal`] appends.
pub(crate) fn checksum(body: &[u8]) -> [u8; CHECKSUM] {
    xxhash_rust::xxh3::xxh3_128(body).to_le_bytes()
}

/// The bytes before the checksum, when `bytes` end with the checksum of what precedes it.
pub(crate) fn unsealed(bytes: &[u8]) -> Option<&[u8]> {
    let (body, sealed_with) = bytes.split_at(bytes.len().checked_sub(CHECKSUM)?);
    (checksum(body) == sealed_with).then_some(body)
}

/// `body` followed by its checksum.
pub(crate) fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let checksum = checksum(&body);
    body.extend_from_slice(&checksum);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written() -> Vec<u8> {
        let mut writer = Writer::default();
        writer
            .u64(7)
            .u8(200)
            .bool(true)
            .text("name")
            .path(Path::new("/a/b"))
            .list(&["x", "yz"], |w, t| {
                w.text(t);
            })
            .optional(Some(3u64), |w, v| {
                w.u64(v);
            })
            .optional(None::<u64>, |w, v| {
                w.u64(v);
            })
            .bytes(&[9; 4]);
        writer.0
    }

    fn read(reader: &mut Reader) -> Result<(u64, u8, bool, String, PathBuf), Malformed> {
        let fields = (
            reader.u64()?,
            reader.u8()?,
            reader.bool()?,
            reader.text()?,
            reader.path()?,
        );
        assert_eq!(reader.list(Reader::text)?, ["x", "yz"]);
        assert_eq!(reader.optional(Reader::u64)?, Some(3));
        assert_eq!(reader.optional(Reader::u64)?, None);
        assert_eq!(reader.array::<4>()?, [9; 4]);
        reader.end()?;
        Ok(fields)
    }

    #[test]
    fn fields_round_trip() {
        let bytes = written();
        let fields = read(&mut Reader(&bytes)).unwrap();
        assert_eq!(fields, (7, 200, true, "name".into(), PathBuf::from("/a/b")));
    }

    #[test]
    fn every_truncation_fails_and_says_why() {
        let bytes = written();
        for len in 0..bytes.len() {
            let error = read(&mut Reader(&bytes[..len])).unwrap_err();
            assert!(
                matches!(error, Malformed::EndsEarly | Malformed::TooLong),
                "{len}: {error}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(read(&mut Reader(&longer)), Err(Malformed::Trailing));
    }

    #[test]
    fn lying_lengths_counts_and_values_are_refused_before_allocating() {
        let lying = u64::MAX.to_le_bytes();
        assert_eq!(Reader(&lying).bytes(), Err(Malformed::TooLong));
        assert_eq!(Reader(&lying).list(Reader::u64), Err(Malformed::TooLong));
        assert_eq!(
            Reader(&2u64.to_le_bytes()).optional(Reader::u64),
            Err(Malformed::Unknown("presence flag"))
        );
        assert_eq!(Reader(&[2]).bool(), Err(Malformed::Unknown("switch")));
        let mut not_utf8 = Writer::default();
        not_utf8.bytes(&[0xff, 0xfe]);
        assert_eq!(Reader(&not_utf8.0).text(), Err(Malformed::NotUtf8));
        assert_eq!(
            Reader(&not_utf8.0).array::<3>(),
            Err(Malformed::WrongLength)
        );
        assert_eq!(
            Malformed::Unknown("output").to_string(),
            "it holds an unknown output"
        );
    }

    #[test]
    fn a_sealed_body_reads_back_and_any_flipped_bit_or_truncation_does_not() {
        let sealed = seal(b"some body".to_vec());
        assert_eq!(unsealed(&sealed), Some(&b"some body"[..]));
        for len in 0..sealed.len() {
            assert_eq!(unsealed(&sealed[..len]), None, "{len}");
        }
        for bit in 0..sealed.len() * 8 {
            let mut damaged = sealed.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(unsealed(&damaged), None, "{bit}");
        }
    }
}
