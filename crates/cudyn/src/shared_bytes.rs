//! Bytes shared without copying: a range of one buffer that several owners hold.
//!
//! A compile-cache hit reads an entry file whole, then hands on its code (and keeps the
//! compiler's record) as ranges of that same buffer: a process's first hit would otherwise copy
//! them into fresh allocations, touching memory for the first time on the path every warm start
//! waits for.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// A range of a shared buffer; derefs to its bytes. Cloning it shares the buffer.
#[derive(Clone)]
pub(crate) struct SharedBytes {
    buffer: Arc<Vec<u8>>,
    range: Range<usize>,
}

impl SharedBytes {
    /// `part`, a slice of `buffer`'s bytes, shared with the buffer; `None` when `part` is not
    /// a slice of those very bytes.
    pub(crate) fn slice_of(buffer: &Arc<Vec<u8>>, part: &[u8]) -> Option<SharedBytes> {
        let start = (part.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
        let range = start..start.checked_add(part.len())?;
        let within = buffer.get(range.clone())?;
        (within.as_ptr() == part.as_ptr()).then(|| SharedBytes {
            buffer: Arc::clone(buffer),
            range,
        })
    }
}

/// No bytes.
impl Default for SharedBytes {
    fn default() -> SharedBytes {
        SharedBytes::from(Vec::new())
    }
}

impl From<Vec<u8>> for SharedBytes {
    /// All of `bytes`, without a copy.
    fn from(bytes: Vec<u8>) -> SharedBytes {
        let range = 0..bytes.len();
        SharedBytes {
            buffer: Arc::new(bytes),
            range,
        }
    }
}

impl From<&[u8]> for SharedBytes {
    fn from(bytes: &[u8]) -> SharedBytes {
        SharedBytes::from(bytes.to_vec())
    }
}

impl Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // The range was checked against the buffer, which never changes, when it was made.
        &self.buffer[self.range.clone()]
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &SharedBytes) -> bool {
        **self == **other
    }
}

impl Eq for SharedBytes {}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_shares_its_buffer_and_compares_by_its_bytes() {
        let buffer = Arc::new(b"header|code|checksum".to_vec());
        let code = SharedBytes::slice_of(&buffer, &buffer[7..11]).unwrap();
        assert_eq!(&*code, b"code");
        assert_eq!(Arc::strong_count(&buffer), 2);
        assert_eq!(code, SharedBytes::from(b"code".to_vec()));
        assert_ne!(code, SharedBytes::from(&b"cod"[..]));
        // Equal bytes elsewhere are not a slice of the buffer.
        let elsewhere = b"header|code|checksum".to_vec();
        assert!(SharedBytes::slice_of(&buffer, &elsewhere[7..11]).is_none());
        // An empty field of the buffer is an empty range of it.
        let empty = SharedBytes::slice_of(&buffer, &buffer[11..11]).unwrap();
        assert!(empty.is_empty());
        assert_eq!(format!("{code:?}"), "4 bytes");
        assert!(SharedBytes::from(Vec::new()).is_empty());
    }
}
