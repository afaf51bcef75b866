//! GPU architectures as values: a compute capability and its variant, and their names. What
//! cudyn compiles for, and why, is [`crate::compile::target`]'s to say.

use std::fmt;

/// A GPU architecture: a compute capability, optionally architecture- or family-specific.
///
/// ```
/// use cudyn::{Arch, ArchVariant};
///
/// let arch: Arch = "sm_90a".parse()?;
/// assert_eq!(arch, Arch::new(9, 0).with(ArchVariant::Specific));
/// assert_eq!((arch.sm(), arch.compute()), ("sm_90a".into(), "compute_90a".into()));
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    major: u32,
    minor: u32,
    variant: ArchVariant,
}

/// Which of a compute capability's instruction sets code uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum ArchVariant {
    /// Runs on this and later architectures (`sm_90`).
    #[default]
    Portable,
    /// Uses features of exactly this architecture (`sm_90a`).
    Specific,
    /// Uses features of this architecture's family (`sm_100f`).
    Family,
}

impl Arch {
    /// The portable architecture of compute capability `major.minor`: `Arch::new(9, 0)` is sm_90.
    pub const fn new(major: u32, minor: u32) -> Self {
        Arch {
            major,
            minor,
            variant: ArchVariant::Portable,
        }
    }

    /// The same compute capability with another variant: `Arch::new(9, 0).with(Specific)` is
    /// sm_90a.
    pub const fn with(self, variant: ArchVariant) -> Self {
        Arch { variant, ..self }
    }

    /// The compute capability, `(major, minor)`.
    pub const fn compute_capability(&self) -> (u32, u32) {
        (self.major, self.minor)
    }

    /// The variant.
    pub const fn variant(&self) -> ArchVariant {
        self.variant
    }

    /// The number NVRTC and the ELF header use: 90 for sm_90.
    pub const fn number(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// The real architecture, for SASS: `sm_90`.
    pub fn sm(&self) -> String {
        self.named("sm_")
    }

    /// The virtual architecture, for PTX: `compute_90`.
    pub fn compute(&self) -> String {
        self.named("compute_")
    }

    /// `prefix`, the number and the suffix, built without the formatting machinery (the
    /// options of a compile-cache key are on the path of a warm start; see [`crate::digits`]).
    fn named(&self, prefix: &str) -> String {
        let mut name = String::with_capacity(prefix.len() + 4);
        name.push_str(prefix);
        name.push_str(crate::digits::Decimal::of(u64::from(self.number())).as_str());
        name.push_str(self.suffix());
        name
    }

    /// What follows the number in the name: `a` for `sm_90a`, `f` for `sm_100f`, else nothing.
    pub(crate) fn suffix(&self) -> &'static str {
        match self.variant {
            ArchVariant::Portable => "",
            ArchVariant::Specific => "a",
            ArchVariant::Family => "f",
        }
    }
}

impl Arch {
    /// Reads `sm_90`, `compute_90`, `90`, `9.0`, and the variants `sm_90a`, `sm_100f`; `None`
    /// for anything else (`FromStr` turns that into [`Error::InvalidArch`](crate::Error::InvalidArch)).
    pub(crate) fn parse(text: &str) -> Option<Arch> {
        let trimmed = text.trim();
        if let Some((major, minor)) = trimmed.split_once('.') {
            return Some(Arch::new(major.parse().ok()?, minor.parse().ok()?));
        }
        let digits = trimmed
            .strip_prefix("sm_")
            .or_else(|| trimmed.strip_prefix("compute_"))
            .unwrap_or(trimmed);
        let (digits, variant) = match digits.as_bytes().last() {
            Some(b'a') => (&digits[..digits.len() - 1], ArchVariant::Specific),
            Some(b'f') => (&digits[..digits.len() - 1], ArchVariant::Family),
            _ => (digits, ArchVariant::Portable),
        };
        let number: u32 = digits.parse().ok()?;
        (number >= 10).then(|| Arch::new(number / 10, number % 10).with(variant))
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sm())
    }
}
