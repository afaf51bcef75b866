//! What CUDA this process can use: every library with where it was found and its version, every
//! GPU, and the compatibility problems between them. `cudyn doctor` prints this report.

use std::path::PathBuf;

use crate::device::Device;
use crate::error::Error;
use crate::sys::locate::{Component, CudaHeaders, Origin, HEADER_WHEELS};
use crate::sys::{self, runtime, ApiTable, Opened};
use crate::version::Version;

/// The state of the CUDA installation as this process sees it.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ToolchainReport {
    /// Each CUDA library, in [`Component::ALL`] order.
    pub components: Vec<ComponentReport>,
    /// CUDA's own headers and CCCL's, as [`Program`](crate::compile::Program) adds them to
    /// every compile.
    pub headers: CudaHeaders,
    /// The GPUs the driver sees (empty without a driver).
    pub devices: Vec<DeviceReport>,
    /// Why no GPU is listed, when none is.
    pub devices_error: Option<String>,
    /// Compatibility problems between the versions found.
    pub warnings: Vec<Warning>,
    /// The places searched, in order.
    pub search_order: Vec<String>,
}

/// One CUDA library in the report.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ComponentReport {
    /// Which library.
    pub component: Component,
    /// Whether cudyn's compile-and-load work needs it (the driver and nvFatbin are optional: a
    /// machine with no GPU still compiles, links and inspects).
    pub required: bool,
    /// Where it was found and its version, if it was.
    pub found: Option<FoundLibrary>,
    /// Why it is not usable, if it is not.
    pub error: Option<String>,
    /// True when it was not found at all (as opposed to found but unusable).
    pub not_found: bool,
    /// When not found: what the system loader said for each file name tried (the folders of
    /// the search order are in [`ToolchainReport::search_order`]).
    pub loader_errors: Vec<String>,
}

/// A library that was found and opened.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FoundLibrary {
    /// The file opened.
    pub path: PathBuf,
    /// The rule of the search order that found it.
    pub origin: Origin,
    /// Its version.
    pub version: Version,
    /// Why this copy was taken over an earlier one, or other facts worth knowing.
    pub notes: Vec<String>,
}

/// One GPU in the report.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeviceReport {
    /// The ordinal.
    pub ordinal: usize,
    /// The name, e.g. "NVIDIA H200".
    pub name: String,
    /// `(major, minor)`, e.g. `(9, 0)`.
    pub compute_capability: (u32, u32),
    /// Memory in bytes.
    pub total_memory: u64,
}

/// A compatibility problem between the libraries found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Warning {
    /// A stable identifier, e.g. `nvrtc-newer-than-driver`.
    pub id: &'static str,
    /// What it means and what cudyn does about it.
    pub message: String,
}

impl ComponentReport {
    /// One line: version and path, or the first line of the error.
    pub fn summary(&self) -> String {
        match (&self.found, &self.error) {
            (Some(found), _) => format!(
                "{} at {} ({})",
                found.version,
                found.path.display(),
                found.origin
            ),
            (None, Some(error)) => error.lines().next().unwrap_or_default().to_owned(),
            (None, None) => "not probed".to_owned(),
        }
    }
}

/// The version `component` reports, opening it first if nothing has yet, as its first use
/// would: e.g. to check that nvJitLink can read the LTO-IR of the NVRTC found.
///
/// ```no_run
/// use cudyn::{toolchain, Component};
///
/// let nvrtc = toolchain::library_version(Component::Nvrtc)?;
/// let nvjitlink = toolchain::library_version(Component::NvJitLink)?;
/// if nvrtc > nvjitlink {
///     println!("nvJitLink {nvjitlink} cannot link the LTO-IR of NVRTC {nvrtc}");
/// }
/// # Ok::<(), cudyn::Error>(())
/// ```
pub fn library_version(component: Component) -> crate::error::Result<Version> {
    Ok(match component {
        Component::Driver => sys::driver()?.version,
        Component::Runtime => sys::runtime()?.version,
        Component::Nvrtc => sys::nvrtc()?.version,
        Component::NvJitLink => sys::nvjitlink()?.version,
        Component::NvFatbin => sys::nvfatbin()?.version,
    })
}

impl ToolchainReport {
    /// Opens every CUDA library (as any later call would) and lists the GPUs.
    pub fn probe() -> Self {
        let driver = sys::driver();
        let runtime = sys::runtime();
        let nvrtc = sys::nvrtc();
        let nvjitlink = sys::nvjitlink();
        let nvfatbin = sys::nvfatbin();

        let mut warnings = compatibility_warnings(
            version(&driver),
            version(&runtime),
            version(&nvrtc),
            version(&nvjitlink),
        );
        let headers = CudaHeaders::for_this_process().clone();
        warnings.extend(header_warnings(&headers));

        let mut runtime_notes = Vec::new();
        if let Ok(runtime) = &runtime {
            runtime_notes.push(if runtime.has_library_api() {
                "has the runtime library API (cudaLibraryLoadData, cudaGetKernel)".to_owned()
            } else {
                "lacks the runtime library API: loading goes through the driver".to_owned()
            });
        }
        let nvrtc_notes = nvrtc
            .as_ref()
            .ok()
            .and_then(|nvrtc| nvrtc.builtins())
            .map(|builtins| format!("builtins: {}", builtins.display()))
            .into_iter()
            .collect();
        let components = vec![
            report(false, driver, Vec::new()),
            report(true, runtime, runtime_notes),
            report(true, nvrtc, nvrtc_notes),
            report(true, nvjitlink, Vec::new()),
            report(false, nvfatbin, Vec::new()),
        ];

        let (devices, devices_error) = match list_devices() {
            Ok(devices) if devices.is_empty() => {
                (devices, Some("the driver reports no GPU".to_owned()))
            }
            Ok(devices) => (devices, None),
            Err(error) => (Vec::new(), Some(error.to_string())),
        };
        ToolchainReport {
            components,
            headers,
            devices,
            devices_error,
            warnings,
            search_order: sys::search_path().describe(),
        }
    }

    /// The report for one component.
    pub fn component(&self, component: Component) -> Option<&ComponentReport> {
        self.components.iter().find(|c| c.component == component)
    }

    /// The problems that make the toolchain unusable for cudyn's work: a required library missing
    /// or broken, or a driver that is installed but fails. A machine with no driver at all is not
    /// a problem (it compiles, links and inspects); `require_gpu` makes it one.
    pub fn problems(&self, require_gpu: bool) -> Vec<String> {
        let mut problems: Vec<String> = self
            .components
            .iter()
            .filter_map(|c| {
                let error = c.error.as_ref()?;
                let matters = match c.component {
                    Component::Driver => require_gpu || !c.not_found,
                    _ => c.required,
                };
                matters.then(|| format!("{}: {}", c.component, error.lines().next().unwrap_or("")))
            })
            .collect();
        if require_gpu && self.devices.is_empty() {
            problems.push(format!(
                "no GPU: {}",
                self.devices_error.as_deref().unwrap_or("none found")
            ));
        }
        problems
    }
}

/// The version of a library, when it opened.
fn version<T: ApiTable>(opened: &Result<&Opened<T>, Error>) -> Option<Version> {
    opened.as_ref().ok().map(|opened| opened.version)
}

fn report<T: ApiTable>(
    required: bool,
    opened: Result<&Opened<T>, Error>,
    mut notes: Vec<String>,
) -> ComponentReport {
    let component = T::COMPONENT;
    match opened {
        Ok(opened) => {
            notes.splice(0..0, opened.library.note.clone());
            ComponentReport {
                component,
                required,
                found: Some(FoundLibrary {
                    path: opened.library.path.clone(),
                    origin: opened.library.origin,
                    version: opened.version,
                    notes,
                }),
                error: None,
                not_found: false,
                loader_errors: Vec::new(),
            }
        }
        Err(error) => {
            let loader_errors = match &error {
                Error::LibraryNotFound { searched, .. } => searched
                    .iter()
                    .filter(|place| place.starts_with(Origin::SystemLoader.describe()))
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            ComponentReport {
                component,
                required,
                found: None,
                not_found: matches!(error, Error::LibraryNotFound { .. }),
                loader_errors,
                error: Some(error.to_string()),
            }
        }
    }
}

fn list_devices() -> crate::Result<Vec<DeviceReport>> {
    Device::all()?
        .into_iter()
        .map(|device| {
            Ok(DeviceReport {
                ordinal: device.ordinal(),
                name: device.name()?,
                compute_capability: device.compute_capability()?,
                total_memory: device.total_memory()?,
            })
        })
        .collect()
}

/// What stands between CUDA's headers and the kernels that include them: headers of another CUDA
/// version than NVRTC's, or headers not found.
pub fn header_warnings(headers: &CudaHeaders) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if let Some(message) = headers.version_mismatch() {
        warnings.push(Warning {
            id: "headers-differ-from-nvrtc",
            message,
        });
    }
    let missing: Vec<&str> = [
        (
            headers.cuda.is_none(),
            "CUDA's headers (cuda_fp16.h, cooperative_groups.h)",
        ),
        (
            headers.cccl.is_none(),
            "CCCL's headers (cuda/std, cub, thrust, nv)",
        ),
    ]
    .into_iter()
    .filter_map(|(missing, what)| missing.then_some(what))
    .collect();
    if !missing.is_empty() {
        warnings.push(Warning {
            id: "headers-not-found",
            message: format!(
                "{} were not found: kernels that include them will not compile. Run \
                 `scripts/cuda-wheels` from cudyn's repository, or `pip install {HEADER_WHEELS}`, \
                 or install a CUDA toolkit.",
                missing.join(" and ")
            ),
        });
    }
    warnings
}

/// The compatibility problems between library versions (`None`: not found).
///
/// A pure function of the versions, so that every rule is tested with injected versions.
pub fn compatibility_warnings(
    driver: Option<Version>,
    runtime: Option<Version>,
    nvrtc: Option<Version>,
    nvjitlink: Option<Version>,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if let (Some(driver), Some(nvrtc)) = (driver, nvrtc) {
        if nvrtc > driver {
            warnings.push(Warning {
                id: "nvrtc-newer-than-driver",
                message: format!(
                    "NVRTC {nvrtc} is newer than the driver (CUDA {driver}): PTX it emits will not \
                     load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). cudyn compiles to SASS (a cubin) \
                     for the device instead, which loads on any driver."
                ),
            });
        }
    }
    if let Some(runtime) = runtime {
        if runtime < runtime::LIBRARY_API_VERSION {
            warnings.push(Warning {
                id: "runtime-without-library-api",
                message: format!(
                    "the CUDA runtime {runtime} is older than {}: it lacks the runtime library API \
                     (cudaLibraryLoadData, cudaGetKernel); cudyn loads through the driver's \
                     cuLibrary* API instead.",
                    runtime::LIBRARY_API_VERSION
                ),
            });
        }
        if let Some(driver) = driver {
            if runtime.major > driver.major {
                warnings.push(Warning {
                    id: "runtime-newer-than-driver",
                    message: format!(
                        "the CUDA runtime {runtime} needs a driver for CUDA {}.x, but the driver \
                         supports CUDA {driver}: runtime calls will fail with \
                         cudaErrorInsufficientDriver. Use a runtime {}.x or update the driver.",
                        runtime.major, driver.major
                    ),
                });
            }
        }
    }
    if let (Some(nvrtc), Some(nvjitlink)) = (nvrtc, nvjitlink) {
        if nvrtc > nvjitlink {
            warnings.push(Warning {
                id: "nvrtc-newer-than-nvjitlink",
                message: format!(
                    "NVRTC {nvrtc} is newer than nvJitLink {nvjitlink}: LTO-IR from NVRTC cannot be \
                     linked by an older nvJitLink. Install matching versions."
                ),
            });
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(warnings: &[Warning]) -> Vec<&'static str> {
        warnings.iter().map(|w| w.id).collect()
    }

    const V13_0: Option<Version> = Some(Version::new(13, 0));

    #[test]
    fn a_matching_toolchain_has_no_warning() {
        assert!(compatibility_warnings(V13_0, V13_0, V13_0, V13_0).is_empty());
        assert!(compatibility_warnings(None, V13_0, V13_0, V13_0).is_empty());
    }

    #[test]
    fn nvrtc_newer_than_the_driver_is_the_ptx_trap() {
        let warnings = compatibility_warnings(V13_0, V13_0, Some(Version::new(13, 5)), V13_0);
        assert!(ids(&warnings).contains(&"nvrtc-newer-than-driver"));
        assert!(warnings[0]
            .message
            .contains("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
        assert!(ids(&warnings).contains(&"nvrtc-newer-than-nvjitlink"));
    }

    #[test]
    fn an_old_runtime_means_the_driver_api() {
        let warnings = compatibility_warnings(
            V13_0,
            Some(Version::new(12, 6)),
            Some(Version::new(12, 6)),
            Some(Version::new(12, 6)),
        );
        assert_eq!(ids(&warnings), vec!["runtime-without-library-api"]);
        let at_12_8 = compatibility_warnings(
            V13_0,
            Some(Version::new(12, 8)),
            None,
            Some(Version::new(12, 8)),
        );
        assert!(at_12_8.is_empty());
    }

    #[test]
    fn a_runtime_of_a_newer_major_than_the_driver_cannot_run() {
        let warnings = compatibility_warnings(Some(Version::new(12, 9)), V13_0, None, None);
        assert_eq!(ids(&warnings), vec!["runtime-newer-than-driver"]);
    }

    fn headers(cuda: Option<Version>, nvrtc: Option<Version>) -> CudaHeaders {
        let folder = |path: &str| crate::sys::locate::HeaderFolder {
            folder: PathBuf::from(path),
            origin: Origin::PythonWheel,
            cuda_version: cuda,
            note: None,
        };
        CudaHeaders {
            cuda: Some(folder("/site/nvidia/cu13/include")),
            cccl: Some(folder("/site/nvidia/cu13/include/cccl")),
            cccl_version: Some("3.0.1".to_owned()),
            nvrtc_version: nvrtc,
            searched: Vec::new(),
        }
    }

    #[test]
    fn headers_of_nvrtcs_version_raise_no_warning() {
        assert!(header_warnings(&headers(V13_0, V13_0)).is_empty());
        assert!(header_warnings(&headers(None, V13_0)).is_empty());
    }

    #[test]
    fn headers_of_another_version_than_nvrtc_are_warned_about() {
        let warnings = header_warnings(&headers(Some(Version::new(12, 8)), V13_0));
        assert_eq!(ids(&warnings), vec!["headers-differ-from-nvrtc"]);
        assert!(
            warnings[0]
                .message
                .contains("/site/nvidia/cu13/include are CUDA 12.8"),
            "{}",
            warnings[0].message
        );
    }

    #[test]
    fn missing_headers_are_warned_about_with_the_packages_to_install() {
        let mut without_cccl = headers(V13_0, V13_0);
        without_cccl.cccl = None;
        let warnings = header_warnings(&without_cccl);
        assert_eq!(ids(&warnings), vec!["headers-not-found"]);
        assert!(warnings[0].message.starts_with("CCCL's headers"));
        assert!(warnings[0].message.contains("nvidia-cuda-cccl==13.0.85"));
    }
}
