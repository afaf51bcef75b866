//! One function per C call, a level above [`crate::sys`]: each turns the call's status into a
//! [`Result`](crate::Result), takes and returns raw handles, and does nothing else. The safe types
//! (`Library`, `DeviceBuffer`, `Program`, `Linker`, ...) are written on top of these functions and
//! never call C themselves; this is the layer cudarc calls `result`.
//!
//! A function whose arguments the compiler cannot check (a handle that must still be alive, a host
//! pointer the library writes through) is an `unsafe fn` whose `# Safety` section says what the
//! caller vouches for.

use std::ffi::CString;

use crate::error::{Error, Result};

pub(crate) mod driver;
pub(crate) mod library;
pub(crate) mod nvfatbin;
pub(crate) mod nvjitlink;
pub(crate) mod nvrtc;
pub(crate) mod runtime;

/// `text` as a C string for a C call; [`Error::NulByte`] naming `what` ("kernel name", "NVRTC
/// option", ...) when it holds a NUL, which would cut it short.
pub(crate) fn c_string(what: &'static str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::NulByte {
        what,
        text: text.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_a_nul_is_refused_naming_what_it_is() {
        let error = c_string("kernel name", "sax\0py").unwrap_err();
        assert!(
            matches!(&error, Error::NulByte { what: "kernel name", text } if text == "sax\0py"),
            "{error:?}"
        );
        assert_eq!(
            c_string("kernel name", "saxpy").unwrap().as_bytes(),
            b"saxpy"
        );
    }
}
