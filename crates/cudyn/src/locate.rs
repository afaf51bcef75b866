//! Where each CUDA library is found.
//!
//! cudyn links against no CUDA library at build time. At run time every library is looked for in
//! one documented order, the same for every component:
//!
//! 1. **Override**: the folders given to [`crate::set_library_path`] or, failing that, in the
//!    `CUDYN_LIBRARY_PATH` environment variable (separated by `:`). When an override is set, *only*
//!    those folders are searched: it pins a toolchain exactly, or hides every CUDA library.
//! 2. **Already loaded**: a copy this process has already loaded (found in `/proc/self/maps`), so
//!    that cudyn shares the runtime and driver with any other CUDA user in the process.
//! 3. **`CUDA_PATH`**, then **`CUDA_HOME`**: their `lib64`, `lib` and `targets/x86_64-linux/lib`.
//! 4. **Python wheels**: in every site-packages folder (`$VIRTUAL_ENV`, `$CONDA_PREFIX`,
//!    `$PYTHONPATH`, the `python3` on `PATH`, the user's and the system's), the folders
//!    `nvidia/cu13/lib`, `nvidia/cu12/lib` and `nvidia/<component>/lib`.
//! 5. **`/usr/local/cuda`**: `lib64`, `lib`, `targets/x86_64-linux/lib`.
//! 6. **cudyn's wheel environment**: the virtual environment `scripts/cuda-wheels` installs the
//!    pinned CUDA wheels into: `$CUDYN_WHEELS_VENV` when set; else the one the set-up recorded
//!    in `$XDG_CACHE_HOME/cudyn/wheels-venv` (or `~/.cache/cudyn/wheels-venv`), then
//!    `$XDG_CACHE_HOME/cudyn/venv-cu13.0` (or `~/.cache/cudyn/venv-cu13.0`); searched like a
//!    Python wheel's site-packages. It needs no activation and no variable: after set-up, even
//!    one with `CUDYN_WHEELS_VENV=DIR`, the `cudyn` command and any program built on cudyn find
//!    CUDA there. One that is not installed is still named in the places searched. It comes after every explicit choice (rules 1 to 4: an activated environment is one)
//!    and after an installed toolkit, which usually matches the machine's driver; it is the
//!    fallback for a machine with no CUDA installed.
//! 7. **The system loader**: `dlopen` by soname (`LD_LIBRARY_PATH`, `ld.so.cache`, `/usr/lib`).
//!
//! Within a folder the newest major version is taken first (`libcudart.so.13` before `.12`).
//! The runtime, NVRTC and nvJitLink are preferred from *one* folder: when a folder holds all three,
//! each of them comes from the first such folder even if an earlier folder holds one of them alone,
//! and the report says so. Mixing versions of the toolkit is a classic source of confusing errors.
//! An override is the exception: its folders are taken in exactly the order given, so that one
//! library can be pinned (`CUDYN_LIBRARY_PATH=/opt/nvrtc-13.5:/usr/local/cuda/lib64:...`).
//!
//! CUDA's own headers, which [`Program`](crate::compile::Program) hands to NVRTC, are found in
//! the same order, beginning beside the NVRTC loaded: see [`CudaHeaders`].
//!
//! ```no_run
//! use cudyn::locate::{self, Component};
//!
//! // Where NVRTC would be opened from, without opening it.
//! match locate::search_path().locate(Component::Nvrtc) {
//!     Some(found) => println!("{} ({})", found.path.display(), found.origin.describe()),
//!     None => println!("not found: {}", Component::Nvrtc.install_hint()),
//! }
//! ```

pub use crate::sys::locate::{
    provider_of, Component, CudaHeaders, Found, HeaderFolder, Origin, Place, SearchPath,
    HEADER_WHEELS, LIBRARY_PATH_ENV, SEARCH_ENV, WHEELS_RECORD, WHEELS_VENV_DEFAULT,
    WHEELS_VENV_ENV,
};
pub use crate::sys::search_path;
