//! PTX: text that reads to its end (no comment, string, bracket or statement left open) and
//! declares its `.version` and `.target`.

use super::Facts;
use crate::inspect::{ptx, ParseError};

/// Whether `bytes` look like PTX text (see [`ptx::looks_like_ptx`]).
pub(super) fn looks_like(bytes: &[u8]) -> bool {
    ptx::looks_like_ptx(bytes)
}

pub(super) fn validate(bytes: &[u8]) -> Result<Facts, ParseError> {
    let outline = ptx::check(bytes)?;
    if !outline.version {
        return Err(ParseError::new(
            "PTX text",
            "it has no `.version` directive",
        ));
    }
    if !outline.target {
        return Err(ParseError::new("PTX text", "it has no `.target` directive"));
    }
    // The size of PTX variables is not read here: unknown when there are some.
    Ok(if outline.variables {
        Facts::UNKNOWN
    } else {
        Facts::NO_VARIABLES
    })
}
