//! Loading: the options, sharing, and the check that only whole, loadable device code reaches
//! the driver.

use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;

use super::jit::{JitArgs, Logs};
pub use super::jit::{JitLog, JitOptions};
use super::registry::{KeyParts, Published, Users};
use super::{Backend, Inner, Library, SHARED};
use crate::api::library::{LibraryApi, LoadOptions};
use crate::builder::setters;
use crate::context;
use crate::error::{Error, Result};
use crate::image::{Checked, Facts, ImageKind};
use crate::sys::driver;

/// Options for loading a library, beyond the JIT's. Built from the default with its setters, as
/// [`JitOptions`] is.
///
/// ```no_run
/// use cudyn::{Library, LibraryOptions};
///
/// let bytes = std::fs::read("kernels.cubin")?;
/// let library = Library::loader()
///     .options(LibraryOptions::default().preserve_binary(true))
///     .load(&bytes)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LibraryOptions {
    /// Let the driver use the loaded bytes in place instead of copying them
    /// (`CU_LIBRARY_BINARY_IS_PRESERVED`). cudyn then keeps its own copy of the bytes alive until
    /// the library is unloaded.
    pub preserve_binary: bool,
}

impl LibraryOptions {
    setters! {
        /// Lets the driver use the loaded bytes in place
        /// ([`preserve_binary`](LibraryOptions#structfield.preserve_binary)).
        preserve_binary(on: bool);
    }
}

/// Whether a load may share a library already loaded from identical device code with identical
/// options (see [the library module](super#loading-identical-code-once)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Sharing {
    /// Share unless the device code defines variables (`__device__`, `__constant__`,
    /// `__managed__`), which sharing would make common to every load; device code that cannot be
    /// inspected counts as defining some. The default.
    #[default]
    Auto,
    /// Share, variables included: every load sees and changes the same device variables.
    Always,
    /// Load a library of this load's own, and let no later load share it.
    Never,
}

/// Loads a library with options; made by [`Library::loader`].
#[derive(Debug, Clone, Default)]
pub struct LibraryLoader {
    jit: JitOptions,
    options: LibraryOptions,
    backend: Option<Backend>,
    /// Name expressions (`saxpy<float>`) and the lowered names NVRTC gave them.
    names: Vec<(String, String)>,
    sharing: Sharing,
}

/// How much of an image a load checks before the driver sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Checks {
    /// Everything (`Image::validate`): bytes from anywhere.
    Whole,
    /// What NVRTC's or nvJitLink's output needs (a `Compiled` not checked yet): its kind, and
    /// that a cubin is not relocatable.
    CompilerOutput,
    /// Nothing more: compiler output checked when it was made, with what that check found
    /// (a `Compiled` from the compile cache, or stored in it).
    Done(Checked),
}

impl LibraryLoader {
    /// Sets the JIT options.
    pub fn jit(mut self, jit: JitOptions) -> Self {
        self.jit = jit;
        self
    }

    /// Sets the library options.
    pub fn options(mut self, options: LibraryOptions) -> Self {
        self.options = options;
        self
    }

    /// Loads through `backend` instead of [`Backend::preferred`]; asking for the runtime fails
    /// when no runtime with the library API is found.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Sets whether this load may share a library loaded from identical device code with
    /// identical options; [`Sharing::Auto`] by default.
    ///
    /// ```no_run
    /// use cudyn::{Library, Sharing};
    /// let image = std::fs::read("counter.cubin")?;
    /// // The image defines a __device__ counter: each load gets a counter of its own...
    /// let first = Library::load(&image)?;
    /// let second = Library::load(&image)?;
    /// assert_ne!(first.as_raw(), second.as_raw());
    /// // ...unless the loads ask to share it.
    /// let shared = Library::loader().sharing(Sharing::Always).load(&image)?;
    /// let also_shared = Library::loader().sharing(Sharing::Always).load(&image)?;
    /// assert_eq!(shared.as_raw(), also_shared.as_raw());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sharing(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// Loads a .fatbin, .cubin or .ptx file.
    ///
    /// The whole file is read into memory, checked, and those same bytes are handed to the
    /// driver (`cudaLibraryLoadData`, not `cudaLibraryLoadFromFile`): every byte the driver sees
    /// was checked, and a file that changes on disk meanwhile cannot slip past the check. Errors
    /// about the contents name the file.
    pub fn from_file(&self, path: impl AsRef<Path>) -> Result<Library> {
        let path = path.as_ref();
        let image = std::fs::read(path).map_err(|error| Error::read_file(path, error))?;
        self.load_checked(
            &self.names,
            &image,
            &|| path.display().to_string(),
            Checks::Whole,
        )
    }

    /// Loads device code from memory: a cubin or fatbin, or PTX text (a terminating NUL is added
    /// when missing). Anything else (LTO-IR, a host program, garbage) is refused before CUDA sees
    /// it, with an error saying what it is.
    ///
    /// PTX is JIT-compiled during the load, into the current context, so PTX the JIT rejects (for
    /// one newer than the driver) fails here with the JIT's log rather than at the first kernel
    /// lookup or launch; cubins and fatbins load into contexts when the driver's module-loading
    /// mode says (lazily, by default).
    pub fn load(&self, image: impl AsRef<[u8]>) -> Result<Library> {
        let image = image.as_ref();
        self.load_checked(
            &self.names,
            image,
            &|| crate::image::bytes_given(image),
            Checks::Whole,
        )
    }

    /// Checks `image` (named by `what` in errors) and loads it with the name expressions `names`
    /// (the loader's own, or a compile's), or shares a library loaded from the same code with
    /// the same options.
    pub(crate) fn load_checked(
        &self,
        names: &[(String, String)],
        image: &[u8],
        what: &dyn Fn() -> String,
        checks: Checks,
    ) -> Result<Library> {
        let detected = crate::image::detected_with_text(image, what)?;
        let kind = detected.kind;
        // The key under which a load that may share looks for a library: the image hashed once,
        // for the key and for the check (which recalls a fatbin's compressed entries by it).
        let digest = (self.sharing != Sharing::Never).then(|| match checks {
            Checks::Done(checked) => checked.digest,
            Checks::Whole | Checks::CompilerOutput => crate::image::digest(image),
        });
        // The driver believes the image's own headers (the load call takes no length): only
        // bytes checked whole and loadable reach it. PTX's text, read by detection, is not read
        // as text again.
        let check = || match checks {
            Checks::Whole => {
                crate::image::validate_loadable(image, detected, digest.as_ref(), what)
            }
            Checks::CompilerOutput => crate::image::validate_compiler_output(image, detected, what),
            Checks::Done(checked) => Ok(checked.facts),
        };
        let backend = self.backend.unwrap_or_else(Backend::preferred);
        let Some(digest) = digest else {
            let facts = check()?;
            return Ok(Library::from(
                self.load_new(names, image, kind, backend, facts)?,
            ));
        };
        let key = KeyParts {
            image: digest,
            jit: &self.jit,
            options: &self.options,
            backend,
            names,
        }
        .key();
        let found = SHARED.find(&key);
        if let Some(shared) = &found {
            // The key covers every byte: these are the bytes checked when the library was
            // loaded, so they need no second check.
            if self.may_join(shared) {
                let library = Library {
                    inner: Arc::clone(shared),
                };
                return entered(library, kind);
            }
        }
        let facts = check()?;
        if found.is_some() && self.sharing != Sharing::Always {
            // The code defines variables and the library found does not share them with this
            // load. A load that asks to share them takes the library's place for later loads
            // that ask the same; any other gets a library no later load finds.
            return Ok(Library::from(
                self.load_new(names, image, kind, backend, facts)?,
            ));
        }
        let inner = self.load_new(names, image, kind, backend, facts)?;
        let retain = self.retainable_bytes(image, facts);
        match SHARED.publish(key, inner, retain, found.as_ref()) {
            Published::Fresh(fresh) => Ok(Library { inner: fresh }),
            // Another load of the same code finished first: its library is used, this one
            // unloaded.
            Published::Raced { first, fresh } if self.may_join(&first) => {
                drop(fresh);
                entered(Library { inner: first }, kind)
            }
            Published::Raced { fresh, .. } => Ok(Library { inner: fresh }),
        }
    }

    /// The memory a library of `image` holds while kept after its last user (see `retention`),
    /// or `None` when it may not be kept: about its image's size for code without variables;
    /// for code with variables, loaded with [`Sharing::Always`] (whose loads share the
    /// variables anyway), that and the variables the image holds no bytes for, when known.
    fn retainable_bytes(&self, image: &[u8], facts: Facts) -> Option<usize> {
        if !facts.defines_variables {
            return Some(image.len());
        }
        if self.sharing != Sharing::Always {
            return None;
        }
        facts
            .uninitialized_bytes
            .map(|bytes| bytes.saturating_add(image.len()))
    }

    /// Whether this load may share `shared`, loaded from the same image: when both loads asked
    /// for [`Sharing::Always`], or when the code defines no variables.
    fn may_join(&self, shared: &Inner) -> bool {
        (self.sharing == Sharing::Always && shared.shared_always) || !shared.defines_variables
    }

    /// Loads `image`, of `kind`, checked with `facts`, through `backend`, with the name
    /// expressions `names`: always a new library.
    fn load_new(
        &self,
        names: &[(String, String)],
        image: &[u8],
        kind: ImageKind,
        backend: Backend,
        facts: Facts,
    ) -> Result<Inner> {
        let needs_nul = kind == ImageKind::Ptx && image.last() != Some(&0);
        let owned = (needs_nul || self.options.preserve_binary).then(|| {
            let mut owned = Vec::with_capacity(image.len() + 1);
            owned.extend_from_slice(image);
            if needs_nul {
                owned.push(0);
            }
            owned.into_boxed_slice()
        });
        let api = LibraryApi::new(backend)?;
        // The boxed bytes do not move when the box does: they stay where `data` points while
        // `owned` lives, through this call and, when preserved, in the library.
        let data = owned.as_deref().unwrap_or(image).as_ptr();
        let load = |jit: &mut JitArgs| {
            let mut library_options = [driver::CU_LIBRARY_BINARY_IS_PRESERVED];
            // The option is a flag; its value is the flag's value.
            let mut library_values = [std::ptr::without_provenance_mut::<c_void>(1)];
            let preserve = usize::from(self.options.preserve_binary);
            let (options, values) = jit.arrays();
            let load_options = LoadOptions {
                jit: options,
                jit_values: values,
                library: &mut library_options[..preserve],
                library_values: &mut library_values[..preserve],
            };
            // SAFETY: `data` is device code of a loadable kind, NUL-terminated when it is PTX,
            // alive through the call (and the library's life when preserved: `owned` moves into
            // it); the JIT values point into `jit`'s log buffers, which live as long as the
            // library.
            unsafe { api.load_data(data.cast(), load_options) }
        };
        let mut jit = JitArgs::new(&self.jit, kind, Logs::WhenTheJitMayRun)?;
        let mut loaded = load(&mut jit);
        if loaded.is_err() && kind == ImageKind::Fatbin && !jit.has_logs() {
            // A fatbin loaded without log buffers failed: again with them, so that the error
            // says what the JIT said, if it ran.
            jit = JitArgs::new(&self.jit, kind, Logs::Always)?;
            loaded = load(&mut jit);
        }
        let raw = loaded.map_err(|error| jit.logs().attach(error))?;
        let mut inner = Inner {
            raw,
            backend: api.backend(),
            owned: true,
            log: JitLog::default(),
            names: names.to_vec(),
            offline_image: (driver_lacks_param_info() || kind == ImageKind::Ptx)
                .then(|| Arc::from(image)),
            _image: owned.filter(|_| self.options.preserve_binary),
            _jit_buffers: Default::default(),
            shared_always: self.sharing == Sharing::Always,
            defines_variables: facts.defines_variables,
            kernels: Default::default(),
        };
        // With lazy module loading (the driver's default) PTX would be compiled at the first
        // kernel lookup or launch, and a PTX the JIT rejects would load "successfully" and fail
        // later. Loading it into the current context now runs the JIT while the logs are
        // captured, so a failure is a load error carrying the JIT's log. (Dropping `inner`
        // unloads the library.)
        if kind == ImageKind::Ptx {
            if let Err(error) = load_into_current_context(raw) {
                return Err(jit.logs().attach(error));
            }
        }
        inner.log = jit.logs();
        // A later lazy load into another context may still write the log buffers the driver was
        // given: they live as long as the library. The option arrays were read by the load call
        // only (and have moved since), so they are not kept: a smaller library state to move.
        inner._jit_buffers = [jit.info, jit.error];
        Ok(inner)
    }
}

impl From<Inner> for Library {
    /// A library of one load's own.
    fn from(inner: Inner) -> Library {
        Library {
            inner: Users::own(inner),
        }
    }
}

/// `library`, shared by a load of `kind`: PTX is loaded into the current context as a new load
/// would be, so that every load of PTX has run the JIT on the current device.
fn entered(library: Library, kind: ImageKind) -> Result<Library> {
    if kind == ImageKind::Ptx {
        load_into_current_context(library.inner.raw)
            .map_err(|error| library.inner.log.attach(error))?;
    }
    Ok(library)
}

/// Loads `library` into the current context now (`cuLibraryGetModule`), making one current if
/// none is; for PTX this runs the JIT.
fn load_into_current_context(library: driver::CUlibrary) -> Result<()> {
    let driver = context::current()?.driver;
    // SAFETY: the library was just loaded and is not unloaded before this returns.
    unsafe { crate::api::driver::library_module(driver, library) }.map(drop)
}

/// Whether the driver lacks `cuKernelGetParamInfo` (before 12.4), so that launches must check
/// arguments against layouts read offline from the device code.
fn driver_lacks_param_info() -> bool {
    crate::sys::driver().is_ok_and(|driver| driver.api.cuKernelGetParamInfo.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a load checks of bytes from outside: their kind, and what the check found.
    fn checked(bytes: &[u8], what: &str) -> Result<(ImageKind, Facts)> {
        let what = || what.to_owned();
        let detected = crate::image::detected_with_text(bytes, &what)?;
        let facts = crate::image::validate_loadable(bytes, detected, None, &what)?;
        Ok((detected.kind, facts))
    }

    #[test]
    fn only_loadable_device_code_reaches_the_driver() {
        let ptx = b"//\n.version 9.0\n.target sm_90\n.address_size 64\n";
        assert_eq!(checked(ptx, "ptx").unwrap().0, ImageKind::Ptx);
        let garbage = checked(b"hello, world", "greeting.bin").unwrap_err();
        assert!(
            matches!(&garbage, Error::NotDeviceCode { what, .. } if what == "greeting.bin"),
            "{garbage:?}"
        );
        // The NVVM container magic of LTO-IR, which needs nvJitLink before it can load.
        let ltoir = [0xed, 0x43, 0x4e, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let error = checked(&ltoir, "piece.ltoir").unwrap_err();
        assert!(
            matches!(
                &error,
                Error::NotLoadable {
                    kind: ImageKind::LtoIr,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("link"), "{error}");
        // Refused before any CUDA library is needed: this runs without a GPU.
        let refused = Library::load(b"not device code").unwrap_err();
        assert!(
            matches!(refused, Error::NotDeviceCode { .. }),
            "{refused:?}"
        );
    }

    #[test]
    fn device_code_with_variables_is_told_apart_from_code_without() {
        use crate::compile::{Arch, FatbinBuilder, Output, Program};
        const KERNEL: &str = r#"extern "C" __global__ void scale(float *x) { x[0] *= 2.0f; }"#;
        // The variables, whether the code defines some, and the bytes of those a cubin holds no
        // bytes for (uninitialized ones: what a loaded library takes beyond its image).
        let cases = [
            ("", false, 0),
            ("__device__ int counter;", true, 4),
            ("__device__ float table[1024];", true, 4096),
            ("__device__ float initialized[4] = {1, 2, 3, 4};", true, 0),
            // Constant banks are stored whole in the image, initialized or not.
            ("__constant__ float table[4];", true, 0),
            ("__managed__ int flag;", true, 4),
        ];
        let arch = Arch::new(9, 0);
        for (variables, defines, uninitialized) in cases {
            let compile = |output| {
                Program::new(format!("{variables}\n{KERNEL}"))
                    .arch(arch)
                    .output(output)
                    .compile()
                    .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)")
                    .code()
                    .to_vec()
            };
            let (cubin, ptx) = (compile(Output::Cubin), compile(Output::Ptx));
            let mut fatbin = FatbinBuilder::new().expect("nvFatbin (the CUDA wheels' venv)");
            fatbin.add_cubin(&cubin, arch, "k.cu").unwrap();
            fatbin.add_ptx(&ptx, arch, "k.cu").unwrap();
            let fatbin = fatbin.finish().unwrap();
            for (what, code) in [("cubin", &cubin), ("PTX", &ptx), ("fatbin", &fatbin)] {
                let (kind, facts) = checked(code, what).unwrap();
                assert_eq!(facts.defines_variables, defines, "{variables:?} as {what}");
                // PTX declares sizes that are not read: unknown when there are variables (so
                // a fatbin that holds PTX with variables too).
                let size_known = !defines || what == "cubin";
                assert_eq!(
                    facts.uninitialized_bytes,
                    size_known.then_some(uninitialized),
                    "{variables:?} as {what}"
                );
                // Compiler output, checked less, is told apart the same way.
                let output =
                    crate::image::validate_compiler_output(code, kind.into(), &|| what.into());
                assert_eq!(
                    output.unwrap().defines_variables,
                    defines,
                    "{variables:?} as {what}, compiler output"
                );
            }
        }
        // Compiler output whose symbol table cannot be read is assumed to define some, so it is
        // never shared by default nor kept after its last user.
        let cubin = Program::new(KERNEL).arch(arch).compile().unwrap();
        let header_only = &cubin.code()[..64];
        let facts =
            crate::image::validate_compiler_output(header_only, ImageKind::Cubin.into(), &|| {
                "cut".into()
            });
        assert!(facts.unwrap().defines_variables);
    }
}
