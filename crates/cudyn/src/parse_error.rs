//! Why bytes of a known kind of device code could not be read: a value every layer that reads
//! or reports on device code names.

/// What kind of problem a [`ParseError`] reports, for a program to act on; its
/// [`message`](ParseError::message) says the rest to a person.
///
/// A structure that ends past the bytes given may come of a file cut short or of a damaged size
/// or offset field: no reader can tell the two apart, and both are [`Problem::Truncated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Problem {
    /// A structure runs past the end of the bytes given, or lies outside them: a header, a
    /// table, a section, a segment, an entry, a member, text that ends inside a comment, string,
    /// bracket or statement.
    Truncated,
    /// The bytes are not the format they were read as: no magic number of it, or an ELF class,
    /// byte order or machine that is not a cubin's.
    WrongFormat,
    /// A structure is damaged: a field holds a value no compiler writes, an index or offset
    /// names nothing that exists or something of the wrong kind, two structures claim the same
    /// bytes, or contents do not read as their format says.
    Damaged,
    /// A part the format requires is missing: a PTX `.version` or `.target`, a fatbin's
    /// entries, a kernel's attribute section.
    Missing,
    /// A compressed payload does not decompress to the size its header declares, is damaged,
    /// or declares more than cudyn decompresses.
    Compression,
    /// The bytes hold what cudyn does not read or check: obfuscated code, an entry kind, a
    /// parameter record form, or an ELF feature it does not know, the kernels of LTO-IR, an
    /// archive inside an archive.
    Unsupported,
}

/// Why bytes of a known kind could not be read: where (which structure, at which byte), what
/// kind of problem it is, and what is wrong there.
///
/// ```
/// use cudyn::inspect::Problem;
///
/// let error = cudyn::inspect::fatbin::parse(&[0x50, 0xed, 0x55, 0xba]).unwrap_err();
/// assert_eq!(error.problem, Problem::Truncated);
/// assert_eq!(error.place, "fatbin header");
/// assert_eq!(error.to_string(), "fatbin header: 4 bytes, fewer than its 16");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[error("{place}: {message}")]
#[non_exhaustive]
pub struct ParseError {
    /// Where the damage is, e.g. "fatbin entry 2 (at byte 4096)" or "section header 7".
    pub place: String,
    /// What kind of problem it is.
    pub problem: Problem,
    /// What is wrong there, in words.
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(
        place: impl Into<String>,
        problem: Problem,
        message: impl Into<String>,
    ) -> Self {
        ParseError {
            place: place.into(),
            problem,
            message: message.into(),
        }
    }

    /// This error, found inside `outer` (e.g. the cubin of a fatbin entry).
    pub(crate) fn inside(mut self, outer: &str) -> Self {
        self.place = format!("{outer} > {}", self.place);
        self
    }
}

/// A problem found before its place is known: what a reader of one part of a structure says,
/// which the reader of the whole places with [`Fault::at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub(crate) problem: Problem,
    pub(crate) message: String,
}

impl Fault {
    pub(crate) fn new(problem: Problem, message: impl Into<String>) -> Self {
        Fault {
            problem,
            message: message.into(),
        }
    }

    /// This problem, at `place`.
    pub(crate) fn at(self, place: impl Into<String>) -> ParseError {
        ParseError::new(place, self.problem, self.message)
    }
}

impl From<ParseError> for Fault {
    /// The problem of `error`, without its place (which the reader of the whole gives it anew).
    fn from(error: ParseError) -> Self {
        Fault {
            problem: error.problem,
            message: error.message,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
