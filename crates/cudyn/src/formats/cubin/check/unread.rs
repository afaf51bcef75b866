//! The bytes of a cubin its check for a load never reads: the contents of its code and data
//! sections (`SHT_PROGBITS`: `.text.*`, `.nv.constant*`, `.nv.global.init`, debug information),
//! whose bytes the driver takes as they are. The check reads only headers, tables, notes and
//! attribute lists, so its verdict on a cubin is a function of the other bytes: a cubin equal to
//! one found whole in every byte but these is whole too, and a recall of that verdict need not
//! compare them (`formats::remembered`).

use std::ops::Range;

use object::elf::SHT_PROGBITS;
use object::read::elf::{FileHeader, SectionHeader};

use super::layout::{layout, Owner};
use super::sections::{is_attribute_list, named, section_names};
use super::LE;

/// The byte ranges of `data`, a cubin that passed its check for a load, that the check did not
/// read, in order and apart; empty when its headers cannot be read (never the case after the
/// check). A range any other structure of the file also covers is left out of them, so that an
/// overlap the check allows (a `.nv.merc.` section over a data section) cannot hide read bytes.
pub(crate) fn unread_contents(data: &[u8]) -> Vec<Range<usize>> {
    let Ok(header) = super::header(data) else {
        return Vec::new();
    };
    let Ok(sections) = header.sections(LE, data) else {
        return Vec::new();
    };
    let headers = sections.iter().as_slice();
    let names = section_names(header, headers, data);
    let (mut unread, mut read) = (Vec::new(), Vec::new());
    layout(header, headers, |offset, size, owner| {
        let Some(bytes) = span(offset, size) else {
            return;
        };
        let code_or_data = match owner {
            Owner::Section(index) => {
                let section = &headers[index];
                section.sh_type(LE) == SHT_PROGBITS && !is_attribute_list(named(names, section))
            }
            _ => false,
        };
        if code_or_data {
            unread.push(bytes);
        } else {
            read.push(bytes);
        }
    });
    without(unread, read)
}

/// `size` bytes at `offset` as a range of indices; `None` when there are none or they do not
/// fit in a `usize`.
fn span(offset: u64, size: u64) -> Option<Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = usize::try_from(offset.checked_add(size)?).ok()?;
    (end > start).then_some(start..end)
}

/// The bytes of `ranges` that none of `taken` covers, as ranges in order and apart: both sorted
/// once and swept together, so that a cubin of thousands of sections costs no more than
/// sorting them.
fn without(mut ranges: Vec<Range<usize>>, mut taken: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_unstable_by_key(|range| range.start);
    taken.sort_unstable_by_key(|range| range.start);
    let mut taken = taken.into_iter().peekable();
    // How far the taken ranges passed so far reach.
    let mut taken_to = 0;
    let mut apart: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    let mut push = |piece: Range<usize>| match apart.last_mut() {
        Some(last) if last.end >= piece.start => last.end = last.end.max(piece.end),
        _ => apart.push(piece),
    };
    for range in ranges {
        let mut from = range.start.max(taken_to);
        while let Some(cut) = taken.next_if(|cut| cut.start < range.end) {
            if cut.start > from {
                push(from..cut.start.min(range.end));
            }
            taken_to = taken_to.max(cut.end);
            from = from.max(taken_to);
        }
        if from < range.end {
            push(from..range.end);
        }
    }
    apart
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_loses_what_others_cover() {
        // One range as a list (a literal one-range list reads like a mistake to clippy).
        let one = |range: Range<usize>| Vec::from_iter([range]);
        let untouched = |pieces: Vec<Range<usize>>| pieces.len() == 1 && pieces[0] == (10..20);
        assert!(untouched(without(one(10..20), Vec::new())));
        assert!(untouched(without(one(10..20), vec![20..30, 0..10])));
        assert_eq!(without(one(10..20), vec![18..25, 12..14]), [10..12, 14..18]);
        assert!(without(one(10..20), vec![5..25, 0..5]).is_empty());
        // A cut reaching past the next range cuts it too; ranges that touch are joined.
        assert_eq!(
            without(vec![30..40, 10..20, 20..25], vec![15..32, 0..1]),
            [10..15, 32..40]
        );
        assert_eq!(without(vec![0..4, 4..8, 9..12], vec![]), [0..8, 9..12]);
        // Taken ranges that overlap each other, and one inside another.
        assert_eq!(
            without(one(0..100), vec![10..50, 20..30, 40..60, 70..71]),
            [0..10, 60..70, 71..100]
        );
    }

    #[test]
    fn spans_are_never_empty_nor_overflow() {
        assert_eq!(span(4, 0), None);
        assert_eq!(span(u64::MAX, 2), None);
        assert_eq!(span(4, 4), Some(4..8));
    }
}
