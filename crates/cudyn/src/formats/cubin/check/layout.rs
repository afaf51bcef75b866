//! The overlap check: every byte of a cubin belongs to at most one of its structures.

use std::mem::size_of;

use object::elf::{ProgramHeader64, SectionHeader64, ET_REL};
use object::read::elf::{FileHeader, SectionHeader};

use super::{holds_bytes, Header, LE};
use crate::parse_error::{ParseError, Problem};

/// A structure of the file that owns a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Owner {
    ElfHeader,
    SectionHeaders,
    ProgramHeaders,
    Section(usize),
}

/// Bytes of the file a structure owns: where they start and end.
type Claim = (u64, u64, Owner);

/// `size` bytes at `offset` claimed for `owner`; nothing when there are none.
fn claim(offset: u64, size: u64, owner: Owner) -> Option<Claim> {
    (size > 0).then(|| (offset, offset.saturating_add(size), owner))
}

/// The byte ranges of the file that belong to one structure each: the headers, then sections.
/// Claims are gathered first and compared once sorted, so that a cubin of thousands of sections
/// costs no more than sorting them.
#[derive(Default)]
struct Ranges(Vec<Claim>);

impl Ranges {
    /// Claims `size` bytes at `offset` for `owner`.
    fn claim(&mut self, offset: u64, size: u64, owner: Owner) {
        self.0.extend(claim(offset, size, owner));
    }

    /// Damage when two claims overlap (see [`Sweep::check`]), but for claims of exactly the same
    /// bytes whose owners `may_share` them.
    fn check(
        mut self,
        name: impl Fn(Owner) -> String,
        may_share: impl Fn(Owner, Owner) -> bool,
    ) -> Result<(), ParseError> {
        if !self.0.is_sorted() {
            self.0.sort_unstable();
        }
        let mut sweep = Sweep::default();
        for &claim in &self.0 {
            // Sorted, claims of the same bytes are neighbours, the first of them the furthest.
            let furthest = sweep.furthest;
            if (claim.0, claim.1) == (furthest.0, furthest.1) && may_share(claim.2, furthest.2) {
                continue;
            }
            sweep.add(claim);
        }
        sweep.check(name)
    }
}

/// Claims compared in the order of their offsets.
struct Sweep {
    /// The claim that reaches furthest so far.
    furthest: Claim,
    /// The first claim found overlapping an earlier one, and that one.
    overlap: Option<(Claim, Claim)>,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            // Before any claim (which has bytes), reaching nowhere.
            furthest: (0, 0, Owner::ElfHeader),
            overlap: None,
        }
    }
}

impl Sweep {
    /// Compares `claim`, which starts no earlier than those before it, with them.
    #[inline]
    fn add(&mut self, claim: Claim) {
        if claim.0 < self.furthest.1 && self.overlap.is_none() {
            self.overlap = Some((claim, self.furthest));
        }
        if claim.1 > self.furthest.1 {
            self.furthest = claim;
        }
    }

    /// Damage when two claims overlap: the later owner's bytes, overlapping the earlier one
    /// (headers first, then sections in order), each named by `name`.
    fn check(self, name: impl Fn(Owner) -> String) -> Result<(), ParseError> {
        let Some((claim, reaching)) = self.overlap else {
            return Ok(());
        };
        let (first, second) = if reaching.2 < claim.2 {
            (reaching, claim)
        } else {
            (claim, reaching)
        };
        Err(ParseError::new(
            name(second.2),
            Problem::Damaged,
            format!(
                "its bytes {}..{} overlap {}",
                second.0,
                second.1,
                name(first.2)
            ),
        ))
    }
}

/// Hands `claim` what the file's structures claim of its bytes, `size` bytes at `offset` each,
/// in the order compilers lay a cubin out: the header, the sections, then the tables of section
/// and program headers. (The walk over the sections claims in this order too.)
pub(super) fn layout(
    header: &Header,
    sections: &[SectionHeader64<LE>],
    mut claim: impl FnMut(u64, u64, Owner),
) {
    claim(0, size_of::<Header>() as u64, Owner::ElfHeader);
    let relocatable = header.e_type(LE) == ET_REL;
    for (index, section) in sections.iter().enumerate().skip(1) {
        if holds_bytes(section.sh_type(LE), relocatable) {
            claim(
                section.sh_offset(LE),
                section.sh_size(LE),
                Owner::Section(index),
            );
        }
    }
    header_tables(header, sections, claim);
}

/// Hands `claim` the bytes of the tables of section and program headers, the last of a layout.
fn header_tables(
    header: &Header,
    sections: &[SectionHeader64<LE>],
    mut claim: impl FnMut(u64, u64, Owner),
) {
    claim(
        header.e_shoff(LE),
        sections.len() as u64 * size_of::<SectionHeader64<LE>>() as u64,
        Owner::SectionHeaders,
    );
    claim(
        header.e_phoff(LE),
        u64::from(header.e_phnum(LE)) * size_of::<ProgramHeader64<LE>>() as u64,
        Owner::ProgramHeaders,
    );
}

/// The claims of a layout compared as they come, which is enough when they come in the order of
/// their offsets, as compilers lay cubins out: then no claim is gathered nor sorted. Fed in the
/// order of [`layout`] by the walk over the sections, which reads each section's place anyway.
pub(super) struct InOrder {
    sweep: Sweep,
    /// Where the last claim starts (the ELF header's, at 0, before the sections').
    previous_start: u64,
    in_order: bool,
}

impl InOrder {
    /// Nothing compared yet but the ELF header's claim, which comes first.
    pub(super) fn new() -> InOrder {
        let mut sweep = Sweep::default();
        sweep.add((0, size_of::<Header>() as u64, Owner::ElfHeader));
        InOrder {
            sweep,
            previous_start: 0,
            in_order: true,
        }
    }

    /// Compares `size` bytes at `offset`, claimed for `owner`, with the claims before.
    #[inline]
    pub(super) fn claim(&mut self, offset: u64, size: u64, owner: Owner) {
        if let Some(claim) = claim(offset, size, owner) {
            // Starts that only increase are in the order sorting would put the claims in.
            self.in_order &= self.previous_start < offset;
            self.previous_start = offset;
            self.sweep.add(claim);
        }
    }
}

/// Damage when two of the file's structures overlap (see [`Sweep::check`]), given the claims of
/// the sections compared as they came: those of the header tables are added, and when the
/// claims did not all come in the order of their offsets, the layout is gathered into [`Ranges`]
/// and sorted instead. Two sections may have exactly the same bytes when `may_share` says so of
/// them (claims of the same start are never in order, so the sorted path decides it).
pub(super) fn check_layout(
    header: &Header,
    sections: &[SectionHeader64<LE>],
    mut compared: InOrder,
    name: impl Fn(Owner) -> String,
    may_share: impl Fn(Owner, Owner) -> bool,
) -> Result<(), ParseError> {
    header_tables(header, sections, |offset, size, owner| {
        compared.claim(offset, size, owner)
    });
    if compared.in_order {
        return compared.sweep.check(name);
    }
    let mut ranges = Ranges::default();
    layout(header, sections, |offset, size, owner| {
        ranges.claim(offset, size, owner)
    });
    ranges.check(name, may_share)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(owner: Owner) -> String {
        format!("{owner:?}")
    }

    fn never(_: Owner, _: Owner) -> bool {
        false
    }

    #[test]
    fn sections_allowed_to_share_bytes_may_only_share_them_exactly() {
        // Sections 4 and 9 may share, as a `.nv.merc.` view of another section's bytes.
        let shares = |a: Owner, b: Owner| {
            matches!((a, b), (Owner::Section(4), Owner::Section(9)))
                || matches!((a, b), (Owner::Section(9), Owner::Section(4)))
        };
        let ranges = |claims: &[(u64, u64, Owner)]| {
            let mut ranges = Ranges::default();
            ranges.claim(0, 64, Owner::ElfHeader);
            for &(offset, size, owner) in claims {
                ranges.claim(offset, size, owner);
            }
            ranges
        };
        let exact = [(64, 16, Owner::Section(4)), (64, 16, Owner::Section(9))];
        assert!(ranges(&exact).check(name, shares).is_ok());
        assert!(ranges(&exact).check(name, never).is_err());
        for partly in [
            [(64, 16, Owner::Section(4)), (64, 8, Owner::Section(9))],
            [(64, 16, Owner::Section(4)), (72, 16, Owner::Section(9))],
        ] {
            let error = ranges(&partly).check(name, shares).unwrap_err();
            assert_eq!(error.place, "Section(9)");
        }
        // Sharing with one section lets no third one in.
        let third = [
            (64, 16, Owner::Section(4)),
            (64, 16, Owner::Section(9)),
            (64, 16, Owner::Section(5)),
        ];
        let error = ranges(&third).check(name, shares).unwrap_err();
        assert!(error.message.contains("overlap Section(4)"), "{error}");
    }

    #[test]
    fn claims_that_only_touch_pass_and_any_overlap_is_named_by_its_later_owner() {
        let mut touching = Ranges::default();
        touching.claim(0, 64, Owner::ElfHeader);
        touching.claim(128, 0, Owner::Section(1));
        touching.claim(64, 64, Owner::Section(2));
        touching.claim(128, 8, Owner::SectionHeaders);
        assert!(touching.check(name, never).is_ok());

        // A long section covering one that starts far after it, past another in between: the
        // overlap is found although the two are not neighbours once sorted.
        let mut covering = Ranges::default();
        covering.claim(0, 64, Owner::ElfHeader);
        covering.claim(64, 1000, Owner::Section(1));
        covering.claim(2000, 8, Owner::SectionHeaders);
        covering.claim(500, 16, Owner::Section(3));
        let error = covering.check(name, never).unwrap_err();
        assert_eq!(error.place, "Section(3)");
        assert_eq!(error.message, "its bytes 500..516 overlap Section(1)");

        // Claimed later but starting earlier: still the later owner is the one named.
        let mut earlier = Ranges::default();
        earlier.claim(100, 50, Owner::SectionHeaders);
        earlier.claim(90, 20, Owner::Section(4));
        let error = earlier.check(name, never).unwrap_err();
        assert_eq!(error.place, "Section(4)");
        assert!(error.message.contains("overlap SectionHeaders"), "{error}");
    }
}
