//! Verdicts of checks, remembered for the life of the process by everything the check read, so
//! that bytes found whole once and handed in again are not walked again: a fatbin's compressed
//! entries (whose decompression costs more than the rest of its check) and whole images (whose
//! check walks every header and table, 0.4-0.9 µs for a 10 KiB cubin, where comparing the 5 KiB
//! of them takes about 0.1 µs).
//!
//! A verdict is recalled only when every byte its check read equals the remembered ones,
//! compared in full. A fast hash (xxh3) of the fields and of samples of the payload only finds
//! the candidate, so no crafted collision can recall another's verdict, and a recall costs a
//! fraction of a cryptographic hash of the bytes. Only what a check found whole is remembered: a
//! refusal is made again, with its message, every time.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use super::Facts;

/// How many bytes of a payload's start, middle and end its key hashes (see [`Read::new`]).
pub(crate) const KEY_SAMPLE: usize = 64;

/// What a check read: some fields describing where the bytes came from, and the payload the
/// check walked (empty when the fields name it, by a digest that covers it, say), keyed for a
/// table of [`Verdicts`]. Parts of the payload the check provably did not read may be left out
/// of what is remembered and compared (see [`Verdicts::remember`]).
pub(crate) struct Read<'a> {
    fields: Vec<u8>,
    payload: &'a [u8],
    key: u128,
}

impl<'a> Read<'a> {
    /// What a check read, keyed by the xxh3 of its fields and of the first, middle and last
    /// [`KEY_SAMPLE`] bytes of its payload (the whole payload when shorter than the three):
    /// hashing a few KiB of payload costs more than the rest of a recall, and the key only finds
    /// the candidate, which [`Read::is`] compares in full. Two reads of the same key replace
    /// each other in a table, and the one not remembered is checked again.
    pub(crate) fn new(fields: Vec<u8>, payload: &'a [u8]) -> Read<'a> {
        let seed = xxhash_rust::xxh3::xxh3_64(&fields);
        let middle = payload.len().saturating_sub(KEY_SAMPLE) / 2;
        let samples = (payload.len() > 3 * KEY_SAMPLE)
            .then(|| {
                let center = payload.get(middle..)?.first_chunk::<KEY_SAMPLE>()?;
                Some([*payload.first_chunk()?, *center, *payload.last_chunk()?])
            })
            .flatten();
        let key = match samples {
            Some(samples) => xxhash_rust::xxh3::xxh3_128_with_seed(samples.as_flattened(), seed),
            None => xxhash_rust::xxh3::xxh3_128_with_seed(payload, seed),
        };
        Read {
            fields,
            payload,
            key,
        }
    }

    #[cfg(test)]
    pub(crate) fn key(&self) -> u128 {
        self.key
    }

    fn is(&self, remembered: &Remembered) -> bool {
        if !same(&self.fields, &remembered.fields) || self.payload.len() != remembered.len {
            return false;
        }
        let mut kept = &remembered.kept[..];
        read_parts(remembered.len, &remembered.unread).all(|part| {
            let (Some((own, rest)), Some(payload)) =
                (kept.split_at_checked(part.len()), self.payload.get(part))
            else {
                return false;
            };
            kept = rest;
            same(payload, own)
        })
    }
}

/// The parts of a payload of `len` bytes outside `unread` (in order, apart, inside it).
fn read_parts(len: usize, unread: &[Range<usize>]) -> impl Iterator<Item = Range<usize>> + '_ {
    let ends = unread.iter().map(|range| (range.start, range.end));
    let mut from = 0;
    ends.chain([(len, len)]).map(move |(start, end)| {
        let part = from..start;
        from = end;
        part
    })
}

/// Whether `one` and `other` hold the same bytes, without calling `memcmp` on empty slices:
/// their pointer dangles, and the AVX-512 `memcmp` of glibc reads it with a masked load whose
/// fault suppression takes a microcode assist (170 ns measured on an AMD EPYC, twice the
/// comparison of 10 KiB).
fn same(one: &[u8], other: &[u8]) -> bool {
    one.len() == other.len() && (one.is_empty() || one == other)
}

/// A read remembered: its own copy of its fields and of the parts of its payload of `len` bytes
/// outside `unread`, which the check did not read.
#[derive(Debug, PartialEq, Eq)]
struct Remembered {
    fields: Vec<u8>,
    len: usize,
    kept: Box<[u8]>,
    unread: Box<[Range<usize>]>,
}

/// The verdicts of checks that found their bytes whole, by the key of what they read; emptied
/// when full (a bound, not a cache policy: what a process loads again it mostly loads soon).
pub(crate) struct Verdicts {
    table: Mutex<Option<Table>>,
    max_entries: usize,
    max_kept_bytes: usize,
    max_entry_bytes: usize,
    keep: Keep,
}

/// When a table of [`Verdicts`] keeps a copy of what a check read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// At the first check that finds it whole: for bytes whose check costs far more than their
    /// copy (a compressed entry, decompressed to be checked).
    AtOnce,
    /// At the second check of the same key: for bytes whose copy costs a good part of their
    /// check (an image: finding what to leave out, allocating and copying the rest took a fifth
    /// as long as walking a new cubin), so that bytes checked once, as most are, pay only for
    /// their key.
    WhenSeenAgain,
}

#[derive(Default)]
struct Table {
    entries: HashMap<u128, (Remembered, Facts)>,
    kept_bytes: usize,
    /// The keys of reads found whole once and not copied yet ([`Keep::WhenSeenAgain`]).
    seen: HashSet<u128>,
}

/// How many keys a table remembers having seen, per entry it holds at most.
const SEEN_PER_ENTRY: usize = 16;

impl Verdicts {
    /// An empty table holding at most `max_entries` verdicts and `max_kept_bytes` bytes of
    /// payload, none keeping more than `max_entry_bytes` (what costs more to compare than to
    /// check again is not kept), keeping a copy of what checks read when `keep` says.
    pub(crate) const fn new(
        max_entries: usize,
        max_kept_bytes: usize,
        max_entry_bytes: usize,
        keep: Keep,
    ) -> Verdicts {
        Verdicts {
            table: Mutex::new(None),
            max_entries,
            max_kept_bytes,
            max_entry_bytes,
            keep,
        }
    }

    fn table(&self) -> MutexGuard<'_, Option<Table>> {
        // Nothing panics while holding the lock: a poisoned one still holds a consistent table.
        self.table
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// What the check that read `read` found, when it found those very bytes whole before.
    pub(crate) fn recall(&self, read: &Read<'_>) -> Option<Facts> {
        let table = self.table();
        let (remembered, facts) = table.as_ref()?.entries.get(&read.key)?;
        read.is(remembered).then_some(*facts)
    }

    /// Remembers that the check that read `read` found it whole, with `facts`, when the table
    /// keeps a copy at once or this is the second time (else only its key). `unread` gives the
    /// parts of the payload the check did not read, in order and apart: they are neither kept
    /// nor compared. Called only when a copy is made (ranges out of order or outside the
    /// payload leave nothing out).
    pub(crate) fn remember(
        &self,
        read: &Read<'_>,
        facts: Facts,
        unread: impl FnOnce() -> Vec<Range<usize>>,
    ) {
        if self.keep == Keep::WhenSeenAgain && self.first_sight(read.key) {
            return;
        }
        let len = read.payload.len();
        let mut unread = unread();
        if !in_order_inside(&unread, len) {
            unread.clear();
        }
        let kept_len = len - unread.iter().map(|range| range.len()).sum::<usize>();
        if kept_len > self.max_entry_bytes {
            return;
        }
        let mut kept = Vec::with_capacity(kept_len);
        for part in read_parts(len, &unread) {
            kept.extend_from_slice(&read.payload[part]);
        }
        let remembered = Remembered {
            fields: read.fields.clone(),
            len,
            kept: kept.into_boxed_slice(),
            unread: unread.into_boxed_slice(),
        };
        let mut table = self.table();
        let table = table.get_or_insert_with(Table::default);
        if let Some((replaced, _)) = table.entries.remove(&read.key) {
            table.kept_bytes -= replaced.kept.len();
        }
        if table.entries.len() >= self.max_entries
            || table.kept_bytes + kept_len > self.max_kept_bytes
        {
            table.entries.clear();
            table.kept_bytes = 0;
        }
        table.kept_bytes += kept_len;
        table.entries.insert(read.key, (remembered, facts));
    }

    /// Whether `key` is seen for the first time since it was last kept; it is noted as seen.
    fn first_sight(&self, key: u128) -> bool {
        let mut table = self.table();
        let table = table.get_or_insert_with(Table::default);
        if table.seen.remove(&key) {
            return false;
        }
        if table.seen.len() >= self.max_entries * SEEN_PER_ENTRY {
            table.seen.clear();
        }
        table.seen.insert(key);
        true
    }
}

/// Whether `ranges` are in order, apart, and inside `len` bytes.
fn in_order_inside(ranges: &[Range<usize>], len: usize) -> bool {
    let mut from = 0;
    ranges.iter().all(|range| {
        let fits = from <= range.start && range.start <= range.end && range.end <= len;
        from = range.end;
        fits
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table that copies when it sees a read again keeps only the key the first time.
    #[test]
    fn a_read_seen_once_is_copied_when_seen_again() {
        let verdicts = Verdicts::new(2, 1 << 10, 1 << 10, Keep::WhenSeenAgain);
        let read = Read::new(Vec::new(), b"image bytes");
        verdicts.remember(&read, Facts::NO_VARIABLES, Vec::new);
        assert_eq!(verdicts.recall(&read), None, "only its key is kept");
        verdicts.remember(&read, Facts::NO_VARIABLES, Vec::new);
        assert_eq!(verdicts.recall(&read), Some(Facts::NO_VARIABLES));
        // The keys seen are bounded too: past the bound, they are forgotten.
        let others: Vec<Vec<u8>> = (0..=2 * SEEN_PER_ENTRY)
            .map(|index| format!("other {index}").into_bytes())
            .collect();
        for other in &others {
            verdicts.remember(&Read::new(Vec::new(), other), Facts::NO_VARIABLES, Vec::new);
        }
        let table = verdicts.table();
        let table = table.as_ref().unwrap();
        assert!(
            table.seen.len() <= 2 * SEEN_PER_ENTRY,
            "{}",
            table.seen.len()
        );
        assert!(!table.seen.contains(&Read::new(Vec::new(), &others[0]).key));
        assert_eq!(table.entries.len(), 1, "the one seen twice");
    }

    /// A recall compares every byte: a read whose key collides with a remembered one (forged
    /// here by filing one read's verdict under another's key) is not recalled.
    #[test]
    fn a_colliding_key_recalls_nothing_unless_every_byte_is_equal() {
        let verdicts = Verdicts::new(8, 1 << 10, 1 << 10, Keep::AtOnce);
        let read = |payload: &'static [u8]| Read::new(b"test".to_vec(), payload);
        let (good, forged) = (read(b"checked payload"), read(b"other payload"));
        verdicts.remember(&good, Facts::NO_VARIABLES, Vec::new);
        assert_eq!(verdicts.recall(&good), Some(Facts::NO_VARIABLES));
        let remembered = Remembered {
            fields: good.fields.clone(),
            len: good.payload.len(),
            kept: good.payload.into(),
            unread: Box::new([]),
        };
        verdicts
            .table()
            .as_mut()
            .unwrap()
            .entries
            .insert(forged.key, (remembered, Facts::NO_VARIABLES));
        assert_eq!(verdicts.recall(&forged), None);
        assert_eq!(verdicts.recall(&good), Some(Facts::NO_VARIABLES));
    }

    /// Parts the check did not read are neither kept nor compared; every other byte is.
    #[test]
    fn unread_parts_are_left_out_and_the_rest_compared() {
        let verdicts = Verdicts::new(8, 1 << 10, 8, Keep::AtOnce);
        let payload = *b"headCODE..tailDATA";
        let unread = || vec![4..10, 14..18];
        verdicts.remember(
            &Read::new(Vec::new(), &payload),
            Facts::NO_VARIABLES,
            unread,
        );
        let recalled = |bytes: &[u8]| verdicts.recall(&Read::new(Vec::new(), bytes)).is_some();
        assert!(recalled(&payload));
        let remembered = {
            let table = verdicts.table();
            let (remembered, facts) = table.as_ref().unwrap().entries.values().next().unwrap();
            assert_eq!(&remembered.kept[..], b"headtail");
            assert_eq!(*facts, Facts::NO_VARIABLES);
            Remembered {
                fields: remembered.fields.clone(),
                len: remembered.len,
                kept: remembered.kept.clone(),
                unread: remembered.unread.clone(),
            }
        };
        // The key samples the whole of a payload this short, so a changed byte anywhere finds no
        // candidate; a read whose key does find one is compared part by part.
        let mut other_code = payload;
        other_code[5] = b'x';
        let mut other_tail = payload;
        other_tail[12] = b'x';
        for (bytes, same_verdict) in [(other_code, true), (other_tail, false)] {
            let read = Read::new(Vec::new(), &bytes);
            assert_eq!(
                read.is(&remembered),
                same_verdict,
                "{:?}",
                std::str::from_utf8(&bytes)
            );
        }
        assert!(!Read::new(Vec::new(), &payload[..17]).is(&remembered));
        // More kept bytes than an entry may hold: not remembered.
        let long = [1u8; 20];
        verdicts.remember(&Read::new(Vec::new(), &long), Facts::NO_VARIABLES, Vec::new);
        assert!(!recalled(&long));
        // Ranges out of order leave nothing out, so the entry is too long to keep too.
        verdicts.remember(&Read::new(Vec::new(), &long), Facts::NO_VARIABLES, || {
            vec![10..20, 0..10]
        });
        assert!(!recalled(&long));
        verdicts.remember(&Read::new(Vec::new(), &long), Facts::NO_VARIABLES, || {
            vec![0..6, 10..20]
        });
        assert!(recalled(&long));
    }

    /// Fields tell apart reads of the same payload, and a payload named by fields alone from
    /// one read in full.
    #[test]
    fn the_fields_are_part_of_what_is_compared() {
        let verdicts = Verdicts::new(8, 1 << 10, 1 << 10, Keep::AtOnce);
        verdicts.remember(
            &Read::new(b"one".to_vec(), b"payload"),
            Facts::NO_VARIABLES,
            Vec::new,
        );
        assert_eq!(
            verdicts.recall(&Read::new(b"two".to_vec(), b"payload")),
            None
        );
        assert_eq!(verdicts.recall(&Read::new(b"one".to_vec(), b"")), None);
        assert_eq!(
            verdicts.recall(&Read::new(b"one".to_vec(), b"payload")),
            Some(Facts::NO_VARIABLES)
        );
    }

    /// The table holds at most its bounds, then starts again: the verdicts before are checked
    /// again, never recalled wrongly.
    #[test]
    fn a_full_table_starts_again() {
        let verdicts = Verdicts::new(3, 20, 20, Keep::AtOnce);
        let payloads: [&[u8]; 4] = [b"first", b"second", b"third", b"fourth"];
        for payload in &payloads[..3] {
            verdicts.remember(
                &Read::new(Vec::new(), payload),
                Facts::NO_VARIABLES,
                Vec::new,
            );
        }
        let all_recalled = |payloads: &[&[u8]]| {
            payloads
                .iter()
                .all(|payload| verdicts.recall(&Read::new(Vec::new(), payload)).is_some())
        };
        assert!(all_recalled(&payloads[..3]));
        // Remembering one of them again replaces it, and keeps the others.
        verdicts.remember(
            &Read::new(Vec::new(), payloads[1]),
            Facts::NO_VARIABLES,
            Vec::new,
        );
        assert!(all_recalled(&payloads[..3]));
        assert_eq!(verdicts.table().as_ref().unwrap().kept_bytes, 5 + 6 + 5);
        verdicts.remember(
            &Read::new(Vec::new(), payloads[3]),
            Facts::NO_VARIABLES,
            Vec::new,
        );
        assert_eq!(verdicts.recall(&Read::new(Vec::new(), payloads[0])), None);
        assert!(verdicts
            .recall(&Read::new(Vec::new(), payloads[3]))
            .is_some());
        // So does a payload that would take it past its byte bound.
        verdicts.remember(
            &Read::new(Vec::new(), &[7; 18]),
            Facts::NO_VARIABLES,
            Vec::new,
        );
        assert_eq!(verdicts.recall(&Read::new(Vec::new(), payloads[3])), None);
        assert_eq!(verdicts.table().as_ref().unwrap().kept_bytes, 18);
    }
}
