//! Handles and raw arguments at the C boundary.
//!
//! A handle (`cudyn_library*`, `cudyn_kernel*`, ...) is never dereferenced: its value is a
//! number that names an entry of a registry of the handle's type, and every call looks it up.
//! So a freed handle, a handle of another type or a made-up pointer is
//! `CUDYN_ERROR_INVALID_ARGUMENT`, never a crash; numbers are never reused, so a freed handle
//! cannot come to name a newer object. The registry holds the cudyn value (`Library`, `Kernel`,
//! ...) in an `Arc`: a call in progress keeps what it uses alive even if another thread frees
//! the handle meanwhile.

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::status::{cudyn_status, entry, Failure};

/// The next handle number, shared by every type so that a handle of one type is no handle of
/// another.
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(1);

/// The live handles of one type: `H` is the opaque C type, `T` the value behind it.
pub(crate) struct Registry<H, T> {
    /// The C type's name, for messages.
    name: &'static str,
    live: RwLock<BTreeMap<usize, Arc<T>>>,
    _handle: PhantomData<fn() -> H>,
}

impl<H, T> Registry<H, T> {
    pub(crate) const fn new(name: &'static str) -> Self {
        Registry {
            name,
            live: RwLock::new(BTreeMap::new()),
            _handle: PhantomData,
        }
    }

    /// A new handle for `value`.
    pub(crate) fn insert(&self, value: T) -> *mut H {
        let number = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(number, Arc::new(value));
        std::ptr::without_provenance_mut(number)
    }

    /// The value behind `handle`.
    pub(crate) fn get(&self, handle: *const H) -> Result<Arc<T>, Failure> {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&handle.addr())
            .cloned()
            .ok_or_else(|| self.not_live(handle))
    }

    /// Removes `handle` and returns its value; a null handle is `None` (freeing nothing is
    /// allowed, as with C's `free`).
    pub(crate) fn remove(&self, handle: *mut H) -> Result<Option<Arc<T>>, Failure> {
        if handle.is_null() {
            return Ok(None);
        }
        self.live
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&handle.addr())
            .map(Some)
            .ok_or_else(|| self.not_live(handle))
    }

    fn not_live(&self, handle: *const H) -> Failure {
        if handle.is_null() {
            return Failure::invalid_argument(format!(
                "the {} handle is a null pointer: pass one a cudyn function made",
                self.name
            ));
        }
        Failure::invalid_argument(format!(
            "{handle:p} is not a live {} handle: it was freed already, or it is not one cudyn \
             made (a handle of another type, or an uninitialized variable)",
            self.name
        ))
    }
}

/// Runs an entry point whose result goes through the out-pointer `out` (named `name` in
/// messages): refused when `out` is null, before any work; written only when `compute`
/// succeeds.
///
/// # Safety
/// `out` is null or valid for writing a `T`.
pub(crate) unsafe fn entry_returning<T>(
    out: *mut T,
    name: &str,
    compute: impl FnOnce() -> Result<T, Failure>,
) -> cudyn_status {
    entry(|| {
        if out.is_null() {
            return Err(null_argument(name));
        }
        let value = compute()?;
        // SAFETY: not null, and the caller vouches that it is writable.
        unsafe { out.write(value) };
        Ok(())
    })
}

/// The failure of a null pointer passed as argument `name`.
pub(crate) fn null_argument(name: &str) -> Failure {
    Failure::invalid_argument(format!("`{name}` is a null pointer"))
}

/// The UTF-8 text of the C string argument `name`.
///
/// # Safety
/// `text` is null or a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn text_arg<'a>(text: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if text.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: the caller's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str()
        .map_err(|error| Failure::invalid_argument(format!("`{name}` is not UTF-8 text: {error}")))
}

/// The `count` C strings at `array`, named `name` in messages; none when `count` is 0.
///
/// # Safety
/// When `count` is not 0, `array` is null or points to `count` pointers, each null or a
/// NUL-terminated string, all valid and unchanged for `'a`.
pub(crate) unsafe fn text_array_arg<'a>(
    array: *const *const c_char,
    count: usize,
    name: &str,
) -> Result<Vec<&'a str>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if array.is_null() {
        return Err(Failure::invalid_argument(format!(
            "`{name}` is a null pointer but its count is {count}"
        )));
    }
    // SAFETY: the caller's contract: `count` pointers.
    let pointers = unsafe { std::slice::from_raw_parts(array, count) };
    pointers
        .iter()
        .enumerate()
        // SAFETY: each is null (refused) or a valid string, as the caller vouches.
        .map(|(index, &text)| unsafe { text_arg(text, &format!("{name}[{index}]")) })
        .collect()
}

/// `len` bytes at `data`, named `name` in messages; empty when `len` is 0, whatever `data` is.
///
/// # Safety
/// When `len` is not 0, `data` is null or valid for reading `len` bytes for `'a`.
pub(crate) unsafe fn bytes_arg<'a>(
    data: *const std::ffi::c_void,
    len: usize,
    name: &str,
) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Failure::invalid_argument(format!(
            "`{name}` is a null pointer but its size is {len} bytes"
        )));
    }
    // SAFETY: not null, and the caller vouches for `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Thing;

    #[test]
    fn a_handle_works_until_it_is_removed_and_never_again() {
        let things = Registry::<Thing, u32>::new("thing");
        let first = things.insert(7);
        let second = things.insert(8);
        assert_ne!(first, second);
        assert_eq!(*things.get(first).unwrap(), 7);
        assert_eq!(*things.remove(first).unwrap().unwrap(), 7);
        let error = things.get(first).unwrap_err();
        assert!(format!("{error:?}").contains("not a live thing handle"));
        assert!(things.remove(first).is_err(), "a second free is refused");
        assert!(things.remove(std::ptr::null_mut()).unwrap().is_none());
        assert!(things.get(std::ptr::null()).is_err());
        assert_eq!(*things.get(second).unwrap(), 8);
    }

    #[test]
    fn a_handle_of_one_registry_is_unknown_to_another() {
        let numbers = Registry::<Thing, u32>::new("number");
        let words = Registry::<Thing, &str>::new("word");
        let number = numbers.insert(1);
        let word = words.insert("one");
        assert!(words.get(number).is_err());
        assert!(numbers.get(word).is_err());
    }

    #[test]
    fn a_value_in_use_outlives_its_removed_handle() {
        let things = Registry::<Thing, String>::new("thing");
        let handle = things.insert("kept".to_owned());
        let in_use = things.get(handle).unwrap();
        things.remove(handle).unwrap();
        assert_eq!(*in_use, "kept");
    }
}
