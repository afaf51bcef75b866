//! Why bytes of a known kind of device code could not be read: a value every layer that reads
//! or reports on device code names.

/// Why bytes of a known kind could not be read: where (which structure, at which byte) and what
/// is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[error("{place}: {problem}")]
#[non_exhaustive]
pub struct ParseError {
    /// Where the damage is, e.g. "fatbin entry 2 (at byte 4096)" or "section header 7".
    pub place: String,
    /// What is wrong there.
    pub problem: String,
}

impl ParseError {
    pub(crate) fn new(place: impl Into<String>, problem: impl Into<String>) -> Self {
        ParseError {
            place: place.into(),
            problem: problem.into(),
        }
    }

    /// This error, found inside `outer` (e.g. the cubin of a fatbin entry).
    pub(crate) fn inside(mut self, outer: &str) -> Self {
        self.place = format!("{outer} > {}", self.place);
        self
    }
}
