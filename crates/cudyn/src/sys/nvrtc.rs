//! NVRTC (`libnvrtc.so`): compiles CUDA C++ at run time.

use std::path::{Path, PathBuf};

use super::locate::{self, Component, OpenedLibrary};
use super::{call, static_c_str, ApiTable, Companion, Opened, Unversioned};
use crate::error::{CallError, Error, Result};
use crate::version::Version;

super::bindings!("nvrtc.rs");

/// The oldest NVRTC cudyn opens (12.0 added LTO-IR output).
pub const MIN_VERSION: Version = Version::new(12, 0);

/// The opened NVRTC library, with its builtins library as its one companion.
pub type Nvrtc = Opened<NvrtcApi>;

impl Nvrtc {
    /// The `libnvrtc-builtins` file opened beside it.
    pub fn builtins(&self) -> Option<&Path> {
        self.companions
            .first()
            .map(|builtins| builtins.path.as_path())
    }
}

impl ApiTable for NvrtcApi {
    const COMPONENT: Component = Component::Nvrtc;
    const MIN_VERSION: Version = MIN_VERSION;
    type Status = nvrtcResult;
    const SUCCESS: nvrtcResult = NVRTC_SUCCESS;

    fn read_version(nvrtc: &Unversioned<'_, Self>) -> Result<Version> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints.
        unsafe { call!(nvrtc, nvrtcVersion(&mut major, &mut minor)) }?;
        Ok(Version::new(major.max(0) as u32, minor.max(0) as u32))
    }

    fn open_companions(library: &OpenedLibrary, version: Version) -> Result<Vec<Companion>> {
        Ok(vec![open_builtins(&library.path, version)?])
    }

    fn error(&self, call: &'static str, status: nvrtcResult) -> CallError {
        // SAFETY: nvrtcGetErrorString returns a static string for any status.
        let name = unsafe {
            self.nvrtcGetErrorString
                .and_then(|f| static_c_str(f(status)))
        };
        let name = name.unwrap_or_else(|| format!("NVRTC_STATUS_{status}"));
        CallError {
            api: Component::Nvrtc,
            call,
            code: status as i32,
            message: describe(status).to_owned(),
            name,
            log: None,
            hint: None,
        }
    }
}

/// NVRTC opens `libnvrtc-builtins.so.<major>.<minor>` by soname at its first compile, and fails
/// with "failed to open libnvrtc-builtins" unless the system loader can find it. A wheel's folder
/// is not on the loader's path, so cudyn opens the builtins of the same version from NVRTC's own
/// folder first; the loader then finds them already loaded.
fn open_builtins(nvrtc: &Path, version: Version) -> Result<Companion> {
    let soname = format!("libnvrtc-builtins.so.{}.{}", version.major, version.minor);
    let beside = nvrtc.parent().map(|folder| folder.join(&soname));
    let candidates = beside
        .iter()
        .filter(|path| path.is_file())
        .map(|path| path.as_os_str().to_owned())
        .chain(std::iter::once(soname.clone().into()));
    let mut reasons = Vec::new();
    for candidate in candidates {
        match locate::dlopen(&candidate) {
            Ok(library) => return Ok(Companion::new(PathBuf::from(candidate), library)),
            Err(reason) => reasons.push(reason),
        }
    }
    Err(Error::LibraryOpen {
        component: Component::Nvrtc,
        path: beside.unwrap_or_else(|| PathBuf::from(&soname)),
        reason: format!(
            "NVRTC {version} needs {soname} from the same installation, found neither beside it \
             nor through the system loader ({})",
            reasons.join("; ")
        ),
    })
}

/// nvrtcGetErrorString returns the status' name only; these say what it means.
fn describe(status: nvrtcResult) -> &'static str {
    match status {
        NVRTC_ERROR_OUT_OF_MEMORY => "NVRTC ran out of host memory",
        NVRTC_ERROR_PROGRAM_CREATION_FAILURE => "the program could not be created",
        NVRTC_ERROR_INVALID_INPUT => "an input is invalid",
        NVRTC_ERROR_INVALID_PROGRAM => "the program handle is invalid",
        NVRTC_ERROR_INVALID_OPTION => "an option is invalid (see the log)",
        NVRTC_ERROR_COMPILATION => "the source did not compile (see the log)",
        NVRTC_ERROR_BUILTIN_OPERATION_FAILURE => "a builtin operation failed",
        NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION => {
            "name expressions must be added before compiling"
        }
        NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION => {
            "lowered names exist only after compiling"
        }
        NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID => "the name expression was not added or is invalid",
        NVRTC_ERROR_INTERNAL_ERROR => "internal NVRTC error",
        _ => "NVRTC call failed",
    }
}
