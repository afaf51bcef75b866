//! Where each CUDA library is found, and opening it.
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
//!    pinned CUDA wheels into (`$CUDYN_WHEELS_VENV`, else `$XDG_CACHE_HOME/cudyn/venv-cu13.0`,
//!    else `~/.cache/cudyn/venv-cu13.0`), searched like a Python wheel's site-packages. It needs
//!    no activation: after set-up, the `cudyn` command and any program built on cudyn find CUDA
//!    there. It comes after every explicit choice (rules 1 to 4: an activated environment is one)
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

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod component;
mod headers;
mod search;

pub use component::Component;
pub use headers::{provider_of, CudaHeaders, HeaderFolder, HEADER_WHEELS};
pub use search::{
    Found, Origin, Place, SearchPath, LIBRARY_PATH_ENV, SEARCH_ENV, WHEELS_VENV_DEFAULT,
    WHEELS_VENV_ENV,
};

/// The file of a copy of `component` this process has already loaded, if any.
pub(crate) fn loaded_copy(component: Component) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    loaded_copy_in(&maps, component)
}

fn loaded_copy_in(maps: &str, component: Component) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| component.matches_loaded_file(name))
        })
        .map(Path::to_path_buf)
}

/// A CUDA library opened by the system loader, with where it came from. Never unloaded: CUDA
/// libraries keep process-wide state and function pointers into them are handed out freely.
#[derive(Debug)]
#[non_exhaustive]
pub struct OpenedLibrary {
    /// The component.
    pub component: Component,
    /// The file opened.
    pub path: PathBuf,
    /// The rule of the search order that found it.
    pub origin: Origin,
    /// Why this copy was chosen over an earlier one, when it was.
    pub note: Option<String>,
    pub(crate) library: libloading::Library,
}

/// Finds and opens `component` following the search order of `search`.
pub fn open(search: &SearchPath, component: Component) -> Result<OpenedLibrary> {
    if let Some(found) = search.locate(component) {
        let library = dlopen(found.path.as_os_str()).map_err(|reason| Error::LibraryOpen {
            component,
            path: found.path.clone(),
            reason,
        })?;
        return Ok(OpenedLibrary {
            component,
            path: found.path,
            origin: found.origin,
            note: found.note,
            library,
        });
    }
    let mut searched = search.summary.clone();
    if !search.open_search {
        searched.extend(search.describe().pop());
    } else {
        for soname in component.sonames() {
            match dlopen(soname.as_ref()) {
                Ok(library) => {
                    let path = loaded_copy(component).unwrap_or_else(|| PathBuf::from(soname));
                    return Ok(OpenedLibrary {
                        component,
                        path,
                        origin: Origin::SystemLoader,
                        note: None,
                        library,
                    });
                }
                Err(reason) => searched.push(format!("{}: {reason}", Origin::SystemLoader)),
            }
        }
    }
    Err(Error::LibraryNotFound {
        component,
        searched,
    })
}

/// Opens a library by path or soname; the error is the loader's message.
pub(crate) fn dlopen(name: &std::ffi::OsStr) -> std::result::Result<libloading::Library, String> {
    // SAFETY: opening a CUDA library runs its initializers, which only set up the library's own
    // state; none of them has preconditions on the caller.
    unsafe { libloading::Library::new(name) }.map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"not really a library").unwrap();
    }

    #[test]
    fn missing_library_error_lists_every_place() {
        let dir = tempfile::tempdir().unwrap();
        let search = SearchPath::only([dir.path().to_path_buf()]);
        let error = open(&search, Component::Nvrtc).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("NVRTC was not found"), "{text}");
        assert!(text.contains("libnvrtc.so.13 or libnvrtc.so.12"), "{text}");
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(text.contains("pip install nvidia-cuda-nvrtc"), "{text}");
    }

    #[test]
    fn an_unloadable_file_is_an_open_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("libnvJitLink.so.13"));
        let error = open(
            &SearchPath::only([dir.path().to_path_buf()]),
            Component::NvJitLink,
        )
        .unwrap_err();
        assert!(
            matches!(&error, Error::LibraryOpen { component: Component::NvJitLink, path, .. }
                if path.ends_with("libnvJitLink.so.13")),
            "{error:?}"
        );
    }

    #[test]
    fn loaded_copies_are_recognised_by_their_real_file_name() {
        let maps = "\
7f00-7f01 r-xp 00000000 fd:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
7f02-7f03 r-xp 00000000 fd:01 2 /opt/cuda/lib64/libcudart.so.13.0.96
7f04-7f05 r-xp 00000000 fd:01 3 /opt/cuda/lib64/libnvrtc-builtins.so.13.0
7f06-7f07 rw-p 00000000 00:00 0 [heap]
";
        assert_eq!(
            loaded_copy_in(maps, Component::Driver).unwrap(),
            Path::new("/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05")
        );
        assert_eq!(
            loaded_copy_in(maps, Component::Runtime).unwrap(),
            Path::new("/opt/cuda/lib64/libcudart.so.13.0.96")
        );
        assert_eq!(loaded_copy_in(maps, Component::Nvrtc), None);
        assert_eq!(loaded_copy_in(maps, Component::NvJitLink), None);
    }
}
