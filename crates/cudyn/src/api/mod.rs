//! One function per C call, a level above [`crate::sys`]: each turns the call's status into a
//! [`Result`](crate::Result), takes and returns raw handles, and does nothing else. The safe types
//! (`Library`, `DeviceBuffer`, `Program`, `Linker`, ...) are written on top of these functions and
//! never call C themselves; this is the layer cudarc calls `result`.
//!
//! A function whose arguments the compiler cannot check (a handle that must still be alive, a host
//! pointer the library writes through) is an `unsafe fn` whose `# Safety` section says what the
//! caller vouches for.

use std::ffi::{CStr, CString};

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

/// Calls `with` on `text` as a C string, refused as [`c_string`] refuses it; a text shorter than
/// [`STACK_C_STRING`] is copied into a buffer on the stack rather than allocated.
pub(crate) fn with_c_string<R>(
    what: &'static str,
    text: &str,
    with: impl FnOnce(&CStr) -> Result<R>,
) -> Result<R> {
    let bytes = text.as_bytes();
    if bytes.len() >= STACK_C_STRING {
        return with(&c_string(what, text)?);
    }
    let mut buffer = [0u8; STACK_C_STRING];
    buffer[..bytes.len()].copy_from_slice(bytes);
    // The buffer's zeros end the text: only a NUL inside it is refused.
    let c_text =
        CStr::from_bytes_with_nul(&buffer[..=bytes.len()]).map_err(|_| Error::NulByte {
            what,
            text: text.to_owned(),
        })?;
    with(c_text)
}

/// The size of the stack buffer of [`with_c_string`]: kernel names are shorter, but for long
/// mangled C++ names.
const STACK_C_STRING: usize = 128;

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

    #[test]
    fn c_strings_on_the_stack_or_not_are_refused_and_passed_alike() {
        let long = "k".repeat(STACK_C_STRING);
        for text in ["", "saxpy", &long[1..], &long] {
            let passed = with_c_string("kernel name", text, |c_text| Ok(c_text.to_owned()));
            assert_eq!(passed.unwrap().as_bytes(), text.as_bytes());
            for cut in [0, text.len() / 2, text.len()] {
                let with_nul = format!("{}\0{}", &text[..cut], &text[cut..]);
                let error = with_c_string("kernel name", &with_nul, |_| Ok(())).unwrap_err();
                assert!(
                    matches!(&error, Error::NulByte { what: "kernel name", text } if *text == with_nul),
                    "{error:?}"
                );
            }
        }
    }
}
