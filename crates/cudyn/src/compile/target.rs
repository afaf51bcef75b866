//! What device code is compiled for: the GPU architecture, and whether PTX may be emitted at all.
//!
//! # The rule
//!
//! * With no architecture named, cudyn compiles SASS (a cubin) for the compute capability of the
//!   calling thread's current device ([`crate::current_device`], as [`crate::set_device`] chose
//!   it), the GPU the code will be loaded on. A cubin loads on any driver that knows the GPU,
//!   whatever the compiler's version, so the default path never meets the PTX trap below. Without
//!   a driver or a GPU there is nothing to ask, and the compile fails with
//!   [`Error::ArchRequired`] instead of guessing.
//! * PTX is loaded by the driver's JIT, which accepts PTX only up to its own ISA version. NVRTC and
//!   nvJitLink X.Y emit the PTX ISA of CUDA X.Y, so PTX from a compiler newer than the driver fails
//!   to load with `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` (and, through the runtime's library API, only
//!   later, at `cudaLibraryGetKernel`). cudyn therefore refuses an explicit PTX request in that case
//!   with [`Error::PtxNewerThanDriver`], which names the fixes: SASS, or finishing the PTX to a
//!   cubin with an nvJitLink at least as new as the compiler (it may be newer than the driver, see
//!   [`ptx_to_cubin`](super::ptx_to_cubin)). With no driver here nothing can load the PTX on this
//!   machine, so it is allowed; PTX meant for another machine's driver can be allowed explicitly.
//!
//! The decisions are pure functions of the versions ([`ptx_verdict`], [`arch_of_device`]) so that
//! they are tested with injected versions on machines without a GPU.

use std::str::FromStr;

pub use crate::arch::{Arch, ArchVariant};
use crate::error::{Error, Result};
use crate::sys::locate::Component;
use crate::version::Version;

impl Arch {
    /// The architecture of this GPU.
    pub fn of(device: &crate::Device) -> Result<Arch> {
        let (major, minor) = device.compute_capability()?;
        Ok(Arch::new(major, minor))
    }

    /// The architecture that code is compiled for when none is named: that of the calling
    /// thread's current device ([`crate::current_device`]), so that code compiled after
    /// `set_device(1)` is built for device 1.
    ///
    /// [`Error::ArchRequired`] when there is no driver or no GPU.
    pub fn current() -> Result<Arch> {
        arch_of_device(crate::current_device().and_then(|device| device.compute_capability()))
    }
}

impl FromStr for Arch {
    type Err = Error;

    /// Reads `sm_90`, `compute_90`, `90`, `9.0`, and the variants `sm_90a`, `sm_100f`.
    fn from_str(text: &str) -> Result<Arch> {
        Arch::parse(text).ok_or_else(|| Error::InvalidArch {
            text: text.to_owned(),
        })
    }
}

/// The architecture to compile for when none is named, from what asking the current device for
/// its compute capability gave.
pub fn arch_of_device(probe: Result<(u32, u32)>) -> Result<Arch> {
    match probe {
        Ok((major, minor)) => Ok(Arch::new(major, minor)),
        Err(error) => Err(Error::arch_required(error)),
    }
}

/// Whether PTX from a compiler of version `producer` can be handed to the driver here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PtxVerdict {
    /// The driver supports the PTX ISA the compiler emits.
    Loadable,
    /// There is no driver here: the PTX is for another machine, which this one cannot check.
    NoDriver,
    /// The compiler is newer than the driver: the driver would reject its PTX.
    TooNew {
        /// The compiler's version.
        producer: Version,
        /// The CUDA version the driver supports.
        driver: Version,
    },
}

/// Decides whether PTX from a compiler of version `producer` loads on a driver supporting CUDA
/// `driver` (`None`: no driver here).
///
/// NVRTC and nvJitLink X.Y emit the PTX ISA of CUDA X.Y (13.0 emits `.version 9.0`), and a
/// driver accepts PTX up to the ISA of the CUDA version it supports.
pub fn ptx_verdict(producer: Version, driver: Option<Version>) -> PtxVerdict {
    match driver {
        None => PtxVerdict::NoDriver,
        Some(driver) if producer > driver => PtxVerdict::TooNew { producer, driver },
        Some(_) => PtxVerdict::Loadable,
    }
}

impl PtxVerdict {
    /// The verdict for PTX from `producer` on the driver of this machine, if any.
    pub(crate) fn here(producer: Version) -> PtxVerdict {
        ptx_verdict(
            producer,
            crate::sys::driver().ok().map(|driver| driver.version),
        )
    }

    /// `Ok` unless the PTX cannot load here ([`Error::PtxNewerThanDriver`]), or `allowed` says
    /// the PTX is meant for another driver.
    pub fn require_loadable(self, component: Component, allowed: bool) -> Result<()> {
        match self {
            PtxVerdict::TooNew { producer, driver } if !allowed => Err(Error::PtxNewerThanDriver {
                producer: component,
                producer_version: producer,
                driver,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_spelling_of_an_architecture() {
        let sm_90 = Arch::new(9, 0);
        for text in ["sm_90", "compute_90", "90", "9.0", " sm_90 "] {
            assert_eq!(text.parse::<Arch>().unwrap(), sm_90, "{text}");
        }
        let sm_90a: Arch = "sm_90a".parse().unwrap();
        assert_eq!(sm_90a, sm_90.with(ArchVariant::Specific));
        assert_eq!(sm_90a.sm(), "sm_90a");
        assert_eq!(sm_90a.compute(), "compute_90a");
        let sm_100f: Arch = "sm_100f".parse().unwrap();
        assert_eq!(sm_100f.compute_capability(), (10, 0));
        assert_eq!(sm_100f.to_string(), "sm_100f");
        assert_eq!("sm_120".parse::<Arch>().unwrap().number(), 120);
    }

    #[test]
    fn rejects_what_is_not_an_architecture() {
        for text in ["", "sm_", "sm_x0", "9", "gfx90a", "9.x", "sm_9"] {
            let error = text.parse::<Arch>().unwrap_err();
            assert!(
                error.to_string().contains("not a GPU architecture"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn the_default_arch_is_the_gpu_s_or_a_clear_error() {
        assert_eq!(arch_of_device(Ok((9, 0))).unwrap(), Arch::new(9, 0));
        assert_eq!(arch_of_device(Ok((12, 1))).unwrap().sm(), "sm_121");
    }

    #[test]
    fn no_target_architecture_says_the_fix_first_and_keeps_the_search_list_as_its_source() {
        let missing = Error::LibraryNotFound {
            component: Component::Driver,
            searched: vec![
                "CUDA_HOME: /opt/cuda/{lib64,lib}".to_owned(),
                "system loader: libcuda.so.1: cannot open shared object file".to_owned(),
            ],
        };
        let error = arch_of_device(Err(missing)).unwrap_err();
        assert!(matches!(error, Error::ArchRequired { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with(
                "no target architecture: name one with Program::arch or LinkOptions::arch \
                 (`--arch sm_90` on the command line)"
            ),
            "{message}"
        );
        assert!(message.contains("no CUDA driver was found"), "{message}");
        assert!(message.contains("cudyn doctor"), "{message}");
        assert!(!message.contains("/opt/cuda"), "{message}");
        assert!(!message.contains('\n'), "{message}");
        let cause = std::error::Error::source(&error).expect("the search list is kept");
        assert!(cause.to_string().contains("/opt/cuda"), "{cause}");
    }

    #[test]
    fn a_failed_driver_call_is_named_in_a_few_words() {
        let call = crate::error::CallError {
            api: Component::Driver,
            call: "cuInit",
            code: 100,
            name: "CUDA_ERROR_NO_DEVICE".to_owned(),
            message: "no CUDA-capable device is detected".to_owned(),
            log: None,
            hint: None,
        };
        let message = arch_of_device(Err(Error::Cuda(Box::new(call))))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("but cuInit failed with CUDA_ERROR_NO_DEVICE;"),
            "{message}"
        );
    }

    #[test]
    fn ptx_from_a_compiler_newer_than_the_driver_is_refused() {
        let v13_0 = Version::new(13, 0);
        let v13_5 = Version::new(13, 5);
        assert_eq!(
            ptx_verdict(v13_5, Some(v13_0)),
            PtxVerdict::TooNew {
                producer: v13_5,
                driver: v13_0
            }
        );
        assert_eq!(ptx_verdict(v13_0, Some(v13_0)), PtxVerdict::Loadable);
        assert_eq!(ptx_verdict(v13_0, Some(v13_5)), PtxVerdict::Loadable);
        assert_eq!(
            ptx_verdict(Version::new(12, 9), Some(v13_0)),
            PtxVerdict::Loadable
        );
        assert_eq!(
            ptx_verdict(v13_0, Some(Version::new(12, 9))),
            PtxVerdict::TooNew {
                producer: v13_0,
                driver: Version::new(12, 9)
            }
        );
        assert_eq!(ptx_verdict(v13_5, None), PtxVerdict::NoDriver);
    }

    #[test]
    fn the_refusal_names_the_versions_and_the_fixes() {
        let verdict = ptx_verdict(Version::new(13, 5), Some(Version::new(13, 0)));
        let error = verdict
            .require_loadable(Component::Nvrtc, false)
            .unwrap_err();
        let message = error.to_string();
        for needle in [
            "13.5",
            "CUDA 13.0",
            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            "SASS",
            "ptx_to_cubin",
            "allow_newer_ptx",
        ] {
            assert!(message.contains(needle), "`{needle}` missing in: {message}");
        }
        assert!(verdict.require_loadable(Component::Nvrtc, true).is_ok());
        assert!(PtxVerdict::NoDriver
            .require_loadable(Component::Nvrtc, false)
            .is_ok());
    }
}
