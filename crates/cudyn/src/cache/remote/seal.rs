//! The remote tier's trust: the MAC key, read from its file, and the seal of every value stored in
//! Redis, a keyed blake3 MAC over the entry and the cache key it is stored under.
//!
//! A value is the magic [`MAGIC`], the 32-byte MAC, then an entry file as the disk cache writes
//! it ([`Entry::encode`], sealed by its own checksum). The MAC covers the magic, the cache key and
//! the entry's bytes, so an entry cannot be forged without the key, nor moved to another key.
//! A value that passes the MAC is still decoded with bounded reads and its code checked as every
//! image is before a load ([`accept`]): the key proves who wrote it, not that it is sound.

use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use super::super::entry::Entry;
use super::super::key::Key;
use crate::arch::Arch;
use crate::image::{self, Checked, ImageKind};
use crate::kinds::Output;

/// What every value of this format starts with.
const MAGIC: &[u8; 8] = b"CUDYNRE1";

/// The length of the MAC.
const MAC_BYTES: usize = 32;

/// The blake3 context the MAC key is derived in from the key file's contents.
const CONTEXT: &str = "cudyn 2026 remote compile cache MAC key";

/// The fewest bytes of secret a key file must hold.
pub(crate) const MIN_SECRET_BYTES: usize = 32;

/// The most bytes a key file may hold (it holds a secret, not a document).
const MAX_KEY_FILE_BYTES: u64 = 4096;

/// The key that seals values: derived from a file's secret, never written anywhere.
#[derive(Clone)]
pub(crate) struct MacKey([u8; 32]);

/// Never shown, not even in debug output.
impl std::fmt::Debug for MacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MacKey(..)")
    }
}

impl MacKey {
    /// The key derived from `secret`, at least [`MIN_SECRET_BYTES`] bytes once surrounding
    /// whitespace is trimmed (a file written by `openssl rand -hex 32` or `head -c 32
    /// /dev/urandom` holds enough).
    pub(crate) fn from_secret(secret: &[u8]) -> Result<MacKey, String> {
        let secret = secret.trim_ascii();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "it holds {} bytes of secret, fewer than the {MIN_SECRET_BYTES} needed; write \
                 one with `openssl rand -hex 32`",
                secret.len()
            ));
        }
        Ok(MacKey(blake3::derive_key(CONTEXT, secret)))
    }

    /// The key in the file at `path`: a regular file of at most 4 KiB, which no one but its
    /// owner and group may read or write (anyone who reads it can forge entries every host
    /// runs).
    pub(crate) fn from_file(path: &Path) -> Result<MacKey, String> {
        let file =
            std::fs::File::open(path).map_err(|error| format!("it cannot be read: {error}"))?;
        let metadata = file
            .metadata()
            .map_err(|error| format!("it cannot be read: {error}"))?;
        if !metadata.is_file() {
            return Err("it is not a regular file".into());
        }
        if metadata.mode() & 0o007 != 0 {
            return Err(format!(
                "others may read or write it (mode {:o}); whoever reads it can forge code every \
                 host runs: `chmod 600` it (or 640 for a group of services)",
                metadata.mode() & 0o777
            ));
        }
        let mut secret = Vec::new();
        file.take(MAX_KEY_FILE_BYTES + 1)
            .read_to_end(&mut secret)
            .map_err(|error| format!("it cannot be read: {error}"))?;
        if secret.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(format!("it is longer than {MAX_KEY_FILE_BYTES} bytes"));
        }
        MacKey::from_secret(&secret)
    }

    /// A short public name of the key, which the names of its values in Redis carry: hosts with
    /// different keys use different names, so a rotation starts afresh instead of refusing every
    /// entry, and reveals nothing of the key.
    pub(crate) fn id(&self) -> String {
        crate::digest::hex(&blake3::keyed_hash(&self.0, b"key id").as_bytes()[..8])
    }

    fn mac(&self, key: &Key, entry: &[u8]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        hasher.update(MAGIC).update(key.as_bytes()).update(entry);
        hasher.finalize()
    }

    /// The value that stores `entry`'s file under `key`.
    pub(crate) fn seal(&self, key: &Key, entry: &[u8]) -> Vec<u8> {
        let mut value = Vec::with_capacity(MAGIC.len() + MAC_BYTES + entry.len());
        value.extend_from_slice(MAGIC);
        value.extend_from_slice(self.mac(key, entry).as_bytes());
        value.extend_from_slice(entry);
        value
    }

    /// The entry file in `value`, when its MAC is the one this key makes for `key`.
    fn open<'a>(&self, key: &Key, value: &'a [u8]) -> Option<&'a [u8]> {
        let rest = value.strip_prefix(MAGIC)?;
        if rest.len() < MAC_BYTES {
            return None;
        }
        let (mac, entry) = rest.split_at(MAC_BYTES);
        let mac: [u8; MAC_BYTES] = mac.try_into().ok()?;
        // blake3::Hash compares in constant time.
        (self.mac(key, entry) == blake3::Hash::from(mac)).then_some(entry)
    }
}

/// What a value from Redis is expected to hold: the entry of this key, for this output and
/// architecture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expected {
    pub(crate) key: Key,
    pub(crate) output: Output,
    pub(crate) arch: Arch,
}

/// Why a value from Redis was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its MAC is not this key's for this cache key: written with another key, damaged, or
    /// forged.
    Mac,
    /// Its MAC is right but its contents are not the expected entry: damaged when sealed, of
    /// another key, output or architecture, or code that fails its check.
    Invalid,
}

/// The entry `value` holds, checked: its MAC, its own checksum and format, its key, output and
/// architecture, and its code, checked as every image is before a load (the manifest's own
/// account of that check is not trusted: it is made again here). The toolchain and program
/// inputs the entry carries are dropped: the caller knows its own.
pub(crate) fn accept(mac: &MacKey, expected: &Expected, value: Vec<u8>) -> Result<Entry, Refusal> {
    let file = mac.open(&expected.key, &value).ok_or(Refusal::Mac)?;
    // The entry file ends the value: decoded in place, without a copy of its code.
    let start = value.len() - file.len();
    let mut entry = Entry::decode_from(value, start).ok_or(Refusal::Invalid)?;
    if entry.key != expected.key || entry.output != expected.output || entry.arch != expected.arch {
        return Err(Refusal::Invalid);
    }
    entry.checked = check_code(&entry.code, entry.image_kind())?;
    entry.toolchain = Default::default();
    entry.inputs = Default::default();
    Ok(entry)
}

/// What the check before a load finds in `code`, which must be of `kind`: `None` for code that
/// only a link takes (a relocatable cubin, LTO-IR), checked as a link's input.
fn check_code(code: &[u8], kind: ImageKind) -> Result<Option<Checked>, Refusal> {
    let nobody = String::new;
    let detected = match image::detected_with_text(code, &nobody) {
        Ok(detected) if detected.kind == kind => detected,
        _ => return Err(Refusal::Invalid),
    };
    let digest = image::digest(code);
    match image::validate_loadable(code, detected, Some(&digest), &nobody) {
        Ok(facts) => Ok(Some(Checked { facts, digest })),
        Err(_) => match image::validate_link_input(code, kind, &nobody) {
            Ok(()) => Ok(None),
            Err(_) => Err(Refusal::Invalid),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MacKey {
        MacKey::from_secret(&[7; 40]).unwrap()
    }

    #[test]
    fn a_value_opens_only_with_its_key_under_its_cache_key() {
        let (a, b) = (Key([1; 32]), Key([2; 32]));
        let value = key().seal(&a, b"an entry");
        assert_eq!(key().open(&a, &value), Some(&b"an entry"[..]));
        assert_eq!(key().open(&b, &value), None, "moved to another cache key");
        let other = MacKey::from_secret(&[8; 40]).unwrap();
        assert_eq!(other.open(&a, &value), None, "another key");
        for at in 0..value.len() {
            let mut flipped = value.clone();
            flipped[at] ^= 0x20;
            assert_eq!(key().open(&a, &flipped), None, "byte {at} flipped");
        }
        for len in 0..value.len() {
            assert_eq!(key().open(&a, &value[..len]), None, "cut to {len}");
        }
    }

    /// A real cubin's entry under `key`, as a host would publish it.
    fn published(key: Key) -> Entry {
        let compiled = crate::Program::new("extern \"C\" __global__ void k(int *x) { *x = 1; }")
            .arch(Arch::new(9, 0))
            .cache(false)
            .compile()
            .unwrap();
        let mut entry = crate::cache::entry::tests::sample(key, 0);
        entry.code = compiled.code().to_vec().into();
        entry
    }

    #[test]
    fn only_the_expected_entry_with_sound_code_is_accepted_and_checked_here() {
        let key = Key([3; 32]);
        let expected = Expected {
            key,
            output: Output::Cubin,
            arch: Arch::new(9, 0),
        };
        let good = published(key);
        let accepted = accept(
            &self::key(),
            &expected,
            self::key().seal(&key, &good.encode()),
        );
        let accepted = accepted.expect("the expected entry");
        assert_eq!(accepted.code, good.code);
        assert_eq!(
            accepted.checked,
            Checked::compiler_output(&good.code, ImageKind::Cubin)
        );
        assert!(
            accepted.checked.is_some(),
            "checked here, not taken from the entry"
        );
        assert!(accepted.toolchain.is_empty() && accepted.inputs.is_empty());

        let refused = |entry: Entry| {
            accept(
                &self::key(),
                &expected,
                self::key().seal(&key, &entry.encode()),
            )
            .unwrap_err()
        };
        let ptx = b".version 9.0\n.target sm_90\n.address_size 64\n".to_vec();
        let mut wrong_code = good.clone();
        wrong_code.code = ptx.into();
        assert_eq!(
            refused(wrong_code),
            Refusal::Invalid,
            "PTX said to be a cubin"
        );
        let mut cut = good.clone();
        cut.code = good.code[..good.code.len() / 2].to_vec().into();
        assert_eq!(refused(cut), Refusal::Invalid, "half a cubin");
        assert_eq!(
            refused(published(Key([4; 32]))),
            Refusal::Invalid,
            "another key's entry"
        );
        let mut other_arch = good.clone();
        other_arch.arch = Arch::new(8, 0);
        assert_eq!(refused(other_arch), Refusal::Invalid);
        let mut other_output = good.clone();
        other_output.output = Output::LtoIr;
        assert_eq!(refused(other_output), Refusal::Invalid);
        // Damaged before it was sealed: its own checksum fails.
        let mut damaged = good.encode();
        damaged[40] ^= 1;
        let value = self::key().seal(&key, &damaged);
        assert_eq!(
            accept(&self::key(), &expected, value).unwrap_err(),
            Refusal::Invalid
        );
        let other = MacKey::from_secret(&[b'z'; 40]).unwrap();
        let value = other.seal(&key, &good.encode());
        assert_eq!(
            accept(&self::key(), &expected, value).unwrap_err(),
            Refusal::Mac
        );
    }

    #[test]
    fn a_short_secret_is_refused_and_keys_are_named_apart() {
        let short = MacKey::from_secret(b"  too short  \n").unwrap_err();
        assert!(short.contains("fewer than the 32"), "{short}");
        assert_ne!(key().id(), MacKey::from_secret(&[8; 40]).unwrap().id());
        assert_eq!(key().id().len(), 16);
        assert_eq!(format!("{:?}", key()), "MacKey(..)");
    }

    #[test]
    fn a_key_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, [b'k'; 64]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = MacKey::from_file(&path).unwrap_err();
        assert!(refused.contains("chmod 600"), "{refused}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            MacKey::from_file(&path).unwrap().id(),
            MacKey::from_secret(&[b'k'; 64]).unwrap().id()
        );
        std::fs::write(&path, vec![b'k'; 5000]).unwrap();
        assert!(MacKey::from_file(&path)
            .unwrap_err()
            .contains("longer than"));
        assert!(MacKey::from_file(&dir.path().join("missing")).is_err());
    }
}
