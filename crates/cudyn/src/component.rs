//! Which CUDA libraries cudyn uses, their file names and how to install them.

use std::fmt;

/// A CUDA library cudyn can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
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

/// The fix for a missing CUDA library that a pinned wheel provides.
macro_rules! install_hint {
    ($pin:literal) => {
        concat!(
            "Run `scripts/cuda-wheels` from cudyn's repository (it installs the pinned CUDA \
             wheels and records where, and cudyn finds them there with nothing activated; wheels \
             installed elsewhere are found with CUDYN_WHEELS_VENV=DIR), or install it with `pip \
             install ",
            $pin,
            "` or a CUDA toolkit, or point CUDYN_LIBRARY_PATH at the folder holding it."
        )
    };
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
    pub(super) const TOOLKIT: [Component; 3] =
        [Component::Runtime, Component::Nvrtc, Component::NvJitLink];

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
    pub(super) fn wheel_folder(self) -> Option<&'static str> {
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
            Component::Runtime => install_hint!("nvidia-cuda-runtime==13.0.96"),
            Component::Nvrtc => install_hint!("nvidia-cuda-nvrtc==13.0.88"),
            Component::NvJitLink => install_hint!("nvidia-nvjitlink==13.0.88"),
            Component::NvFatbin => install_hint!("nvidia-nvfatbin==13.0.85"),
        }
    }

    /// Whether a file name is a loaded copy of this component (`/proc/self/maps` shows the real
    /// file behind the soname link, e.g. `libcudart.so.13.0.96` or `libcuda.so.580.95.05`).
    pub(super) fn matches_loaded_file(self, file_name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_hints_name_the_wheels_the_set_up_script_pins() {
        let script = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-wheels"));
        let pins: Vec<&str> = script
            .lines()
            .map(str::trim)
            .filter(|line| line.starts_with("nvidia-"))
            .collect();
        for component in Component::ALL {
            let hint = component.install_hint();
            let Some((_, after)) = hint.split_once("`pip install ") else {
                assert_eq!(component, Component::Driver, "{hint}");
                continue;
            };
            let pin = after.split('`').next().unwrap();
            assert!(
                pins.contains(&pin),
                "{component}: {pin} is not among {pins:?}"
            );
            assert!(hint.starts_with("Run `scripts/cuda-wheels`"), "{hint}");
        }
    }
}
