//! Where CUDA's own headers are found, so that `#include <cuda_fp16.h>`, `<cooperative_groups.h>`,
//! `<cuda/std/complex>` or `<cub/cub.cuh>` compile through NVRTC with no `-I`.
//!
//! CUDA's headers come in two sets:
//!
//! - **CUDA's headers** (`cuda_fp16.h`, `cuda_bf16.h`, `cooperative_groups.h`, `crt/`, ...): a
//!   toolkit's `include`, or `nvidia/cu13/include` from the `nvidia-cuda-runtime` and
//!   `nvidia-cuda-crt` wheels.
//! - **CCCL** (`cuda/std/...`, `cub/`, `thrust/`, `nv/`): a CUDA 13 toolkit's `include/cccl`, a
//!   CUDA 12 toolkit's `include`, or `nvidia/cu13/include/cccl` from the `nvidia-cuda-cccl` wheel.
//!   Cooperative groups include `nv/target` and `cuda/std/...`, so they need both sets.
//!
//! They are looked for in the order the libraries are (see the [module documentation](super)),
//! with the folder beside the NVRTC actually loaded first: its installation's headers match it.
//! Then `CUDA_PATH`, `CUDA_HOME`, the Python wheels, `CONDA_PREFIX`, `/usr/local/cuda` and
//! cudyn's wheel environment; in each, `include` and `targets/x86_64-linux/include` (toolkits and
//! conda) or `nvidia/cu13/include`, `nvidia/cu12/include` (wheels). Of the folders holding CUDA's
//! headers, the first whose CUDA version equals NVRTC's is taken, else the first; CCCL is taken
//! from the same installation when it has it, else from the first that does. The override of the
//! library search (`CUDYN_LIBRARY_PATH`) chooses libraries only: the headers beside the NVRTC it
//! selects come first, and the rest of the order still applies.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::search::{python_lib_folders, site_packages};
use super::wheels::cudyn_wheels_venvs;
use super::Origin;
use crate::version::Version;

/// The pinned wheels of `scripts/cuda-wheels` that hold CUDA's headers.
macro_rules! cuda_header_pins {
    () => {
        "nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88"
    };
}
/// The pinned wheel of `scripts/cuda-wheels` that holds CCCL.
macro_rules! cccl_pin {
    () => {
        "nvidia-cuda-cccl==13.0.85"
    };
}

/// The pinned wheels that provide CUDA's headers and CCCL, as `pip install` takes them.
pub const HEADER_WHEELS: &str = concat!(cuda_header_pins!(), " ", cccl_pin!());

/// A file that marks a folder as holding CUDA's headers.
const CUDA_MARKER: &str = "cuda_fp16.h";
/// A file that marks a folder as holding CCCL's headers.
const CCCL_MARKER: &str = "cuda/std/version";

/// A folder of headers that cudyn adds to NVRTC's search.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HeaderFolder {
    /// The folder, as given to NVRTC with `-I`.
    pub folder: PathBuf,
    /// The rule of the search order that found it.
    pub origin: Origin,
    /// The CUDA version of its installation (`CUDA_VERSION` in `cuda.h`, else `CUDART_VERSION`
    /// in `cuda_runtime_api.h`), when readable.
    pub cuda_version: Option<Version>,
    /// Why this folder was chosen over an earlier one, when it was.
    pub note: Option<String>,
}

/// CUDA's headers and CCCL's as found for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CudaHeaders {
    /// The folder of `cuda_fp16.h`, `cuda_bf16.h`, `cooperative_groups.h`, ...
    pub cuda: Option<HeaderFolder>,
    /// The folder of `cuda/std/...`, `cub/`, `thrust/` and `nv/`.
    pub cccl: Option<HeaderFolder>,
    /// CCCL's version (`CCCL_VERSION`, e.g. `3.0.1`), when found.
    pub cccl_version: Option<String>,
    /// The version of the NVRTC they were matched against, when one was loaded.
    pub nvrtc_version: Option<Version>,
    /// The places searched, one line per rule and prefix, in order.
    pub searched: Vec<String>,
}

/// One place that may hold an installation's headers.
#[derive(Debug, Clone)]
struct Candidate {
    folder: PathBuf,
    origin: Origin,
}

impl CudaHeaders {
    /// The headers for this process: searched once, beside the NVRTC that cudyn loads (when it
    /// loads) and then in the order of the module documentation.
    pub fn for_this_process() -> &'static CudaHeaders {
        static HEADERS: OnceLock<CudaHeaders> = OnceLock::new();
        HEADERS.get_or_init(|| {
            let nvrtc = crate::sys::nvrtc().ok();
            let beside = nvrtc.map(|nvrtc| (nvrtc.library.path.as_path(), nvrtc.library.origin));
            CudaHeaders::find(
                beside,
                nvrtc.map(|nvrtc| nvrtc.version),
                |name| std::env::var_os(name),
                Path::new("/"),
            )
        })
    }

    /// The search, given the NVRTC file loaded and its origin, its version, the environment as
    /// `var` and every fixed system folder under `root` (tests point it at a scratch tree).
    pub fn find(
        nvrtc: Option<(&Path, Origin)>,
        nvrtc_version: Option<Version>,
        var: impl Fn(&str) -> Option<OsString>,
        root: &Path,
    ) -> Self {
        let (candidates, searched) = candidates(nvrtc, &var, root);
        let cuda = choose_cuda(&candidates, nvrtc_version);
        let cccl = choose_cccl(&candidates, cuda.as_ref());
        let cccl_version = cccl
            .as_ref()
            .and_then(|cccl| read_cccl_version(&cccl.folder));
        CudaHeaders {
            cuda,
            cccl,
            cccl_version,
            nvrtc_version,
            searched,
        }
    }

    /// The folders to add to NVRTC's `-I` list: CCCL's, then CUDA's (as `nvcc` orders them),
    /// each once.
    pub fn include_folders(&self) -> Vec<&Path> {
        let mut folders: Vec<&Path> = Vec::new();
        for found in [&self.cccl, &self.cuda].into_iter().flatten() {
            if !folders.contains(&found.folder.as_path()) {
                folders.push(&found.folder);
            }
        }
        folders
    }

    /// The files these folders' versions were read from (the marker where there is none): while
    /// none of them changes, neither does the choice, unless an earlier place of the search
    /// gains headers. An installation is upgraded or replaced whole, version headers included.
    pub(crate) fn source_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if let Some(cuda) = &self.cuda {
            let marker = cuda.folder.join(CUDA_MARKER);
            files.push(version_file(&cuda.folder).unwrap_or(marker));
        }
        if let Some(cccl) = &self.cccl {
            files.push(cccl.folder.join(CCCL_VERSION_FILE));
            let beside = cccl.folder.parent().and_then(version_file);
            files.extend(version_file(&cccl.folder).or(beside));
        }
        files.retain(|path| path.is_file());
        files
    }

    /// A warning when the headers' CUDA version differs from NVRTC's: newer headers may use
    /// features this NVRTC lacks, older ones miss what it offers.
    pub fn version_mismatch(&self) -> Option<String> {
        let nvrtc = self.nvrtc_version?;
        let mismatched: Vec<String> = [("CUDA's headers", &self.cuda), ("CCCL", &self.cccl)]
            .into_iter()
            .filter_map(|(what, found)| {
                let found = found.as_ref()?;
                let version = found.cuda_version?;
                (version != nvrtc)
                    .then(|| format!("{what} in {} are CUDA {version}", found.folder.display()))
            })
            .collect();
        if mismatched.is_empty() {
            return None;
        }
        Some(format!(
            "{} but NVRTC is {nvrtc}: kernels that include them may fail to compile or behave \
             differently. Install the headers of CUDA {nvrtc} (a toolkit, or the \
             nvidia-cuda-runtime, nvidia-cuda-crt and nvidia-cuda-cccl wheels of NVRTC's \
             version) or point CUDA_PATH at a toolkit of that version.",
            mismatched.join("; ")
        ))
    }
}

/// The package or toolkit that provides `header`, as the fix for a missing one.
pub fn provider_of(header: &str) -> &'static str {
    const CCCL: [&str; 4] = ["cuda/", "cub/", "thrust/", "nv/"];
    // The runtime's and crt's headers: `cuda_fp16.h`, `cuda_runtime.h`, `cooperative_groups/...`,
    // `crt/...`, `sm_60_atomic_functions.h`, `device_functions.h`, `vector_types.h`, ...
    const CUDA: [&str; 5] = ["cuda", "cooperative_groups", "crt/", "sm_", "device_"];
    const CUDA_FILES: [&str; 5] = [
        "vector_types.h",
        "driver_types.h",
        "builtin_types.h",
        "host_defines.h",
        "math_constants.h",
    ];
    if CCCL.iter().any(|prefix| header.starts_with(prefix)) {
        concat!(
            "it is part of CCCL: run `scripts/cuda-wheels` from cudyn's repository, or `pip \
             install ",
            cccl_pin!(),
            "` (CUDA 13; `nvidia-cuda-cccl-cu12` for CUDA 12), or install a CUDA toolkit \
             (`include/cccl` in CUDA 13, `include` in CUDA 12)"
        )
    } else if CUDA.iter().any(|prefix| header.starts_with(prefix)) || CUDA_FILES.contains(&header) {
        concat!(
            "it is one of CUDA's headers: run `scripts/cuda-wheels` from cudyn's repository, or \
             `pip install ",
            cuda_header_pins!(),
            "`, or install a CUDA toolkit (its `include`)"
        )
    } else {
        "cudyn does not know it as one of CUDA's own headers: if it is the program's, give its \
         folder with Program::include (`-I` on `cudyn compile`) or its text with \
         Program::header; if a CUDA library ships it (cuRAND, ...), install that library's \
         wheel (CUDA 13 wheels share `nvidia/cu13/include`, searched by default) or a toolkit"
    }
}

impl fmt::Display for HeaderFolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.folder.display(), self.origin)?;
        if let Some(version) = self.cuda_version {
            write!(f, ", CUDA {version}")?;
        }
        Ok(())
    }
}

/// The toolkit folders that hold an installation's headers.
const TOOLKIT_INCLUDES: [&str; 2] = ["include", "targets/x86_64-linux/include"];
/// The wheel folders under site-packages that hold an installation's headers (CUDA 12's
/// per-component wheels split them: `cuda_runtime` has CUDA's, `cuda_cccl` has CCCL).
const WHEEL_INCLUDES: [&str; 4] = [
    "nvidia/cu13/include",
    "nvidia/cu12/include",
    "nvidia/cuda_runtime/include",
    "nvidia/cuda_cccl/include",
];

/// Every place in search order, with the lines that describe them.
fn candidates(
    nvrtc: Option<(&Path, Origin)>,
    var: &impl Fn(&str) -> Option<OsString>,
    root: &Path,
) -> (Vec<Candidate>, Vec<String>) {
    let mut list = Vec::new();
    let mut searched = Vec::new();
    let mut group = |prefix: &Path, subs: &[&str], origin: Origin| {
        list.extend(subs.iter().map(|sub| Candidate {
            folder: prefix.join(sub),
            origin,
        }));
        searched.push(format!(
            "{origin}: {}/{{{}}}",
            prefix.display(),
            subs.join(",")
        ));
    };
    // `<installation>/lib64/libnvrtc.so.13` has its headers in `<installation>/include`.
    if let Some((installation, origin)) =
        nvrtc.and_then(|(path, origin)| Some((path.parent()?.parent()?, origin)))
    {
        group(installation, &["include"], origin);
    }
    for (variable, origin) in [
        ("CUDA_PATH", Origin::CudaPath),
        ("CUDA_HOME", Origin::CudaHome),
    ] {
        if let Some(prefix) = var(variable).filter(|v| !v.is_empty()) {
            group(Path::new(&prefix), &TOOLKIT_INCLUDES, origin);
        }
    }
    let sites = site_packages(var, root);
    for site in &sites {
        group(site, &WHEEL_INCLUDES, Origin::PythonWheel);
    }
    if let Some(prefix) = var("CONDA_PREFIX").filter(|v| !v.is_empty()) {
        group(Path::new(&prefix), &TOOLKIT_INCLUDES, Origin::CondaPrefix);
    }
    group(
        &root.join("usr/local/cuda"),
        &TOOLKIT_INCLUDES,
        Origin::DefaultToolkit,
    );
    for venv in cudyn_wheels_venvs(var) {
        for lib in python_lib_folders(&venv.join("lib")) {
            let site = lib.join("site-packages");
            if site.is_dir() && !sites.contains(&site) {
                group(&site, &WHEEL_INCLUDES, Origin::CudynWheels);
            }
        }
    }
    (list, searched)
}

/// The first folder with CUDA's headers of NVRTC's version, else the first with any.
fn choose_cuda(candidates: &[Candidate], nvrtc: Option<Version>) -> Option<HeaderFolder> {
    let mut holding = candidates
        .iter()
        .filter(|candidate| candidate.folder.join(CUDA_MARKER).is_file())
        .map(|candidate| HeaderFolder {
            folder: candidate.folder.clone(),
            origin: candidate.origin,
            cuda_version: read_cuda_version(&candidate.folder),
            note: None,
        });
    let first = holding.next()?;
    if nvrtc.is_none() || first.cuda_version == nvrtc {
        return Some(first);
    }
    match holding.find(|folder| folder.cuda_version == nvrtc) {
        Some(matching) => Some(HeaderFolder {
            note: Some(format!(
                "taken for matching NVRTC's version; also found earlier: {first}"
            )),
            ..matching
        }),
        None => Some(first),
    }
}

/// CCCL beside CUDA's headers (`include/cccl` of CUDA 13, `include` itself in CUDA 12), else the
/// first place that has it.
fn choose_cccl(candidates: &[Candidate], cuda: Option<&HeaderFolder>) -> Option<HeaderFolder> {
    let in_place = |folder: &Path, origin: Origin| {
        [folder.join("cccl"), folder.to_path_buf()]
            .into_iter()
            .find(|cccl| cccl.join(CCCL_MARKER).is_file())
            .map(|cccl| HeaderFolder {
                cuda_version: read_cuda_version(&cccl)
                    .or_else(|| read_cuda_version(cccl.parent()?)),
                folder: cccl,
                origin,
                note: None,
            })
    };
    if let Some(beside) = cuda.and_then(|cuda| in_place(&cuda.folder, cuda.origin)) {
        return Some(beside);
    }
    candidates
        .iter()
        .find_map(|candidate| in_place(&candidate.folder, candidate.origin))
}

/// The headers that declare the CUDA version, with the macro that does, in the order read.
const VERSION_HEADERS: [(&str, &str); 2] = [
    ("cuda.h", "CUDA_VERSION"),
    ("cuda_runtime_api.h", "CUDART_VERSION"),
];

/// Where CCCL declares its version, under its folder.
const CCCL_VERSION_FILE: &str = "cuda/std/__cccl/version.h";

/// The header of `folder` its CUDA version is read from: the first of [`VERSION_HEADERS`] there.
fn version_file(folder: &Path) -> Option<PathBuf> {
    VERSION_HEADERS
        .iter()
        .map(|(file, _)| folder.join(file))
        .find(|path| path.is_file())
}

/// The CUDA version an include folder's `cuda.h` or `cuda_runtime_api.h` declares.
fn read_cuda_version(folder: &Path) -> Option<Version> {
    VERSION_HEADERS.into_iter().find_map(|(file, macro_name)| {
        let encoded: i32 = defined_in_file(&folder.join(file), macro_name)?
            .parse()
            .ok()?;
        Some(Version::from_cuda_int(encoded))
    })
}

/// CCCL's version from `cuda/std/__cccl/version.h` (`CCCL_VERSION 3000001` is 3.0.1).
fn read_cccl_version(folder: &Path) -> Option<String> {
    let version_h = folder.join(CCCL_VERSION_FILE);
    let encoded: u32 = defined_in_file(&version_h, "CCCL_VERSION")?.parse().ok()?;
    Some(format!(
        "{}.{}.{}",
        encoded / 1_000_000,
        encoded / 1_000 % 1_000,
        encoded % 1_000
    ))
}

/// The value of `#define NAME value` in a header, read only as far as that line: `cuda.h` is
/// over 1 MB and defines `CUDA_VERSION` in its first 16 kB. Read in growing blocks, each line
/// looked at in place.
fn defined_in_file(path: &Path, name: &str) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut text = Vec::new();
    let mut block: u64 = 32 * 1024;
    loop {
        let read = (&mut file).take(block).read_to_end(&mut text).ok()?;
        let at_end = read == 0;
        // A line cut by the block's end is looked at with the next block.
        let whole_lines = match text.iter().rposition(|&byte| byte == b'\n') {
            _ if at_end => text.len(),
            Some(last) => last + 1,
            None => 0,
        };
        let found = text[..whole_lines]
            .split(|&byte| byte == b'\n')
            .find_map(|line| definition(line, name));
        if found.is_some() || at_end {
            return found;
        }
        block *= 4;
    }
}

/// The value of `line` when it is `#define NAME value`.
fn definition(line: &[u8], name: &str) -> Option<String> {
    let line = line.trim_ascii_start().strip_prefix(b"#define")?;
    let mut words = std::str::from_utf8(line).ok()?.split_whitespace();
    (words.next()? == name).then_some(())?;
    words.next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::super::search::fake_env;
    use super::*;
    use std::fs;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// CUDA's headers of `version` (e.g. 13000) in `include`.
    fn cuda_headers(include: &Path, version: u32) {
        write(&include.join(CUDA_MARKER), "");
        write(
            &include.join("cuda.h"),
            &format!("#pragma once\n#define CUDA_VERSION {version}\n"),
        );
    }

    fn cccl_headers(folder: &Path) {
        write(&folder.join(CCCL_MARKER), "");
        write(
            &folder.join("cuda/std/__cccl/version.h"),
            "#define CCCL_VERSION 3000001\n",
        );
    }

    const V13_0: Version = Version::new(13, 0);

    #[test]
    fn a_cuda_13_wheel_environment_gives_both_folders_cccl_first() {
        let root = tempfile::tempdir().unwrap();
        let venv = root.path().join("venv");
        let include = venv.join("lib/python3.12/site-packages/nvidia/cu13/include");
        cuda_headers(&include, 13000);
        cccl_headers(&include.join("cccl"));
        let headers = CudaHeaders::find(
            None,
            Some(V13_0),
            fake_env(&[("VIRTUAL_ENV", &venv)]),
            root.path(),
        );
        assert_eq!(
            headers.include_folders(),
            [include.join("cccl").as_path(), include.as_path()]
        );
        let cuda = headers.cuda.as_ref().unwrap();
        assert_eq!(cuda.origin, Origin::PythonWheel);
        assert_eq!(cuda.cuda_version, Some(V13_0));
        assert_eq!(headers.cccl.as_ref().unwrap().cuda_version, Some(V13_0));
        assert_eq!(headers.cccl_version.as_deref(), Some("3.0.1"));
        assert_eq!(headers.version_mismatch(), None);
    }

    #[test]
    fn a_cuda_12_toolkit_keeps_cccl_in_include_and_it_is_given_once() {
        let root = tempfile::tempdir().unwrap();
        let toolkit = root.path().join("opt/cuda-12.6");
        let include = toolkit.join("include");
        cuda_headers(&include, 12060);
        cccl_headers(&include);
        let headers = CudaHeaders::find(
            None,
            None,
            fake_env(&[("CUDA_PATH", &toolkit)]),
            root.path(),
        );
        assert_eq!(headers.include_folders(), [include.as_path()]);
        assert_eq!(headers.cuda.unwrap().origin, Origin::CudaPath);
    }

    #[test]
    fn the_installation_of_the_loaded_nvrtc_comes_first() {
        let root = tempfile::tempdir().unwrap();
        let cuda_home = root.path().join("cuda-home");
        cuda_headers(&cuda_home.join("include"), 13000);
        let toolkit = root.path().join("usr/local/cuda");
        cuda_headers(&toolkit.join("include"), 13000);
        cccl_headers(&toolkit.join("include/cccl"));
        let nvrtc = toolkit.join("lib64/libnvrtc.so.13");
        let headers = CudaHeaders::find(
            Some((&nvrtc, Origin::DefaultToolkit)),
            Some(V13_0),
            fake_env(&[("CUDA_HOME", &cuda_home)]),
            root.path(),
        );
        assert_eq!(headers.cuda.unwrap().folder, toolkit.join("include"));
        assert!(
            headers.searched[0].starts_with("/usr/local/cuda: "),
            "{:?}",
            headers.searched
        );
    }

    #[test]
    fn headers_of_nvrtcs_version_are_preferred_and_the_choice_explained() {
        let root = tempfile::tempdir().unwrap();
        let old = root.path().join("cuda-12.4");
        cuda_headers(&old.join("include"), 12040);
        let toolkit = root.path().join("usr/local/cuda");
        cuda_headers(&toolkit.join("include"), 13000);
        let headers = CudaHeaders::find(
            None,
            Some(V13_0),
            fake_env(&[("CUDA_PATH", &old)]),
            root.path(),
        );
        let cuda = headers.cuda.unwrap();
        assert_eq!(cuda.folder, toolkit.join("include"));
        let note = cuda.note.unwrap();
        assert!(
            note.contains(&old.join("include").display().to_string()),
            "{note}"
        );
    }

    #[test]
    fn headers_of_another_version_are_used_with_a_warning() {
        let root = tempfile::tempdir().unwrap();
        let old = root.path().join("cuda-12.4");
        cuda_headers(&old.join("include"), 12040);
        cccl_headers(&old.join("include"));
        let headers = CudaHeaders::find(
            None,
            Some(V13_0),
            fake_env(&[("CUDA_PATH", &old)]),
            root.path(),
        );
        assert_eq!(
            headers.cuda.as_ref().unwrap().cuda_version,
            Some(Version::new(12, 4))
        );
        let warning = headers.version_mismatch().unwrap();
        assert!(
            warning.contains("are CUDA 12.4 but NVRTC is 13.0"),
            "{warning}"
        );
        assert!(warning.contains("CCCL in"), "{warning}");
    }

    #[test]
    fn cccl_from_another_place_when_the_installation_lacks_it() {
        let root = tempfile::tempdir().unwrap();
        let toolkit = root.path().join("usr/local/cuda");
        cuda_headers(&toolkit.join("include"), 13000);
        let site = root.path().join("site");
        cccl_headers(&site.join("nvidia/cuda_cccl/include"));
        let headers =
            CudaHeaders::find(None, None, fake_env(&[("PYTHONPATH", &site)]), root.path());
        assert_eq!(
            headers.include_folders(),
            [
                site.join("nvidia/cuda_cccl/include").as_path(),
                toolkit.join("include").as_path()
            ]
        );
    }

    #[test]
    fn nothing_found_lists_every_place() {
        let root = tempfile::tempdir().unwrap();
        let conda = root.path().join("conda");
        let headers = CudaHeaders::find(
            None,
            None,
            fake_env(&[("CONDA_PREFIX", &conda)]),
            root.path(),
        );
        assert!(headers.include_folders().is_empty());
        assert!(
            headers
                .searched
                .iter()
                .any(|line| line.starts_with("CONDA_PREFIX: ")),
            "{:?}",
            headers.searched
        );
    }

    #[test]
    fn a_definition_is_read_across_blocks_and_not_from_a_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cuda.h");
        // The definition straddles the first block's end: its value must not be read cut short.
        let filler = "/* filler */\n".repeat(32 * 1024 / 13);
        assert!((32 * 1024 - 16..32 * 1024).contains(&filler.len()));
        write(
            &path,
            &format!("{filler}  #define CUDA_VERSION 13020\nint x;\n"),
        );
        assert_eq!(
            defined_in_file(&path, "CUDA_VERSION").as_deref(),
            Some("13020")
        );
        assert_eq!(defined_in_file(&path, "CUDA_VERSIO"), None);
        write(&path, "#define CUDA_VERSION 12080");
        assert_eq!(
            defined_in_file(&path, "CUDA_VERSION").as_deref(),
            Some("12080")
        );
    }

    #[test]
    fn each_header_names_its_provider() {
        for header in [
            "cuda/std/complex",
            "cub/block/block_reduce.cuh",
            "thrust/sort.h",
            "nv/target",
        ] {
            assert!(provider_of(header).contains("nvidia-cuda-cccl"), "{header}");
        }
        for header in [
            "cuda_fp16.h",
            "cooperative_groups.h",
            "crt/host_defines.h",
            "cuda_bf16.h",
        ] {
            assert!(
                provider_of(header).contains("nvidia-cuda-runtime"),
                "{header}"
            );
        }
        assert!(provider_of("my_types.h").contains("Program::include"));
        assert!(provider_of("vector_types.h").contains("nvidia-cuda-runtime"));
    }

    #[test]
    fn provider_pins_are_the_set_up_scripts() {
        let script = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-wheels"));
        let pins: Vec<&str> = HEADER_WHEELS.split(' ').collect();
        assert_eq!(pins.len(), 3, "{HEADER_WHEELS}");
        for pin in pins {
            assert!(script.lines().any(|line| line.trim() == pin), "{pin}");
        }
        assert!(provider_of("cub/cub.cuh").contains(cccl_pin!()));
        assert!(provider_of("cuda_fp16.h").contains(cuda_header_pins!()));
    }
}
