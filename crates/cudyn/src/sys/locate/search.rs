//! The search order: the folders each library is looked for in, read from the environment.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use super::wheels::{self, WHEELS_VENV_ENV};
use super::{loaded_copy, Component};

/// The environment variable holding the override folders (`:`-separated).
pub const LIBRARY_PATH_ENV: &str = "CUDYN_LIBRARY_PATH";
/// Every environment variable the search orders of libraries and headers read (and
/// `LD_LIBRARY_PATH`, the system loader's): the compile cache remembers the toolchain they
/// resolve to under their values.
pub const SEARCH_ENV: [&str; 11] = [
    LIBRARY_PATH_ENV,
    "CUDA_PATH",
    "CUDA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "PATH",
    "HOME",
    "XDG_CACHE_HOME",
    WHEELS_VENV_ENV,
    "LD_LIBRARY_PATH",
];

/// Which rule of the search order found a library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
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
    /// Under `$CONDA_PREFIX` (CUDA's conda packages; only headers are looked for there, since
    /// conda environments put their libraries on the loader's path).
    CondaPrefix,
    /// Under `/usr/local/cuda`.
    DefaultToolkit,
    /// In cudyn's wheel environment (`$CUDYN_WHEELS_VENV`, else the one `scripts/cuda-wheels`
    /// recorded, else `${XDG_CACHE_HOME:-~/.cache}/cudyn/venv-cu13.0`), where
    /// `scripts/cuda-wheels` installs.
    CudynWheels,
    /// The system loader's own search (`LD_LIBRARY_PATH`, `ld.so.cache`, ...).
    SystemLoader,
}

impl Origin {
    /// Every rule, in search order.
    pub const ALL: [Origin; 9] = [
        Origin::Override,
        Origin::AlreadyLoaded,
        Origin::CudaPath,
        Origin::CudaHome,
        Origin::PythonWheel,
        Origin::CondaPrefix,
        Origin::DefaultToolkit,
        Origin::CudynWheels,
        Origin::SystemLoader,
    ];

    /// How reports name the rule.
    pub fn describe(self) -> &'static str {
        match self {
            Origin::Override => "override",
            Origin::AlreadyLoaded => "already loaded in this process",
            Origin::CudaPath => "CUDA_PATH",
            Origin::CudaHome => "CUDA_HOME",
            Origin::PythonWheel => "Python wheel",
            Origin::CondaPrefix => "CONDA_PREFIX",
            Origin::DefaultToolkit => "/usr/local/cuda",
            Origin::CudynWheels => "cudyn's wheel environment",
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
#[non_exhaustive]
pub struct Place {
    /// The folder.
    pub folder: PathBuf,
    /// The rule of the search order it belongs to.
    pub origin: Origin,
}

/// Where a library was found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    pub(super) places: Vec<Place>,
    /// The places as people read them: one line per rule and prefix ("Python wheel:
    /// `<site>/nvidia/{cu13,cu12,<component>}/lib`), in search order.
    pub(super) summary: Vec<String>,
    /// False when an override is set: then only the override folders count.
    pub(super) open_search: bool,
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
        let sites = site_packages(&var, root);
        for site in &sites {
            search.push_group(site, &wheel_folders, Origin::PythonWheel);
        }
        search.push_group(
            &root.join("usr/local/cuda"),
            &TOOLKIT_FOLDERS,
            Origin::DefaultToolkit,
        );
        // Last of the folders: every explicit choice and an installed toolkit (which matches the
        // machine's driver) come first; cudyn's own pinned wheels are what makes a machine with
        // no CUDA work after set-up, with nothing activated. When that environment is activated
        // its folders were already searched as a Python wheel. One that is not there is still
        // named, with the fix, so that a report of the places searched says where it was looked
        // for.
        for venv in wheels::cudyn_wheels_venvs(&var) {
            let found: Vec<PathBuf> = python_lib_folders(&venv.join("lib"))
                .into_iter()
                .map(|lib| lib.join("site-packages"))
                .filter(|site| site.is_dir())
                .collect();
            if found.is_empty() {
                let missing = wheels::missing(&venv);
                search
                    .summary
                    .push(format!("{}: {missing}", Origin::CudynWheels));
            }
            for site in found.iter().filter(|site| !sites.contains(site)) {
                search.push_group(site, &wheel_folders, Origin::CudynWheels);
            }
        }
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
    /// already loaded. The system loader is not consulted here: [`open`](super::open) does that, since only
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
pub(super) fn site_packages(var: &impl Fn(&str) -> Option<OsString>, root: &Path) -> Vec<PathBuf> {
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
pub(super) fn python_lib_folders(lib: &Path) -> Vec<PathBuf> {
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

/// An environment of these variables only, for tests of the search order.
#[cfg(test)]
pub(super) fn fake_env<'a>(
    pairs: &'a [(&'a str, &'a Path)],
) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_os_str().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::locate::wheels::{WHEELS_RECORD, WHEELS_VENV_DEFAULT};
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

    #[test]
    fn every_variable_the_search_reads_is_listed() {
        let code = |text: &'static str| text.split("#[cfg(test)]").next().unwrap();
        let sources = [
            code(include_str!("search.rs")),
            code(include_str!("headers.rs")),
        ];
        for source in sources {
            for quoted in source.split('"').skip(1).step_by(2) {
                // Upper-case words are variables, but for macro names and CCCL's own.
                let is_variable = quoted.len() > 3
                    && quoted.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    && !quoted.ends_with("_VERSION")
                    && quoted != "CCCL";
                if is_variable {
                    assert!(
                        SEARCH_ENV.contains(&quoted),
                        "{quoted} is not in SEARCH_ENV"
                    );
                }
            }
        }
    }

    #[test]
    fn override_is_exclusive_and_listed_first() {
        let dir = tempfile::tempdir().unwrap();
        let search = search_with(fake_env(&[(LIBRARY_PATH_ENV, dir.path())]), dir.path());
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
            fake_env(&[("CUDA_HOME", &cuda), ("VIRTUAL_ENV", &venv)]),
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

    /// The runtime, NVRTC and nvJitLink of CUDA 13 in `folder`.
    fn whole_toolkit(folder: &Path) {
        for soname in ["libcudart.so.13", "libnvrtc.so.13", "libnvJitLink.so.13"] {
            touch(&folder.join(soname));
        }
    }

    /// A virtual environment under `venv` holding the three toolkit libraries of CUDA 13, as
    /// `scripts/cuda-wheels` installs them; returns their folder.
    fn wheel_venv(venv: &Path) -> PathBuf {
        let lib = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        whole_toolkit(&lib);
        lib
    }

    #[test]
    fn cudyn_wheels_are_found_under_home_without_activation() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let lib = wheel_venv(&home.join(".cache").join(WHEELS_VENV_DEFAULT));
        let search = search_with(fake_env(&[("HOME", &home)]), root.path());
        let found = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(found.path, lib.join("libnvrtc.so.13"));
        assert_eq!(found.origin, Origin::CudynWheels);
        assert!(
            search
                .describe()
                .iter()
                .any(|line| line.starts_with("cudyn's wheel environment: ")),
            "{:?}",
            search.describe()
        );
    }

    #[test]
    fn cudyn_wheels_follow_xdg_cache_home_and_the_variable() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let cache = root.path().join("cache");
        let chosen = root.path().join("chosen");
        wheel_venv(&home.join(".cache").join(WHEELS_VENV_DEFAULT));
        let in_cache = wheel_venv(&cache.join(WHEELS_VENV_DEFAULT));
        let in_chosen = wheel_venv(&chosen);
        let by_cache = search_with(
            fake_env(&[("HOME", &home), ("XDG_CACHE_HOME", &cache)]),
            root.path(),
        );
        assert_eq!(
            by_cache.locate(Component::Runtime).unwrap().path,
            in_cache.join("libcudart.so.13")
        );
        let by_variable = search_with(
            fake_env(&[
                ("HOME", &home),
                ("XDG_CACHE_HOME", &cache),
                (WHEELS_VENV_ENV, &chosen),
            ]),
            root.path(),
        );
        assert_eq!(
            by_variable.locate(Component::Runtime).unwrap().path,
            in_chosen.join("libcudart.so.13")
        );
    }

    #[test]
    fn the_recorded_wheel_environment_is_found_and_a_missing_one_named() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let elsewhere = root.path().join("some/dir");
        let search = search_with(fake_env(&[("HOME", &home)]), root.path());
        assert!(search.locate(Component::Nvrtc).is_none());
        let described = search.describe().join("\n");
        assert!(
            described.contains(&format!(
                "cudyn's wheel environment: {} (not installed: scripts/cuda-wheels installs",
                home.join(".cache").join(WHEELS_VENV_DEFAULT).display()
            )) && described.contains("CUDYN_WHEELS_VENV=DIR"),
            "{described}"
        );
        // What the set-up leaves after `CUDYN_WHEELS_VENV=some/dir scripts/cuda-wheels`.
        let lib = wheel_venv(&elsewhere);
        let record = home.join(".cache").join(WHEELS_RECORD);
        fs::create_dir_all(record.parent().unwrap()).unwrap();
        fs::write(&record, format!("{}\n", elsewhere.display())).unwrap();
        let search = search_with(fake_env(&[("HOME", &home)]), root.path());
        let found = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(found.path, lib.join("libnvrtc.so.13"));
        assert_eq!(found.origin, Origin::CudynWheels);
    }

    #[test]
    fn cudyn_wheels_come_after_every_other_folder() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        wheel_venv(&home.join(".cache").join(WHEELS_VENV_DEFAULT));
        let toolkit = root.path().join("usr/local/cuda/lib64");
        whole_toolkit(&toolkit);
        let cuda_home = root.path().join("opt/cuda");
        let search = search_with(
            fake_env(&[("HOME", &home), ("CUDA_HOME", &cuda_home)]),
            root.path(),
        );
        let origins: Vec<Origin> = search.places().iter().map(|p| p.origin).collect();
        let first_wheels = origins
            .iter()
            .position(|o| *o == Origin::CudynWheels)
            .unwrap();
        assert!(origins[first_wheels..]
            .iter()
            .all(|o| *o == Origin::CudynWheels));
        let found = search.locate(Component::Nvrtc).unwrap();
        assert_eq!(found.path, toolkit.join("libnvrtc.so.13"));
        assert_eq!(found.origin, Origin::DefaultToolkit);
    }

    #[test]
    fn activated_cudyn_wheels_are_searched_once_as_a_python_wheel() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let venv = home.join(".cache").join(WHEELS_VENV_DEFAULT);
        wheel_venv(&venv);
        let search = search_with(
            fake_env(&[("HOME", &home), ("VIRTUAL_ENV", &venv)]),
            root.path(),
        );
        assert!(search
            .places()
            .iter()
            .all(|p| p.origin != Origin::CudynWheels));
        assert_eq!(
            search.locate(Component::Nvrtc).unwrap().origin,
            Origin::PythonWheel
        );
    }

    #[test]
    fn finds_a_wheel_in_a_virtual_env_and_prefers_cuda_13() {
        let root = tempfile::tempdir().unwrap();
        let venv = root.path().join("venv");
        let lib = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libnvrtc.so.12"));
        let search = search_with(fake_env(&[("VIRTUAL_ENV", &venv)]), root.path());
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
        let search = search_with(fake_env(&[("PYTHONPATH", &site)]), root.path());
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
        whole_toolkit(&whole.join("lib64"));
        let search = search_with(
            fake_env(&[("CUDA_PATH", &early), ("CUDA_HOME", &whole)]),
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
        whole_toolkit(&toolkit);
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
}
