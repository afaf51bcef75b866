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
//! 6. **The system loader**: `dlopen` by soname (`LD_LIBRARY_PATH`, `ld.so.cache`, `/usr/lib`).
//!
//! Within a folder the newest major version is taken first (`libcudart.so.13` before `.12`).
//! The runtime, NVRTC and nvJitLink are preferred from *one* folder: when a folder holds all three,
//! each of them comes from the first such folder even if an earlier folder holds one of them alone,
//! and the report says so. Mixing versions of the toolkit is a classic source of confusing errors.
//! An override is the exception: its folders are taken in exactly the order given, so that one
//! library can be pinned (`CUDYN_LIBRARY_PATH=/opt/nvrtc-13.5:/usr/local/cuda/lib64:...`).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable holding the override folders (`:`-separated).
pub const LIBRARY_PATH_ENV: &str = "CUDYN_LIBRARY_PATH";

/// A CUDA library cudyn can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Component {
    /// The CUDA driver, `libcuda.so.1`: devices, loading and launching.
    Driver,
    /// The CUDA runtime, `libcudart.so`: the runtime API, `cudaLibrary*` since 12.8.
    Runtime,
    /// NVRTC, `libnvrtc.so`: compiles CUDA C++ at run time.
    Nvrtc,
    /// nvJitLink, `libnvJitLink.so`: links device code at run time, with link-time optimization.
    NvJitLink,
    /// nvFatbin, `libnvfatbin.so`: builds fat binaries (optional).
    NvFatbin,
}

impl Component {
    /// Every component, in the order reports list them.
    pub const ALL: [Component; 5] = [
        Component::Driver,
        Component::Runtime,
        Component::Nvrtc,
        Component::NvJitLink,
        Component::NvFatbin,
    ];

    /// The components that make up the compiler toolkit and are preferred from one folder.
    const TOOLKIT: [Component; 3] = [Component::Runtime, Component::Nvrtc, Component::NvJitLink];

    /// A human name: "CUDA driver", "NVRTC", ...
    pub fn name(self) -> &'static str {
        match self {
            Component::Driver => "CUDA driver",
            Component::Runtime => "CUDA runtime",
            Component::Nvrtc => "NVRTC",
            Component::NvJitLink => "nvJitLink",
            Component::NvFatbin => "nvFatbin",
        }
    }

    /// The file names looked for, newest first.
    pub fn sonames(self) -> &'static [&'static str] {
        match self {
            Component::Driver => &["libcuda.so.1"],
            Component::Runtime => &["libcudart.so.13", "libcudart.so.12"],
            Component::Nvrtc => &["libnvrtc.so.13", "libnvrtc.so.12"],
            Component::NvJitLink => &["libnvJitLink.so.13", "libnvJitLink.so.12"],
            Component::NvFatbin => &["libnvfatbin.so.13", "libnvfatbin.so.12"],
        }
    }

    /// The folder a CUDA 12-style per-component wheel installs into, under `nvidia/`.
    fn wheel_folder(self) -> Option<&'static str> {
        match self {
            Component::Driver => None,
            Component::Runtime => Some("cuda_runtime"),
            Component::Nvrtc => Some("cuda_nvrtc"),
            Component::NvJitLink => Some("nvjitlink"),
            Component::NvFatbin => Some("nvfatbin"),
        }
    }

    /// What to do when the component is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            Component::Driver => {
                "Install the NVIDIA driver (it provides libcuda.so.1); no wheel or toolkit contains \
                 a working one. Without a GPU, cudyn can still compile, link and inspect."
            }
            Component::Runtime => {
                "Install it with `pip install nvidia-cuda-runtime==13.0.96` or a CUDA toolkit, or \
                 point CUDYN_LIBRARY_PATH at the folder holding it."
            }
            Component::Nvrtc => {
                "Install it with `pip install nvidia-cuda-nvrtc==13.0.88` or a CUDA toolkit, or \
                 point CUDYN_LIBRARY_PATH at the folder holding it."
            }
            Component::NvJitLink => {
                "Install it with `pip install nvidia-nvjitlink==13.0.88` or a CUDA toolkit, or \
                 point CUDYN_LIBRARY_PATH at the folder holding it."
            }
            Component::NvFatbin => {
                "Install it with `pip install nvidia-nvfatbin==13.0.85` or a CUDA toolkit, or \
                 point CUDYN_LIBRARY_PATH at the folder holding it."
            }
        }
    }

    /// Whether a file name is a loaded copy of this component (`/proc/self/maps` shows the real
    /// file behind the soname link, e.g. `libcudart.so.13.0.96` or `libcuda.so.580.95.05`).
    fn matches_loaded_file(self, file_name: &str) -> bool {
        if self == Component::Driver {
            return file_name.starts_with("libcuda.so.");
        }
        self.sonames().iter().any(|soname| {
            file_name
                .strip_prefix(soname)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which rule of the search order found a library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Origin {
    /// An override folder (`CUDYN_LIBRARY_PATH` or [`crate::set_library_path`]).
    Override,
    /// A copy already loaded in this process.
    AlreadyLoaded,
    /// Under `$CUDA_PATH`.
    CudaPath,
    /// Under `$CUDA_HOME`.
    CudaHome,
    /// In a Python wheel's folder under site-packages.
    PythonWheel,
    /// Under `/usr/local/cuda`.
    DefaultToolkit,
    /// The system loader's own search (`LD_LIBRARY_PATH`, `ld.so.cache`, ...).
    SystemLoader,
}

impl Origin {
    /// How reports name the rule.
    pub fn describe(self) -> &'static str {
        match self {
            Origin::Override => "override",
            Origin::AlreadyLoaded => "already loaded in this process",
            Origin::CudaPath => "CUDA_PATH",
            Origin::CudaHome => "CUDA_HOME",
            Origin::PythonWheel => "Python wheel",
            Origin::DefaultToolkit => "/usr/local/cuda",
            Origin::SystemLoader => "system loader",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A folder to look in, and the rule it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The folder.
    pub folder: PathBuf,
    /// The rule of the search order it belongs to.
    pub origin: Origin,
}

/// Where a library was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The component found.
    pub component: Component,
    /// The file to open.
    pub path: PathBuf,
    /// The rule that found it.
    pub origin: Origin,
    /// Why this copy was chosen over an earlier one, when it was.
    pub note: Option<String>,
}

/// The ordered list of places cudyn searches, resolved from the environment.
#[derive(Debug, Clone)]
pub struct SearchPath {
    places: Vec<Place>,
    /// The places as people read them: one line per rule and prefix ("Python wheel:
    /// `<site>/nvidia/{cu13,cu12,<component>}/lib`), in search order.
    summary: Vec<String>,
    /// False when an override is set: then only the override folders count.
    open_search: bool,
    /// Whether copies already loaded in this process are looked for (off in unit tests, whose
    /// process may have loaded real CUDA libraries).
    check_loaded: bool,
}

impl SearchPath {
    /// Only these folders, nothing else: what an override does.
    pub fn only(folders: impl IntoIterator<Item = PathBuf>) -> Self {
        let places: Vec<Place> = folders
            .into_iter()
            .map(|folder| Place {
                folder,
                origin: Origin::Override,
            })
            .collect();
        let summary = places
            .iter()
            .map(|place| format!("{}: {}", place.origin, place.folder.display()))
            .collect();
        SearchPath {
            places,
            summary,
            open_search: false,
            check_loaded: false,
        }
    }

    /// The search order of this process: the override when one is set, else every rule of the
    /// module documentation, read from the real environment.
    pub fn from_environment() -> Self {
        Self::from_env_with(|name| std::env::var_os(name), Path::new("/"))
    }

    /// The search order as `from_environment` builds it, with the environment given by `var`
    /// and every fixed system folder taken under `root` (tests point it at a scratch tree).
    pub fn from_env_with(var: impl Fn(&str) -> Option<OsString>, root: &Path) -> Self {
        if let Some(value) = var(LIBRARY_PATH_ENV) {
            return Self::only(std::env::split_paths(&value).filter(|p| !p.as_os_str().is_empty()));
        }
        let mut search = SearchPath {
            places: Vec::new(),
            summary: vec![format!("{}: /proc/self/maps", Origin::AlreadyLoaded)],
            open_search: true,
            check_loaded: true,
        };
        for (variable, origin) in [
            ("CUDA_PATH", Origin::CudaPath),
            ("CUDA_HOME", Origin::CudaHome),
        ] {
            if let Some(prefix) = var(variable).filter(|v| !v.is_empty()) {
                search.push_group(Path::new(&prefix), &TOOLKIT_FOLDERS, origin);
            }
        }
        let wheel_folders: Vec<String> = ["cu13", "cu12"]
            .into_iter()
            .chain(Component::ALL.iter().filter_map(|c| c.wheel_folder()))
            .map(|folder| format!("nvidia/{folder}/lib"))
            .collect();
        let wheel_folders: Vec<&str> = wheel_folders.iter().map(String::as_str).collect();
        for site in site_packages(&var, root) {
            search.push_group(&site, &wheel_folders, Origin::PythonWheel);
        }
        search.push_group(
            &root.join("usr/local/cuda"),
            &TOOLKIT_FOLDERS,
            Origin::DefaultToolkit,
        );
        search
    }

    /// Adds `prefix/sub` for each `sub`, in order, as one line of the summary.
    fn push_group(&mut self, prefix: &Path, subs: &[&str], origin: Origin) {
        self.places.extend(subs.iter().map(|sub| Place {
            folder: prefix.join(sub),
            origin,
        }));
        self.summary.push(format!(
            "{origin}: {}/{{{}}}",
            prefix.display(),
            subs.join(",")
        ));
    }

    /// The folders searched, in order (the "already loaded" and "system loader" rules are not
    /// folders and are not listed).
    pub fn places(&self) -> &[Place] {
        &self.places
    }

    /// Whether rules beyond the override apply (already-loaded copies and the system loader).
    pub fn is_open(&self) -> bool {
        self.open_search
    }

    /// Finds `component` in the folders of the search order, or in this process when a copy is
    /// already loaded. The system loader is not consulted here: [`open`] does that, since only
    /// `dlopen` knows where the loader looks.
    pub fn locate(&self, component: Component) -> Option<Found> {
        if self.check_loaded {
            if let Some(path) = loaded_copy(component) {
                return Some(Found {
                    component,
                    path,
                    origin: Origin::AlreadyLoaded,
                    note: None,
                });
            }
        }
        let first = self.first_in_folders(component)?;
        // An override's order is the user's explicit choice: it is never second-guessed.
        if !self.open_search || !Component::TOOLKIT.contains(&component) {
            return Some(first);
        }
        let Some(shared) = self.first_folder_with_whole_toolkit() else {
            return Some(first);
        };
        let preferred = find_in(shared, component)?;
        if first.path.parent() == Some(shared.folder.as_path()) {
            return Some(first);
        }
        Some(Found {
            note: Some(format!(
                "taken beside NVRTC, nvJitLink and the runtime in {} to keep the toolkit one \
                 version; also found earlier at {} ({}), not used",
                shared.folder.display(),
                first.path.display(),
                first.origin
            )),
            ..preferred
        })
    }

    /// The places searched, one line per rule and prefix, for reports and error messages.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = self.summary.clone();
        if self.open_search {
            lines.push(format!(
                "{}: LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib",
                Origin::SystemLoader
            ));
        } else {
            lines.push(format!(
                "nothing else: an override ({LIBRARY_PATH_ENV} or cudyn::set_library_path) is \
                 exclusive"
            ));
        }
        lines
    }

    fn first_in_folders(&self, component: Component) -> Option<Found> {
        self.places
            .iter()
            .find_map(|place| find_in(place, component))
    }

    fn first_folder_with_whole_toolkit(&self) -> Option<&Place> {
        self.places.iter().find(|place| {
            Component::TOOLKIT
                .iter()
                .all(|&component| find_in(place, component).is_some())
        })
    }
}

/// The library folders of a CUDA toolkit installation, in search order.
const TOOLKIT_FOLDERS: [&str; 3] = ["lib64", "lib", "targets/x86_64-linux/lib"];

fn find_in(place: &Place, component: Component) -> Option<Found> {
    component.sonames().iter().find_map(|soname| {
        let path = place.folder.join(soname);
        path.is_file().then_some(Found {
            component,
            path,
            origin: place.origin,
            note: None,
        })
    })
}

/// Every site-packages folder that exists, in the order of the module documentation, without
/// repeats.
fn site_packages(var: &impl Fn(&str) -> Option<OsString>, root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut add = |path: PathBuf| {
        if path.is_dir() && !found.contains(&path) {
            found.push(path);
        }
    };
    let mut prefixes = Vec::new();
    for variable in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = var(variable).filter(|v| !v.is_empty()) {
            prefixes.push(PathBuf::from(prefix));
        }
    }
    let pythonpath: Vec<PathBuf> = var("PYTHONPATH")
        .map(|value| std::env::split_paths(&value).collect())
        .unwrap_or_default();
    if let Some(path) = var("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("python3").is_file() {
                if let Some(prefix) = dir.parent() {
                    prefixes.push(prefix.to_path_buf());
                }
            }
        }
    }
    for prefix in &prefixes {
        for lib in python_lib_folders(&prefix.join("lib")) {
            add(lib.join("site-packages"));
        }
    }
    for dir in pythonpath {
        add(dir);
    }
    if let Some(home) = var("HOME").filter(|v| !v.is_empty()) {
        for lib in python_lib_folders(&PathBuf::from(home).join(".local/lib")) {
            add(lib.join("site-packages"));
        }
    }
    for system in ["usr/local/lib", "usr/lib"] {
        for lib in python_lib_folders(&root.join(system)) {
            add(lib.join("site-packages"));
            add(lib.join("dist-packages"));
        }
    }
    found
}

/// The `python3*` folders inside `lib`, newest first.
fn python_lib_folders(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut folders: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name.strip_prefix("python3")?;
            let key = std::iter::once(3)
                .chain(version.split('.').filter_map(|part| part.parse().ok()))
                .collect();
            Some((key, entry.path()))
        })
        .collect();
    folders.sort_by(|a, b| b.0.cmp(&a.0));
    folders.into_iter().map(|(_, path)| path).collect()
}

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

    /// The search order built from `var`, blind to this test process' own loaded libraries.
    fn search_with(var: impl Fn(&str) -> Option<OsString>, root: &Path) -> SearchPath {
        SearchPath {
            check_loaded: false,
            ..SearchPath::from_env_with(var, root)
        }
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a Path)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.as_os_str().to_owned())
        }
    }

    #[test]
    fn override_is_exclusive_and_listed_first() {
        let dir = tempfile::tempdir().unwrap();
        let search = search_with(env(&[(LIBRARY_PATH_ENV, dir.path())]), dir.path());
        assert!(!search.is_open());
        assert_eq!(search.places().len(), 1);
        assert_eq!(search.places()[0].origin, Origin::Override);
        assert!(search.locate(Component::Nvrtc).is_none());
        let described = search.describe();
        assert!(described[0].starts_with("override: "), "{described:?}");
        assert!(
            described.last().unwrap().contains("exclusive"),
            "{described:?}"
        );
    }

    #[test]
    fn order_is_cuda_path_then_wheels_then_usr_local_cuda() {
        let root = tempfile::tempdir().unwrap();
        let cuda = root.path().join("opt/cuda");
        let venv = root.path().join("venv");
        fs::create_dir_all(venv.join("lib/python3.11/site-packages")).unwrap();
        let search = search_with(
            env(&[("CUDA_HOME", &cuda), ("VIRTUAL_ENV", &venv)]),
            root.path(),
        );
        let origins: Vec<Origin> = search.places().iter().map(|p| p.origin).collect();
        let first_wheel = origins
            .iter()
            .position(|o| *o == Origin::PythonWheel)
            .unwrap();
        let first_default = origins
            .iter()
            .position(|o| *o == Origin::DefaultToolkit)
            .unwrap();
        assert_eq!(origins[0], Origin::CudaHome);
        assert!(first_wheel < first_default);
        assert_eq!(
            search.places()[0].folder,
            cuda.join("lib64"),
            "lib64 is searched before lib"
        );
        assert_eq!(
            search.places()[first_wheel].folder,
            venv.join("lib/python3.11/site-packages/nvidia/cu13/lib")
        );
    }

    #[test]
    fn finds_a_wheel_in_a_virtual_env_and_prefers_cuda_13() {
        let root = tempfile::tempdir().unwrap();
        let venv = root.path().join("venv");
        let lib = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libnvrtc.so.12"));
        let search = search_with(env(&[("VIRTUAL_ENV", &venv)]), root.path());
        let found = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(found.path, lib.join("libnvrtc.so.13"));
        assert_eq!(found.origin, Origin::PythonWheel);
        assert_eq!(found.note, None);
    }

    #[test]
    fn cuda_12_per_component_wheels_are_found() {
        let root = tempfile::tempdir().unwrap();
        let site = root.path().join("site");
        touch(&site.join("nvidia/nvjitlink/lib/libnvJitLink.so.12"));
        let search = search_with(env(&[("PYTHONPATH", &site)]), root.path());
        let found = search.locate(Component::NvJitLink).unwrap();
        assert_eq!(
            found.path,
            site.join("nvidia/nvjitlink/lib/libnvJitLink.so.12")
        );
    }

    #[test]
    fn the_toolkit_is_taken_from_one_folder_and_the_report_says_so() {
        let root = tempfile::tempdir().unwrap();
        let early = root.path().join("early");
        let whole = root.path().join("whole");
        touch(&early.join("lib64/libcudart.so.12"));
        for soname in ["libcudart.so.13", "libnvrtc.so.13", "libnvJitLink.so.13"] {
            touch(&whole.join("lib64").join(soname));
        }
        let search = search_with(
            env(&[("CUDA_PATH", &early), ("CUDA_HOME", &whole)]),
            root.path(),
        );
        let runtime = search.locate(Component::Runtime).unwrap();
        assert_eq!(runtime.path, whole.join("lib64/libcudart.so.13"));
        let note = runtime.note.expect("the choice is explained");
        assert!(note.contains(&early.join("lib64/libcudart.so.12").display().to_string()));
        let nvrtc = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(nvrtc.path, whole.join("lib64/libnvrtc.so.13"));
        assert_eq!(nvrtc.note, None);
    }

    #[test]
    fn an_override_order_is_followed_exactly() {
        let root = tempfile::tempdir().unwrap();
        let newer_nvrtc = root.path().join("nvrtc-13.5");
        let toolkit = root.path().join("toolkit");
        touch(&newer_nvrtc.join("libnvrtc.so.13"));
        for soname in ["libcudart.so.13", "libnvrtc.so.13", "libnvJitLink.so.13"] {
            touch(&toolkit.join(soname));
        }
        let search = SearchPath::only([newer_nvrtc.clone(), toolkit.clone()]);
        let nvrtc = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(nvrtc.path, newer_nvrtc.join("libnvrtc.so.13"));
        assert_eq!(nvrtc.note, None);
        assert_eq!(
            search.locate(Component::Runtime).unwrap().path,
            toolkit.join("libcudart.so.13")
        );
    }

    #[test]
    fn without_a_whole_toolkit_folder_each_takes_its_first() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        touch(&a.join("libcudart.so.13"));
        touch(&b.join("libnvrtc.so.13"));
        let search = SearchPath::only([a.clone(), b.clone()]);
        assert_eq!(
            search.locate(Component::Runtime).unwrap().path,
            a.join("libcudart.so.13")
        );
        assert_eq!(
            search.locate(Component::Nvrtc).unwrap().path,
            b.join("libnvrtc.so.13")
        );
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
