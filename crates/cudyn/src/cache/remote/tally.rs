//! What the remote tier did on this host, across processes: a small file in the cache's folder,
//! `remote-tally`, that each process appends its events to, which `cudyn cache stats` sums.
//!
//! Events are 8-byte records, appended with `O_APPEND` (one `write` per append, which processes
//! do not interleave): the event's number in [`Event`] in the first byte, a count in the other
//! seven (little-endian). A process appends its events as they come, but a remote hit's with the
//! write of its entry, off the caller's path, and any still held when its cache ends (see
//! [`super::Remote::flush_tally`]); a process killed holding some loses them. A file grown past
//! [`FOLD_AT`] is folded into one record per event by the process whose append passed it; an
//! event appended meanwhile by another process is lost, so the totals are a close account, not
//! an exact one. Nothing here is ever fatal: an event that cannot be recorded is not.

use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::path::Path;

use super::RemoteStats;

/// The file's name inside the cache's folder.
pub(crate) const NAME: &str = "remote-tally";

/// The length past which the file is folded.
const FOLD_AT: u64 = 64 * 1024;

/// One record.
const RECORD: usize = 8;

/// What the remote tier did, as the tally records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Event {
    Hit,
    Miss,
    Wait,
    Published,
    Error,
    Skipped,
    RefusedMac,
    RefusedInvalid,
}

/// Every event, in the order of their numbers.
pub(crate) const EVENTS: [Event; 8] = [
    Event::Hit,
    Event::Miss,
    Event::Wait,
    Event::Published,
    Event::Error,
    Event::Skipped,
    Event::RefusedMac,
    Event::RefusedInvalid,
];

fn record(event: Event, count: u64) -> [u8; RECORD] {
    let mut record = count.min(u64::MAX >> 8).to_le_bytes();
    record.copy_within(0..7, 1);
    record[0] = event as u8;
    record
}

/// Records each event of `counts` that many times in the tally of the cache folder `dir`, in
/// one append.
pub(crate) fn add(dir: &Path, counts: &[(Event, u64)]) {
    let path = dir.join(NAME);
    let Ok(mut file) = OpenOptions::new().create(true).append(true).open(&path) else {
        return;
    };
    let records: Vec<u8> = counts
        .iter()
        .flat_map(|&(event, count)| record(event, count))
        .collect();
    if file.write_all(&records).is_err() {
        return;
    }
    if file
        .metadata()
        .is_ok_and(|metadata| metadata.len() > FOLD_AT)
    {
        fold(dir);
    }
}

/// Replaces the tally of `dir` by one record per event.
fn fold(dir: &Path) {
    let totals = totals(dir);
    let mut folded = Vec::with_capacity(EVENTS.len() * RECORD);
    for event in EVENTS {
        folded.extend_from_slice(&record(event, count(&totals, event)));
    }
    let _ = super::super::store::write_atomically(&dir.join(NAME), &folded);
}

fn count(totals: &RemoteStats, event: Event) -> u64 {
    match event {
        Event::Hit => totals.hits,
        Event::Miss => totals.misses,
        Event::Wait => totals.waits,
        Event::Published => totals.published,
        Event::Error => totals.errors,
        Event::Skipped => totals.skipped,
        Event::RefusedMac => totals.refused_mac,
        Event::RefusedInvalid => totals.refused_invalid,
    }
}

/// The totals the tally of `dir` records (zero for a missing file; records past the first
/// [`FOLD_AT`] bytes and unknown ones are not counted).
pub(crate) fn totals(dir: &Path) -> RemoteStats {
    let mut totals = RemoteStats::default();
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(dir.join(NAME)) {
        let _ = file.take(FOLD_AT + RECORD as u64).read_to_end(&mut bytes);
    }
    for record in bytes.chunks_exact(RECORD) {
        let mut number = [0; 8];
        number[..7].copy_from_slice(&record[1..]);
        let number = u64::from_le_bytes(number);
        let counter = match EVENTS.get(usize::from(record[0])) {
            Some(Event::Hit) => &mut totals.hits,
            Some(Event::Miss) => &mut totals.misses,
            Some(Event::Wait) => &mut totals.waits,
            Some(Event::Published) => &mut totals.published,
            Some(Event::Error) => &mut totals.errors,
            Some(Event::Skipped) => &mut totals.skipped,
            Some(Event::RefusedMac) => &mut totals.refused_mac,
            Some(Event::RefusedInvalid) => &mut totals.refused_invalid,
            None => continue,
        };
        *counter = counter.saturating_add(number);
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_add_up_across_writers_and_a_fold_keeps_the_totals() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(totals(dir.path()), RemoteStats::default());
        for event in [Event::Hit, Event::Hit, Event::Wait, Event::RefusedMac] {
            add(dir.path(), &[(event, 1)]);
        }
        let expected = RemoteStats {
            hits: 2,
            waits: 1,
            refused_mac: 1,
            ..RemoteStats::default()
        };
        assert_eq!(totals(dir.path()), expected);
        // Past the fold: the file shrinks to one record per event, the totals stay.
        let appends = FOLD_AT as usize / RECORD;
        for _ in 0..appends {
            add(dir.path(), &[(Event::Error, 1)]);
        }
        // Several events, several at a time, in one append.
        add(dir.path(), &[(Event::Hit, 3), (Event::Miss, 2)]);
        let len = std::fs::metadata(dir.path().join(NAME)).unwrap().len();
        assert!(len < FOLD_AT, "folded: {len}");
        assert_eq!(totals(dir.path()).errors, appends as u64);
        assert_eq!(totals(dir.path()).hits, 5);
        assert_eq!(totals(dir.path()).misses, 2);
        // A damaged tail and an unknown event are not counted.
        std::fs::write(
            dir.path().join(NAME),
            [
                record(Event::Miss, 3).as_slice(),
                &[200, 1, 0, 0, 0, 0, 0, 0],
                &[1, 2],
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(
            totals(dir.path()),
            RemoteStats {
                misses: 3,
                ..RemoteStats::default()
            }
        );
    }
}
