//! Cache keys: blake3 over every input that can change a compile's result. Which header files
//! a program reads, and so keys on, is the include search's to say
//! ([`Program::dependencies`](crate::compile::Program::dependencies)).

use std::time::SystemTime;

use crate::digest::hex;

/// The version of the key and entry format: entries of another schema are never found.
pub(crate) const SCHEMA: &[u8] = b"cudyn-cache-6";

/// A cache key: the blake3 hash of a compile's inputs, cudyn's one [`Digest`](crate::Digest)
/// type under the name the cache gives it.
pub use crate::digest::Digest as Key;

/// Builds a key from fields, each length-prefixed so that no two lists of fields hash alike.
///
/// The fields are gathered and hashed in blocks: a key is dozens of small fields (lengths,
/// options, names), and blake3 costs about as much per call as per kilobyte for inputs that
/// small. The key is the same as hashing each field as it comes.
#[derive(Debug)]
pub struct KeyHasher {
    /// What is hashed so far, when fields have outgrown [`KeyHasher::BLOCK`] at least once.
    hashed: Option<blake3::Hasher>,
    pending: Vec<u8>,
}

impl KeyHasher {
    /// The bytes gathered before they are hashed (a large source goes straight through).
    const BLOCK: usize = 16 << 10;

    /// A key for results of kind `purpose` ("nvrtc", "nvjitlink").
    pub fn new(purpose: &str) -> Self {
        let mut hasher = KeyHasher {
            hashed: None,
            pending: Vec::with_capacity(1024),
        };
        hasher.field(SCHEMA).field(purpose.as_bytes());
        hasher
    }

    /// Adds one field.
    pub fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.pending
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        if self.pending.len() + bytes.len() <= Self::BLOCK {
            self.pending.extend_from_slice(bytes);
        } else {
            let hasher = self.hashed.get_or_insert_with(blake3::Hasher::new);
            hasher.update(&self.pending).update(bytes);
            self.pending.clear();
        }
        self
    }

    /// Adds a list of text fields, with their count.
    pub fn fields<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        FieldSink::fields(self, items)
    }

    /// The key.
    pub fn finish(&self) -> Key {
        let hash = match &self.hashed {
            None => blake3::hash(&self.pending),
            Some(hashed) => hashed.clone().update(&self.pending).finalize(),
        };
        Key(*hash.as_bytes())
    }
}

/// Where length-prefixed fields go: a [`KeyHasher`], which hashes them, or [`Fields`], which
/// keeps their bytes. The encoding is the same, so one function can write a program's inputs to
/// either.
pub(crate) trait FieldSink {
    /// Adds one field.
    fn field(&mut self, bytes: &[u8]) -> &mut Self;

    /// Adds a list of text fields, with their count.
    fn fields<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        self.field(&(items.len() as u64).to_le_bytes());
        for item in items {
            self.field(item.as_ref().as_bytes());
        }
        self
    }
}

impl FieldSink for KeyHasher {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        KeyHasher::field(self, bytes)
    }
}

/// Fields kept as their bytes, in the encoding [`KeyHasher`] hashes. A program's inputs are
/// kept so: hashed into its key when the key is needed, and compared byte for byte with those an
/// entry was made from where a new process's first lookup would otherwise hash them (its first
/// use of blake3, CPU detection included, on the path of every warm start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields(pub(crate) Vec<u8>);

impl FieldSink for Fields {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }
}

impl Fields {
    /// No fields yet, room for `bytes` of them.
    pub(crate) fn with_capacity(bytes: usize) -> Fields {
        Fields(Vec::with_capacity(bytes))
    }

    /// Adds a list of texts with their count, each text given as the pieces it is made of, end
    /// to end: the bytes [`FieldSink::fields`] adds for the texts themselves, without building
    /// them. `each` hands every text's pieces to the function it is given.
    pub(crate) fn texts_of_pieces(
        &mut self,
        each: impl FnOnce(&mut dyn FnMut(&[&str])),
    ) -> &mut Self {
        let count_at = self.0.len() + 8;
        self.field(&0u64.to_le_bytes());
        let mut count = 0u64;
        each(&mut |pieces| {
            let len: usize = pieces.iter().map(|piece| piece.len()).sum();
            self.0.extend_from_slice(&(len as u64).to_le_bytes());
            for piece in pieces {
                self.0.extend_from_slice(piece.as_bytes());
            }
            count += 1;
        });
        self.0[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        self
    }

    /// A short name for these fields, for a file name: 32 hexadecimal digits of their xxh3-128
    /// hash. Not a key: whatever is found under it is compared with the fields themselves, or
    /// checked like the file it stands for.
    pub(crate) fn name(&self) -> String {
        hex(&xxhash_rust::xxh3::xxh3_128(&self.0).to_le_bytes())
    }
}

/// The key of an NVRTC compile: the compiler's `identity` (see `ResolvedCompiler`) and the
/// program's own `inputs`, as [`Fields`] keeps them.
pub(crate) fn nvrtc_key(identity: &Key, inputs: &[u8]) -> Key {
    KeyHasher::new("nvrtc")
        .field(&identity.0)
        .field(inputs)
        .finish()
}

/// Adds a library file's identity (path, size, modification time) to the key.
pub(crate) fn add_library(hasher: &mut KeyHasher, file: &crate::sys::LibraryFile) {
    hasher
        .field(file.path.as_os_str().as_encoded_bytes())
        .field(&file.size.to_le_bytes())
        .field(&nanos(file.modified).to_le_bytes());
}

fn nanos(time: SystemTime) -> u128 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_the_hash_of_its_fields_whatever_their_sizes() {
        let small = [b"x".to_vec(), vec![7; 300]];
        let large = [
            vec![1; KeyHasher::BLOCK - 20],
            vec![2; 3 * KeyHasher::BLOCK],
            b"y".to_vec(),
        ];
        for fields in [&small[..], &large[..]] {
            let mut hasher = KeyHasher::new("test");
            let mut expected = blake3::Hasher::new();
            for field in [SCHEMA, b"test"] {
                expected
                    .update(&(field.len() as u64).to_le_bytes())
                    .update(field);
            }
            for field in fields {
                hasher.field(field);
                expected
                    .update(&(field.len() as u64).to_le_bytes())
                    .update(field);
            }
            assert_eq!(hasher.finish(), Key(*expected.finalize().as_bytes()));
            // Finishing leaves the hasher as it was.
            assert_eq!(hasher.finish(), hasher.finish());
        }
    }
}
