//! Loading device code, compiling it with NVRTC, and unloading.

use std::ffi::{c_char, c_void};

use cudyn::{Arch, Backend, JitOptions, Library, LibraryLoader, LibraryOptions, Program, Sharing};

use crate::handles::{bytes_arg, entry_returning, text_arg, text_array_arg, Registry};
use crate::status::{cudyn_status, entry, Failure};

/// Device code loaded by cudyn: a reference to a loaded library. The library is released when
/// its last handle is unloaded and the last kernel taken from it is released (then unloaded, or
/// kept for a later identical load within cudyn's retention limits).
#[allow(non_camel_case_types)]
#[derive(Debug)]
pub struct cudyn_library {
    _opaque: [u8; 0],
}

pub(crate) static LIBRARIES: Registry<cudyn_library, Library> = Registry::new("cudyn_library");

/// `cudyn_load_options.backend`: the runtime when one with the library API (CUDA 12.8+) is
/// found, else the driver.
pub const CUDYN_BACKEND_PREFERRED: i32 = 0;
/// `cudyn_load_options.backend`: the runtime's library API (`cudaLibraryLoadData`).
pub const CUDYN_BACKEND_RUNTIME: i32 = 1;
/// `cudyn_load_options.backend`: the driver's library API (`cuLibraryLoadData`).
pub const CUDYN_BACKEND_DRIVER: i32 = 2;

/// `cudyn_load_options.sharing`: share a library already loaded from identical device code with
/// identical options, unless the code defines device variables (which every sharer would see).
pub const CUDYN_SHARING_AUTO: i32 = 0;
/// `cudyn_load_options.sharing`: share, device variables included.
pub const CUDYN_SHARING_ALWAYS: i32 = 1;
/// `cudyn_load_options.sharing`: load a library of this load's own, shared with no later load.
pub const CUDYN_SHARING_NEVER: i32 = 2;

/// Options for loading device code. Start from `cudyn_load_options_default()` and change what
/// you need; a null options pointer means the defaults.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cudyn_load_options {
    /// JIT optimization level 0 to 4, or -1 for the JIT's default (4). Used only for PTX.
    pub optimization_level: i32,
    /// Most registers a thread may use, or 0 for no limit. Used only for PTX.
    pub max_registers: u32,
    /// Generate debug information when JIT-compiling PTX.
    pub debug_info: bool,
    /// Generate line information when JIT-compiling PTX.
    pub line_info: bool,
    /// Make the JIT's info log verbose.
    pub verbose_log: bool,
    /// Capacity of each JIT log (info and error) in bytes, or 0 for the default (16 KiB).
    pub log_capacity: usize,
    /// Let the driver use the image in place (`CU_LIBRARY_BINARY_IS_PRESERVED`); cudyn keeps its
    /// own copy of the bytes alive until the library is unloaded.
    pub preserve_binary: bool,
    /// `CUDYN_BACKEND_PREFERRED`, `CUDYN_BACKEND_RUNTIME` or `CUDYN_BACKEND_DRIVER`.
    pub backend: i32,
    /// `CUDYN_SHARING_AUTO`, `CUDYN_SHARING_ALWAYS` or `CUDYN_SHARING_NEVER`: whether this load
    /// may share one loaded library with other loads of the same code, Rust's included.
    pub sharing: i32,
}

/// The default load options: JIT defaults, the preferred backend.
#[no_mangle]
pub extern "C" fn cudyn_load_options_default() -> cudyn_load_options {
    let jit = JitOptions::default();
    cudyn_load_options {
        optimization_level: -1,
        max_registers: 0,
        debug_info: jit.debug_info,
        line_info: jit.line_info,
        verbose_log: jit.verbose_log,
        log_capacity: 0,
        preserve_binary: LibraryOptions::default().preserve_binary,
        backend: CUDYN_BACKEND_PREFERRED,
        sharing: CUDYN_SHARING_AUTO,
    }
}

impl cudyn_load_options {
    fn loader(&self) -> Result<LibraryLoader, Failure> {
        let optimization_level = match self.optimization_level {
            -1 => None,
            level => Some(u32::try_from(level).map_err(|_| {
                Failure::invalid_argument(format!(
                    "optimization_level {level} is out of range: use 0 to 4, or -1 for the default"
                ))
            })?),
        };
        // Every field set, here and above: `carried_options` fails when cudyn gains an option
        // that the C options do not carry yet (the structs are `#[non_exhaustive]`, so a struct
        // literal cannot be the check).
        let mut jit = JitOptions::default();
        jit.optimization_level = optimization_level;
        jit.max_registers = (self.max_registers != 0).then_some(self.max_registers);
        jit.debug_info = self.debug_info;
        jit.line_info = self.line_info;
        jit.verbose_log = self.verbose_log;
        if self.log_capacity != 0 {
            jit.log_capacity = self.log_capacity;
        }
        let options = LibraryOptions::default().preserve_binary(self.preserve_binary);
        let sharing = match self.sharing {
            CUDYN_SHARING_AUTO => Sharing::Auto,
            CUDYN_SHARING_ALWAYS => Sharing::Always,
            CUDYN_SHARING_NEVER => Sharing::Never,
            other => {
                return Err(Failure::invalid_argument(format!(
                    "sharing {other} is none of CUDYN_SHARING_AUTO (0), CUDYN_SHARING_ALWAYS (1) \
                     or CUDYN_SHARING_NEVER (2)"
                )))
            }
        };
        let loader = Library::loader().jit(jit).options(options).sharing(sharing);
        match self.backend {
            CUDYN_BACKEND_PREFERRED => Ok(loader),
            CUDYN_BACKEND_RUNTIME => Ok(loader.backend(Backend::Runtime)),
            CUDYN_BACKEND_DRIVER => Ok(loader.backend(Backend::Driver)),
            other => Err(Failure::invalid_argument(format!(
                "backend {other} is none of CUDYN_BACKEND_PREFERRED (0), CUDYN_BACKEND_RUNTIME \
                 (1) or CUDYN_BACKEND_DRIVER (2)"
            ))),
        }
    }
}

/// The loader for `options`, the defaults when it is null.
///
/// # Safety
/// `options` is null or points to a `cudyn_load_options`.
unsafe fn loader_for(options: *const cudyn_load_options) -> Result<LibraryLoader, Failure> {
    // SAFETY: the caller's contract.
    match unsafe { options.as_ref() } {
        Some(options) => options.loader(),
        None => cudyn_load_options_default().loader(),
    }
}

/// Loads a .fatbin, .cubin or .ptx file. The file is read whole and checked before the driver
/// sees it (a damaged image is `CUDYN_ERROR_INVALID_IMAGE`, not a crash in the driver).
///
/// On success `*library` is a new handle; unload it with `cudyn_library_unload`.
///
/// # Safety
/// `path` is a NUL-terminated UTF-8 string; `options` is null or points to load options;
/// `library` is valid for writing a pointer. Null `path` or `library` is refused.
#[no_mangle]
pub unsafe extern "C" fn cudyn_library_load_file(
    path: *const c_char,
    options: *const cudyn_load_options,
    library: *mut *mut cudyn_library,
) -> cudyn_status {
    let compute = || {
        // SAFETY: the caller's contract.
        let (path, loader) = unsafe { (text_arg(path, "path")?, loader_for(options)?) };
        let loaded = loader.from_file(path)?;
        Ok(LIBRARIES.insert(loaded))
    };
    // SAFETY: the caller vouches that `library` is null or writable.
    unsafe { entry_returning(library, "library", compute) }
}

/// Loads device code from memory: a cubin, a fatbin or PTX text (`cudaLibraryLoadData`). The
/// `size` bytes are checked against the image's own headers first; the driver never reads
/// beyond them. cudyn copies what it needs: `image` may be freed after the call.
///
/// On success `*library` is a new handle; unload it with `cudyn_library_unload`.
///
/// # Safety
/// `image` points to `size` readable bytes; `options` is null or points to load options;
/// `library` is valid for writing a pointer. Null `image` or `library` is refused.
#[no_mangle]
pub unsafe extern "C" fn cudyn_library_load_data(
    image: *const c_void,
    size: usize,
    options: *const cudyn_load_options,
    library: *mut *mut cudyn_library,
) -> cudyn_status {
    let compute = || {
        if image.is_null() {
            return Err(crate::handles::null_argument("image"));
        }
        // SAFETY: the caller's contract.
        let (image, loader) = unsafe { (bytes_arg(image, size, "image")?, loader_for(options)?) };
        let loaded = loader.load(image)?;
        Ok(LIBRARIES.insert(loaded))
    };
    // SAFETY: the caller vouches that `library` is null or writable.
    unsafe { entry_returning(library, "library", compute) }
}

/// How `cudyn_library_compile` compiles. Zero-initialize it (`= {0}` in C, `{}` in C++) and set
/// what you need: every field's zero is its default.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct cudyn_compile_options {
    /// The name NVRTC reports the source under in its log; null for `"program.cu"`.
    pub name: *const c_char,
    /// The target architecture (`"sm_90"`, `"90"`, `"9.0"`); null for the current GPU's.
    pub arch: *const c_char,
    /// NVRTC options passed as they are (`"-DBLOCK=256"`, `"--use_fast_math"`).
    pub options: *const *const c_char,
    /// The number of entries of `options`.
    pub option_count: usize,
    /// C++ names to instantiate and find kernels by (`"saxpy<float>"`): after the load,
    /// `cudyn_library_kernel` accepts them as kernel names.
    pub name_expressions: *const *const c_char,
    /// The number of entries of `name_expressions`.
    pub name_expression_count: usize,
}

impl cudyn_compile_options {
    /// The program of `source` with these options.
    ///
    /// # Safety
    /// Every pointer field is null or as its documentation says, valid for the call.
    unsafe fn program(&self, source: &str) -> Result<Program, Failure> {
        let mut program = Program::new(source);
        // SAFETY: the caller's contract for every field.
        unsafe {
            if !self.name.is_null() {
                program = program.name(text_arg(self.name, "name")?);
            }
            if !self.arch.is_null() {
                program = program.arch(text_arg(self.arch, "arch")?.parse::<Arch>()?);
            }
            for option in text_array_arg(self.options, self.option_count, "options")? {
                program = program.option(option);
            }
            let expressions = text_array_arg(
                self.name_expressions,
                self.name_expression_count,
                "name_expressions",
            )?;
            for expression in expressions {
                program = program.name_expression(expression);
            }
        }
        Ok(program)
    }
}

/// Compiles CUDA C++ `source` with NVRTC (through cudyn's compile cache) for the current GPU, or
/// for `compile->arch`, and loads the result. A source that does not compile is
/// `CUDYN_ERROR_COMPILE`, with NVRTC's log and the source lines it points at in the message.
///
/// On success `*library` is a new handle; unload it with `cudyn_library_unload`.
///
/// # Safety
/// `source` is a NUL-terminated UTF-8 string; `compile` is null (defaults) or points to compile
/// options whose pointers are valid as documented; `load` is null or points to load options;
/// `library` is valid for writing a pointer. Null `source` or `library` is refused.
#[no_mangle]
pub unsafe extern "C" fn cudyn_library_compile(
    source: *const c_char,
    compile: *const cudyn_compile_options,
    load: *const cudyn_load_options,
    library: *mut *mut cudyn_library,
) -> cudyn_status {
    let compute = || {
        // SAFETY: the caller's contract.
        let (source, loader, compile) = unsafe {
            (
                text_arg(source, "source")?,
                loader_for(load)?,
                compile.as_ref(),
            )
        };
        let program = match compile {
            // SAFETY: the caller's contract for the options' pointers.
            Some(compile) => unsafe { compile.program(source)? },
            None => Program::new(source),
        };
        let loaded = loader.load_compiled(&program.compile()?)?;
        Ok(LIBRARIES.insert(loaded))
    };
    // SAFETY: the caller vouches that `library` is null or writable.
    unsafe { entry_returning(library, "library", compute) }
}

/// The library's raw handle, a `CUlibrary` that is also a `cudaLibrary_t`, for use with the
/// CUDA runtime or driver. It stays valid while this library handle or a kernel from it lives.
///
/// # Safety
/// `raw` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_library_raw(
    library: *const cudyn_library,
    raw: *mut *mut c_void,
) -> cudyn_status {
    let compute = || {
        let library = LIBRARIES.get(library)?;
        Ok(library.as_raw().cast())
    };
    // SAFETY: the caller vouches that `raw` is null or writable.
    unsafe { entry_returning(raw, "raw", compute) }
}

/// Gives up this handle. The library is unloaded once no handle and no kernel taken from it
/// (`cudyn_kernel`) remains: kernels keep their library loaded. Null does nothing; a handle
/// unloaded already is `CUDYN_ERROR_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn cudyn_library_unload(library: *mut cudyn_library) -> cudyn_status {
    entry(|| {
        LIBRARIES.remove(library)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names of a struct, read from its pretty `Debug` output: the fields at the first
    /// level of indentation.
    fn field_names(pretty_debug: &str) -> Vec<&str> {
        pretty_debug
            .lines()
            .filter_map(|line| line.strip_prefix("    "))
            .filter(|line| !line.starts_with(' '))
            .filter_map(|line| line.split_once(": ").map(|(name, _)| name))
            .collect()
    }

    #[test]
    fn carried_options() {
        let unchanged = "cudyn's options changed: give cudyn_load_options a member for each new \
                         option, set it in cudyn_load_options::loader, then list it here";
        assert_eq!(
            field_names(&format!("{:#?}", JitOptions::default())),
            [
                "optimization_level",
                "max_registers",
                "debug_info",
                "line_info",
                "verbose_log",
                "log_capacity"
            ],
            "{unchanged}"
        );
        assert_eq!(
            field_names(&format!("{:#?}", LibraryOptions::default())),
            ["preserve_binary"],
            "{unchanged}"
        );
    }
}
