//! Where each CUDA library is found, and opening it: the search order documented at
//! [`crate::locate`].

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod headers;
mod search;
mod wheels;

pub use crate::component::Component;
pub use headers::{provider_of, CudaHeaders, HeaderFolder, HEADER_WHEELS};
pub use search::{Found, Origin, Place, SearchPath, LIBRARY_PATH_ENV, SEARCH_ENV};
pub use wheels::{WHEELS_RECORD, WHEELS_VENV_DEFAULT, WHEELS_VENV_ENV};

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
