//! What the checks of the formats are for, what they find, and why they refuse.

use crate::parse_error::ParseError;

/// What an image is checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A load by the driver: relocatable code must be linked first.
    Load,
    /// An input of a link by nvJitLink, which takes relocatable code.
    Link,
}

/// What the check of an image found out on the way, for the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Whether the code defines device variables (`__device__`, `__constant__`, `__managed__`),
    /// which loads sharing a library would share.
    pub(crate) defines_variables: bool,
    /// The device memory its variables take beyond the image's own bytes (uninitialized ones),
    /// when known: always for a cubin, 0 for code without variables, unknown for PTX variables.
    pub(crate) uninitialized_bytes: Option<usize>,
}

impl Facts {
    /// Code without variables.
    pub(crate) const NO_VARIABLES: Facts = Facts {
        defines_variables: false,
        uninitialized_bytes: Some(0),
    };

    /// What is known of code that may define variables of unknown size.
    pub(crate) const UNKNOWN: Facts = Facts {
        defines_variables: true,
        uninitialized_bytes: None,
    };

    /// The facts of an image of which one of two parts is loaded (the entries of a fatbin): the
    /// variables of either, at most the larger size.
    pub(crate) fn either(self, other: Facts) -> Facts {
        Facts {
            defines_variables: self.defines_variables || other.defines_variables,
            uninitialized_bytes: self
                .uninitialized_bytes
                .zip(other.uninitialized_bytes)
                .map(|(one, other)| one.max(other)),
        }
    }
}

/// Why an image of a loadable kind is refused.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// It is damaged or truncated.
    Malformed(ParseError),
    /// It is relocatable device code; the text says which part.
    NeedsLinking(String),
}

impl From<ParseError> for Refusal {
    fn from(error: ParseError) -> Self {
        Refusal::Malformed(error)
    }
}

impl Refusal {
    /// This refusal, found inside `outer` (a fatbin entry).
    pub(crate) fn inside(self, outer: &str) -> Self {
        match self {
            Refusal::Malformed(error) => Refusal::Malformed(error.inside(outer)),
            Refusal::NeedsLinking(reason) => Refusal::NeedsLinking(format!("{outer}: {reason}")),
        }
    }
}
