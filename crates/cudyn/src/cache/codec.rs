//! The binary fields of the cache's files (entries and remembered toolchains): little-endian
//! `u64`s and length-prefixed byte strings, read back without trusting a length.
//!
//! Both kinds of file are read on every warm start, so they share this code: a second format
//! would be a second body of code for a new process to run for the first time.

/// Appends fields to a file's bytes.
#[derive(Default)]
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    pub(super) fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    pub(super) fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    /// `Some` as 1 and the value, `None` as 0.
    pub(super) fn optional<T>(&mut self, value: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match value {
            Some(value) => {
                self.u64(1);
                write(self, value);
            }
            None => self.u64(0),
        }
    }
}

/// Reads fields from the front of a file's bytes; `None` when they run out or do not read.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }

    pub(super) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u64()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(head)
    }

    pub(super) fn text(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    /// What [`Writer::optional`] wrote: `Some(None)` for none, `None` when unreadable.
    pub(super) fn optional<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        match self.u64()? {
            0 => Some(None),
            1 => read(self).map(Some),
            _ => None,
        }
    }

    /// A count, then that many items; the count is bounded by the bytes left, so a damaged count
    /// cannot ask for a huge allocation.
    pub(super) fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        let count = usize::try_from(self.u64()?).ok()?;
        if count > self.0.len() {
            return None;
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Some(items)
    }
}

/// The checksum sealing a file: 16 bytes at its end, the xxh3-128 hash of everything before.
///
/// It finds damage (a file cut short, a flipped bit, bytes of another file), not a deliberate
/// change: the cache's folder is the user's alone ([`crate::cache`] refuses any other), and
/// anyone who can write there could seal what they write. xxh3 needs no detection of the CPU's
/// features and hashes the code of an entry several times faster than blake3, which a warm
/// start would otherwise run over every byte of it; blake3 stays for the keys, which must not
/// collide.
pub(super) const CHECKSUM: usize = 16;

fn checksum(body: &[u8]) -> [u8; CHECKSUM] {
    xxhash_rust::xxh3::xxh3_128(body).to_le_bytes()
}

/// The bytes before a file's checksum, when `bytes` end with the checksum of what precedes it.
pub(super) fn unsealed(bytes: &[u8]) -> Option<&[u8]> {
    let (body, sealed_with) = bytes.split_at(bytes.len().checked_sub(CHECKSUM)?);
    (checksum(body) == sealed_with).then_some(body)
}

/// `body` followed by its checksum.
pub(super) fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let checksum = checksum(&body);
    body.extend_from_slice(&checksum);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_a_short_or_lying_length_does_not_read() {
        let mut writer = Writer::default();
        writer.u64(7);
        writer.text("name");
        writer.optional(Some(3u64), Writer::u64);
        writer.optional(None::<u64>, Writer::u64);
        let bytes = writer.0;
        let mut reader = Reader(&bytes);
        assert_eq!(reader.u64(), Some(7));
        assert_eq!(reader.text().as_deref(), Some("name"));
        assert_eq!(reader.optional(Reader::u64), Some(Some(3)));
        assert_eq!(reader.optional(Reader::u64), Some(None));
        assert!(reader.0.is_empty());
        for len in 0..bytes.len() {
            let mut reader = Reader(&bytes[..len]);
            let read = (|| Some((reader.u64()?, reader.text()?, reader.optional(Reader::u64)?)))();
            assert!(len >= 8 + 8 + 4 + 16 || read.is_none(), "{len}");
        }
        let lying = u64::MAX.to_le_bytes();
        assert_eq!(Reader(&lying).bytes(), None);
        assert_eq!(Reader(&lying).list(Reader::u64), None);
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
