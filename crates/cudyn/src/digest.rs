//! The one 32-byte content name of cudyn: a blake3 hash.
//!
//! Three things are named by one: a compile cache entry, by the hash of a compile's inputs
//! ([`cache::Key`](crate::cache::Key), which is this type); a loaded image, by the hash of its
//! bytes; and a load the process shares, by the hash of the image and of every option of the
//! load. blake3 is used where names must not collide; a faster hash seals files and messages
//! against damage (see `codec`).
//!
//! A leaf: it imports nothing of cudyn's.

use std::fmt;

/// A blake3 hash: 32 bytes that name content. [`cache::Key`](crate::cache::Key) is this type.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub(crate) [u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    /// The digest's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The digest as 64 hexadecimal digits (lower case): a cache entry's file name.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    /// The digest written as 64 hexadecimal digits (either case); `None` for any other text.
    pub fn from_hex(text: &str) -> Option<Digest> {
        Some(Digest(from_hex(text)?.try_into().ok()?))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.hex())
    }
}

/// `bytes` as lower-case hexadecimal digits, two per byte.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    text
}

/// The bytes of hexadecimal digits (either case); `None` for anything else.
fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let text = text.as_bytes();
    text.len().is_multiple_of(2).then_some(())?;
    text.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_blake3_and_round_trips_through_hex() {
        let digest = Digest::of(b"x");
        assert_eq!(digest.as_bytes(), blake3::hash(b"x").as_bytes());
        assert_eq!(Digest::from_hex(&digest.hex()), Some(digest));
        assert_eq!(Digest::from_hex(&digest.hex().to_uppercase()), Some(digest));
        assert_eq!(Digest::from_hex("zz"), None);
        assert_eq!(Digest::from_hex(&digest.hex()[2..]), None);
        assert_eq!(Digest::from_hex(&format!("{}00", digest.hex())), None);
        assert_eq!(hex(&[0, 0x9f, 0xa0]), "009fa0");
        assert_eq!(from_hex("009FA0"), Some(vec![0, 0x9f, 0xa0]));
        assert_eq!(from_hex("0g"), None);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(
            format!("{:?}", Digest([0; 32])),
            format!("Digest({})", "0".repeat(64))
        );
    }
}
