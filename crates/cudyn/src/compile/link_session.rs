//! One nvJitLink handle and what it must keep alive: the calls of a link, made on the link
//! thread, with nvJitLink's logs attached to their failures. The [`Linker`](super::Linker) of a
//! link in this process drives one; a link worker process runs [`link_all`].

use std::ffi::CString;
use std::marker::PhantomData;

use super::compiled::Output;
use super::link_thread::{self, Handle};
use super::{c_strings, text_of};
use crate::api::c_string;
use crate::api::nvjitlink as api;
use crate::component::Component;
use crate::error::{Error, Result};
use crate::kinds::InputKind;
use crate::sys::nvjitlink;

/// The kind nvJitLink is told for an input of `kind`.
fn raw_kind(kind: InputKind) -> nvjitlink::nvJitLinkInputType {
    match kind {
        InputKind::Cubin => nvjitlink::NVJITLINK_INPUT_CUBIN,
        InputKind::Ptx => nvjitlink::NVJITLINK_INPUT_PTX,
        InputKind::LtoIr => nvjitlink::NVJITLINK_INPUT_LTOIR,
        InputKind::Fatbin => nvjitlink::NVJITLINK_INPUT_FATBIN,
        InputKind::Object => nvjitlink::NVJITLINK_INPUT_OBJECT,
        InputKind::Library => nvjitlink::NVJITLINK_INPUT_LIBRARY,
        InputKind::Any => nvjitlink::NVJITLINK_INPUT_ANY,
    }
}

/// A live nvJitLink handle, its inputs borrowed for `'a`.
#[derive(Debug)]
pub(crate) struct Session<'a> {
    /// Used on the link thread only (see [`link_thread`]).
    raw: Handle,
    /// The inputs' names: nvJitLink keeps the pointers and reads them when it writes its logs
    /// (measured with nvJitLink 13.0: a name freed after `nvJitLinkAddData` came out as garbage
    /// in an undefined-reference error).
    names: Vec<CString>,
    inputs: PhantomData<&'a [u8]>,
    /// The bytes of the inputs it owns, kept as the borrowed inputs are (`'a`): until the handle
    /// is destroyed.
    owned: Vec<Box<[u8]>>,
}

impl<'a> Session<'a> {
    /// Starts a link with nvJitLink's `options` (`nvJitLinkCreate`).
    pub(crate) fn create(options: &[String]) -> Result<Self> {
        let strings = c_strings("link option", options)?;
        let (raw, created) = link_thread::run(|| {
            let mut raw = std::ptr::null_mut();
            let created = api::create(&mut raw, &strings);
            (Handle::new(raw), created)
        });
        if raw.get().is_null() {
            // nvJitLink keeps no handle, and so no log, when it rejects an option.
            return Err(created.err().unwrap_or(Error::EmptyOutput {
                producer: Component::NvJitLink,
                what: "link handle",
                hint: "the nvJitLink library is probably damaged; reinstall it",
            }));
        }
        let session = Session {
            raw,
            names: Vec::new(),
            inputs: PhantomData,
            owned: Vec::new(),
        };
        session.with_logs(created)?;
        Ok(session)
    }

    /// Hands nvJitLink `bytes` (checked to be `kind`) under `name`.
    pub(crate) fn add(&mut self, kind: InputKind, bytes: &'a [u8], name: &str) -> Result<()> {
        let name = c_string("input name", name)?;
        // SAFETY: `bytes` stay borrowed for the session's life ('a), which outlasts the handle.
        let added = unsafe { self.add_unchecked_life(kind, bytes, name) };
        self.with_logs(added)
    }

    /// Hands nvJitLink `bytes` (checked to be `kind`) under `name`, keeping them until the
    /// handle is destroyed.
    pub(crate) fn add_owned(
        &mut self,
        kind: InputKind,
        bytes: Box<[u8]>,
        name: &str,
    ) -> Result<()> {
        let name = c_string("input name", name)?;
        // SAFETY: the bytes move into `self.owned` right after, whatever nvJitLink answered;
        // moving the box does not move its heap bytes, which stay there until the handle is
        // destroyed (`Drop` destroys it before the fields are dropped).
        let added = unsafe { self.add_unchecked_life(kind, &bytes, name) };
        self.owned.push(bytes);
        self.with_logs(added)
    }

    /// # Safety
    /// `bytes` stay alive and unchanged until the handle is destroyed: nvJitLink may read them
    /// until the link.
    unsafe fn add_unchecked_life(
        &mut self,
        kind: InputKind,
        bytes: &[u8],
        name: CString,
    ) -> Result<()> {
        let raw = self.raw;
        let added = link_thread::run(|| {
            // SAFETY: the handle is live; the caller keeps `bytes` alive for the handle's life,
            // and the name is kept in `self.names` until the handle is destroyed.
            unsafe { api::add_data(raw.get(), raw_kind(kind), bytes, &name) }
        });
        // The heap bytes of a CString do not move with it.
        self.names.push(name);
        added
    }

    /// Links (`nvJitLinkComplete`) and returns the cubin, or the PTX when `ptx`.
    pub(crate) fn complete(&self, ptx: bool) -> Result<(Output, Vec<u8>)> {
        let raw = self.raw;
        let completed = link_thread::run(|| {
            // SAFETY: the handle is live and its inputs are kept alive as long as it is.
            unsafe { api::complete(raw.get()) }
        });
        self.with_logs(completed)?;
        link_thread::run(|| {
            // SAFETY: the handle is live and the link completed.
            unsafe {
                Ok(if ptx {
                    (Output::Ptx, api::get_linked_ptx(raw.get())?)
                } else {
                    (Output::Cubin, api::get_linked_cubin(raw.get())?)
                })
            }
        })
    }

    /// nvJitLink's info log so far.
    pub(crate) fn info_log(&self) -> String {
        let raw = self.raw;
        readable_log(link_thread::run(|| {
            // SAFETY: the handle is live.
            unsafe { api::get_info_log(raw.get()) }
        }))
    }

    /// nvJitLink's error log so far.
    pub(crate) fn error_log(&self) -> String {
        let raw = self.raw;
        readable_log(link_thread::run(|| {
            // SAFETY: the handle is live.
            unsafe { api::get_error_log(raw.get()) }
        }))
    }

    /// Attaches the logs to a failed call's error.
    fn with_logs(&self, outcome: Result<()>) -> Result<()> {
        outcome.map_err(|error| match error {
            Error::Cuda(mut failure) => {
                let mut log = self.error_log();
                if log.contains(UNDEFINED_REFERENCE) {
                    failure.hint = Some(UNDEFINED_HINT.to_owned());
                }
                let info = self.info_log();
                if !info.trim().is_empty() {
                    log.push_str("\ninfo log:\n");
                    log.push_str(&info);
                }
                failure.log = Some(log);
                Error::Cuda(failure)
            }
            other => other,
        })
    }
}

/// A link's output: what the code is, the code, and nvJitLink's info log.
pub(crate) type LinkOutput = (Output, Vec<u8>, String);

/// Links `inputs` (kind, name, bytes; checked already) with nvJitLink's `options`, in one go:
/// the work of a link worker process.
pub(crate) fn link_all(
    options: &[String],
    ptx: bool,
    inputs: Vec<(InputKind, String, Vec<u8>)>,
) -> Result<LinkOutput> {
    let mut session = Session::create(options)?;
    for (kind, name, bytes) in inputs {
        session.add_owned(kind, bytes.into_boxed_slice(), &name)?;
    }
    let (output, code) = session.complete(ptx)?;
    Ok((output, code, session.info_log()))
}

/// What nvJitLink's error log says of a symbol an input uses and no input defines, a failure it
/// reports with the status of an internal error.
const UNDEFINED_REFERENCE: &str = "Undefined reference";

/// What a link that failed on an undefined reference needs.
pub(crate) const UNDEFINED_HINT: &str = "The link is missing a definition (the log names the \
    symbol and the input that uses it): add the input that defines it, such as the piece \
    compiled from its source, or libcudadevrt.a for kernels that launch kernels.";

/// A log as text. A log that cannot be read is reported as its reason: it is read only to
/// explain something else.
fn readable_log(bytes: Result<Vec<u8>>) -> String {
    bytes.map_or_else(|error| format!("(log unavailable: {error})"), text_of)
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let raw = self.raw;
        let _ = link_thread::run(|| {
            // SAFETY: the handle is live and destroyed once; a failure leaks it, nothing more.
            unsafe { api::destroy(&mut raw.get()) }
        });
    }
}
