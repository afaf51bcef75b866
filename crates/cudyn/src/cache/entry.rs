//! One cache entry, one file: a manifest and the device code, sealed by a checksum.
//!
//! Layout: the magic `CUDYNKC4`, the manifest's length (u64, little-endian), the manifest, the
//! code's length, the code, then the checksum of everything before it ([`crate::codec`]). A
//! file whose length, checksum or manifest does not check out is never loaded.
//!
//! The manifest of code that passed cudyn's check before a load holds the code's blake3 digest,
//! which the process-wide library registry keys a load on: a hit hands it on with the code, so
//! that neither the hit nor the load hashes the code with blake3 (the checksum, a faster hash,
//! covers the digest and the code alike). `cudyn cache verify` hashes the code again and compares.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::key::Key;
use crate::arch::Arch;
use crate::codec::{self, Malformed, Reader, Writer};
use crate::digest::Digest;
use crate::image::{Checked, Facts, ImageKind};
use crate::kinds::Output;
use crate::param::ParamLayout;
use crate::shared_bytes::SharedBytes;

const MAGIC: &[u8; 8] = b"CUDYNKC5";

/// What every format of entry file starts with, the format's number following.
const MAGIC_FAMILY: &[u8; 7] = b"CUDYNKC";

/// The manifest's value for uninitialized bytes nobody knows.
const UNKNOWN_BYTES: u64 = u64::MAX;

/// Who found what an entry says of its code's check: the facts are trusted by this same cudyn
/// only, so that a release whose check finds more, or refuses more, checks older entries again.
const CHECKED_BY: &str = concat!("cudyn ", env!("CARGO_PKG_VERSION"));

/// A kernel of the cached code, with its parameters' layout when the code records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelRecord {
    pub name: String,
    pub params: Vec<ParamLayout>,
}

/// What only listings of the cache read of an entry, as its manifest holds it: encoded, and
/// decoded by what lists or verifies entries, not by a hit, which has no use for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listing(Vec<u8>);

/// A [`Listing`] decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The program's name (empty for a link).
    pub name: String,
    /// The tools that made the code, e.g. `NVRTC 13.0`.
    pub toolchain: Vec<String>,
    pub kernels: Vec<KernelRecord>,
    pub created: SystemTime,
}

impl Listing {
    /// The encoding of `listed`.
    pub fn of(listed: &Listed) -> Listing {
        let mut encoded = Writer::default();
        encoded
            .text(&listed.name)
            .list(&listed.toolchain, |encoded, tool| {
                encoded.text(tool);
            })
            .list(&listed.kernels, |encoded, kernel| {
                encoded
                    .text(&kernel.name)
                    .list(&kernel.params, |encoded, param| {
                        encoded.u64(param.offset as u64).u64(param.size as u64);
                    });
            });
        let created = listed
            .created
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        encoded.u64(created.as_secs());
        Listing(encoded.0)
    }

    /// What the listing says, or `None` when its encoding does not read whole.
    pub fn read(&self) -> Option<Listed> {
        let mut encoded = Reader(&self.0);
        let listed = Listed {
            name: encoded.text().ok()?,
            toolchain: encoded.list(Reader::text).ok()?,
            kernels: encoded
                .list(|m| {
                    Ok(KernelRecord {
                        name: m.text()?,
                        params: m.list(|m| {
                            Ok(ParamLayout {
                                offset: size(m.u64()?)?,
                                size: size(m.u64()?)?,
                            })
                        })?,
                    })
                })
                .ok()?,
            created: SystemTime::UNIX_EPOCH + Duration::from_secs(encoded.u64().ok()?),
        };
        encoded.end().ok()?;
        Some(listed)
    }
}

/// A size read from a file, when this machine can hold it.
fn size(value: u64) -> Result<usize, Malformed> {
    usize::try_from(value).map_err(|_| Malformed::TooLong)
}

/// What a cache entry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The key it was stored under, checked against the file's name.
    pub key: Key,
    pub output: Output,
    pub arch: Arch,
    /// The compiler's or linker's log.
    pub log: String,
    /// Name expressions with their lowered names.
    pub lowered_names: Vec<(String, String)>,
    /// The program's name, the tools, the kernels and the creation time.
    pub listing: Listing,
    pub code: SharedBytes,
    /// What the check before a load found in the code, when it passed, with the code's digest
    /// (always the digest of `code`).
    pub checked: Option<Checked>,
    /// The compiler that made the code, as a [remembered toolchain](super::resolved::record)
    /// (empty when there is none, as for a link): what a process's first lookup through a
    /// direct name checks instead of reading the toolchain's own file (see [`super`]).
    pub toolchain: SharedBytes,
    /// What the key took of the program itself, as bytes (empty for a link): a lookup through a
    /// direct name compares them with its program's instead of hashing those into a key.
    pub inputs: SharedBytes,
}

impl Entry {
    /// The kernels of `code` with their layouts, as cudyn's inspector reads them.
    pub fn kernels_of(code: &[u8]) -> Vec<KernelRecord> {
        let Ok(inspection) = crate::inspect::inspect(code) else {
            return Vec::new();
        };
        let mut kernels = Vec::new();
        for module in inspection.modules() {
            match module {
                crate::inspect::Module::Cubin(cubin) => {
                    kernels.extend(cubin.kernels.iter().map(|kernel| KernelRecord {
                        name: kernel.name.clone(),
                        params: kernel.params.clone(),
                    }))
                }
                crate::inspect::Module::Ptx(ptx) => {
                    kernels.extend(ptx.entries.iter().map(|entry| KernelRecord {
                        name: entry.name.clone(),
                        params: entry.layout().unwrap_or_default(),
                    }))
                }
            }
        }
        kernels
    }

    /// The kind of image the code is.
    pub fn image_kind(&self) -> ImageKind {
        ImageKind::from(self.output)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut manifest = Writer::default();
        manifest
            .bytes(self.key.as_bytes())
            .text(self.output.extension())
            .u64(u64::from(self.arch.number()))
            .text(&self.log)
            .list(&self.lowered_names, |manifest, (expression, lowered)| {
                manifest.text(expression).text(lowered);
            })
            .bytes(&self.listing.0)
            .optional(self.checked, |manifest, Checked { facts, digest }| {
                manifest
                    .text(CHECKED_BY)
                    .u64(u64::from(facts.defines_variables))
                    .u64(
                        facts
                            .uninitialized_bytes
                            .map_or(UNKNOWN_BYTES, |bytes| bytes as u64),
                    )
                    .bytes(digest.as_bytes());
            })
            .bytes(&self.toolchain)
            .bytes(&self.inputs);
        let mut file = Writer(MAGIC.to_vec());
        file.bytes(&manifest.0).bytes(&self.code);
        codec::seal(file.0)
    }

    /// Whether the digest the manifest gives the code is the code's: what a hit trusts the
    /// checksum for, checked by hashing the code again.
    pub fn digest_matches(&self) -> bool {
        self.checked
            .is_none_or(|checked| checked.digest == crate::image::digest(&self.code))
    }

    /// Whether the entry's key is the one its compiler and its program's inputs make, as a
    /// lookup through a direct name takes it to be without hashing (see [`super`]). Entries
    /// without inputs (links) or whose toolchain does not read (never found through a direct
    /// name) have nothing to check.
    pub fn key_matches_inputs(&self) -> bool {
        if self.inputs.is_empty() {
            return true;
        }
        super::resolved::identities_of(&self.toolchain).is_none_or(|identities| {
            identities
                .iter()
                .any(|identity| super::key::nvrtc_key(identity, &self.inputs) == self.key)
        })
    }

    /// Whether `bytes` are an entry file of another format than this cudyn's (another version's
    /// file, never a hit here: its key has another schema) rather than a damaged one.
    pub fn is_other_format(bytes: &[u8]) -> bool {
        bytes.len() >= MAGIC.len() && bytes.starts_with(MAGIC_FAMILY) && !bytes.starts_with(MAGIC)
    }

    /// The entry in `bytes`, or `None` when they are not a whole, intact entry. The code and
    /// the toolchain record stay in `bytes`, shared, not copied.
    pub fn decode(bytes: Vec<u8>) -> Option<Entry> {
        Self::decode_from(bytes, 0)
    }

    /// [`decode`](Entry::decode) of the entry file that `bytes` holds from `start` on (a
    /// value of the remote tier, after its seal), its parts sharing `bytes` rather than a copy.
    pub(crate) fn decode_from(bytes: Vec<u8>, start: usize) -> Option<Entry> {
        let buffer = Arc::new(bytes);
        let file = codec::unsealed(buffer.get(start..)?)?.strip_prefix(MAGIC)?;
        Self::read(&buffer, Reader(file)).ok()
    }

    /// The entry in `file`, the part of `buffer` after the magic and before the checksum.
    fn read(buffer: &Arc<Vec<u8>>, mut file: Reader) -> Result<Entry, Malformed> {
        let shared = |part: &[u8]| {
            SharedBytes::slice_of(buffer, part).ok_or(Malformed::Unknown("part of the file"))
        };
        let mut manifest = Reader(file.bytes()?);
        let code = file.bytes()?;
        file.end()?;
        let key = Key(manifest.array()?);
        let output = match manifest.bytes()? {
            b"cubin" => Output::Cubin,
            b"ptx" => Output::Ptx,
            b"ltoir" => Output::LtoIr,
            _ => return Err(Malformed::Unknown("output")),
        };
        let number = u32::try_from(manifest.u64()?).map_err(|_| Malformed::Unknown("arch"))?;
        let arch = Arch::new(number / 10, number % 10);
        let log = manifest.text()?;
        let lowered_names = manifest.list(|m| Ok((m.text()?, m.text()?)))?;
        let listing = Listing(manifest.bytes()?.to_vec());
        let checked = manifest
            .optional(|manifest| {
                let checked_by = manifest.bytes()?;
                let facts = Facts {
                    defines_variables: manifest.u64()? != 0,
                    uninitialized_bytes: match manifest.u64()? {
                        UNKNOWN_BYTES => None,
                        bytes => Some(size(bytes)?),
                    },
                };
                let digest = Digest(manifest.array()?);
                Ok((checked_by == CHECKED_BY.as_bytes()).then_some(Checked { facts, digest }))
            })?
            .flatten();
        let toolchain = shared(manifest.bytes()?)?;
        let inputs = shared(manifest.bytes()?)?;
        manifest.end()?;
        Ok(Entry {
            key,
            output,
            arch,
            log,
            lowered_names,
            listing,
            code: shared(code)?,
            checked,
            toolchain,
            inputs,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(key: Key, code_len: usize) -> Entry {
        Entry {
            key,
            output: Output::Cubin,
            arch: Arch::new(9, 0),
            log: "warning: none".into(),
            lowered_names: vec![("saxpy<float>".into(), "_Z5saxpyIfEvv".into())],
            listing: Listing::of(&listed()),
            code: (0..code_len).map(|i| i as u8).collect::<Vec<u8>>().into(),
            checked: None,
            toolchain: b"a toolchain record".to_vec().into(),
            inputs: b"the program's inputs".to_vec().into(),
        }
    }

    fn listed() -> Listed {
        Listed {
            name: "saxpy.cu".into(),
            toolchain: vec!["NVRTC 13.0".into()],
            kernels: vec![
                KernelRecord {
                    name: "_Z5saxpyIfEvv".into(),
                    params: vec![
                        ParamLayout { offset: 0, size: 4 },
                        ParamLayout { offset: 8, size: 8 },
                    ],
                },
                KernelRecord {
                    name: "empty".into(),
                    params: Vec::new(),
                },
            ],
            created: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    /// A sample entry whose code was checked: no variables.
    fn checked_sample(code_len: usize) -> Entry {
        let mut entry = sample(Key([7; 32]), code_len);
        entry.checked = Some(Checked {
            facts: Facts::NO_VARIABLES,
            digest: crate::image::digest(&entry.code),
        });
        entry
    }

    #[test]
    fn a_file_of_another_format_is_told_from_a_damaged_one() {
        let bytes = sample(Key([7; 32]), 30).encode();
        assert!(!Entry::is_other_format(&bytes));
        let mut older = bytes.clone();
        older[7] = b'1';
        assert!(Entry::is_other_format(&older));
        assert_eq!(Entry::decode(older), None);
        assert!(!Entry::is_other_format(&bytes[..7]));
        assert!(!Entry::is_other_format(b"garbage of some length"));
    }

    #[test]
    fn a_listing_reads_back_and_a_cut_one_does_not() {
        let encoded = Listing::of(&listed());
        assert_eq!(encoded.read(), Some(listed()));
        for len in 0..encoded.0.len() {
            assert_eq!(
                Listing(encoded.0[..len].to_vec()).read(),
                None,
                "cut to {len}"
            );
        }
        let mut longer = encoded.0.clone();
        longer.push(0);
        assert_eq!(Listing(longer).read(), None);
    }

    #[test]
    fn the_file_format_changes_only_with_the_magic_and_the_schema() {
        // The xxh3-128 of a sample entry's file (unchecked: what the check found is marked with
        // cudyn's version). A change here is a change of format: give it a new MAGIC and
        // key::SCHEMA, so that no cudyn misreads another's files, then update the figure.
        let entry = sample(Key([7; 32]), 300);
        assert_eq!(
            xxhash_rust::xxh3::xxh3_128(&entry.encode()),
            PINNED,
            "{:#x}",
            xxhash_rust::xxh3::xxh3_128(&entry.encode())
        );
    }

    const PINNED: u128 = 0x7317_acd8_6cac_6478_1958_ccd6_b821_8b75;

    #[test]
    fn an_entry_round_trips() {
        let entry = sample(Key([7; 32]), 300);
        assert_eq!(Entry::decode(entry.encode()), Some(entry));
    }

    #[test]
    fn what_the_check_found_round_trips_with_the_digest_of_the_code_read() {
        let mut entry = sample(Key([7; 32]), 300);
        let digest = crate::image::digest(&entry.code);
        for facts in [
            Facts::NO_VARIABLES,
            Facts::UNKNOWN,
            Facts {
                defines_variables: true,
                uninitialized_bytes: Some(1 << 20),
            },
        ] {
            entry.checked = Some(Checked { facts, digest });
            assert_eq!(Entry::decode(entry.encode()), Some(entry.clone()));
        }
    }

    /// `entry`'s file with the manifest bytes `from` replaced by `to` (of the same length),
    /// sealed again: a file as another writer could have made it.
    fn resealed(entry: &Entry, from: &[u8], to: &[u8]) -> Vec<u8> {
        let bytes = entry.encode();
        let at = bytes
            .windows(from.len())
            .position(|window| window == from)
            .unwrap();
        let mut body = bytes[..bytes.len() - codec::CHECKSUM].to_vec();
        body[at..at + to.len()].copy_from_slice(to);
        codec::seal(body)
    }

    #[test]
    fn what_another_cudyn_found_is_not_trusted_and_the_entry_still_reads() {
        let entry = checked_sample(300);
        let ours = CHECKED_BY.as_bytes();
        let mut theirs = ours.to_vec();
        *theirs.last_mut().unwrap() ^= 1;
        let read = Entry::decode(resealed(&entry, ours, &theirs)).expect("a whole entry");
        assert_eq!(read.checked, None);
        assert_eq!(read.code, entry.code);
    }

    #[test]
    fn a_digest_that_is_not_the_codes_reads_but_fails_verification() {
        let entry = checked_sample(300);
        assert!(entry.digest_matches());
        let digest = entry.checked.unwrap().digest;
        let read =
            Entry::decode(resealed(&entry, digest.as_bytes(), &[0; 32])).expect("a sealed entry");
        assert_eq!(read.checked.unwrap().digest, Digest([0; 32]));
        assert!(!read.digest_matches());
        assert!(
            sample(Key([7; 32]), 300).digest_matches(),
            "no digest to check"
        );
    }

    #[test]
    fn the_checksum_covers_the_code() {
        let entry = sample(Key([7; 32]), 300);
        let mut bytes = entry.encode();
        let last_code_byte = bytes.len() - codec::CHECKSUM - 1;
        bytes[last_code_byte] ^= 1;
        assert_eq!(Entry::decode(bytes), None);
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_refused() {
        let bytes = checked_sample(64).encode();
        for len in 0..bytes.len() {
            assert_eq!(
                Entry::decode(bytes[..len].to_vec()),
                None,
                "truncated to {len}"
            );
        }
        for offset in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[offset] ^= 1 << bit;
                assert_eq!(Entry::decode(damaged), None, "bit {bit} of byte {offset}");
            }
        }
    }
}
