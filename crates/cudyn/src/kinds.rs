//! The kinds of device code, as values every layer names: what an image is ([`ImageKind`]),
//! what a compile makes ([`Output`]), what a link takes ([`InputKind`]).

use std::fmt;

/// The kinds of device code cudyn recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ImageKind {
    /// PTX assembly text (`.version`, `.target`).
    Ptx,
    /// A CUDA ELF object (machine `EM_CUDA`, 190) holding SASS for one GPU architecture.
    Cubin,
    /// A fat binary: a container of cubins, PTX and LTO-IR for several architectures.
    Fatbin,
    /// LTO-IR (NVVM IR for link-time optimization with nvJitLink).
    LtoIr,
    /// A host object, executable or shared library with embedded fatbins (built by nvcc).
    HostBinary,
    /// A static library (`ar` archive, `.a`) of device code or host objects, e.g.
    /// `libcudadevrt.a`.
    Archive,
}

impl ImageKind {
    /// Whether `cuLibraryLoadData` / `cudaLibraryLoadData` accept this kind as it is.
    ///
    /// LTO-IR must be linked with nvJitLink first; a host binary's embedded fatbins can be
    /// extracted with [`Image::embedded_fatbins`](crate::Image::embedded_fatbins).
    pub fn is_loadable(self) -> bool {
        self.unloadable_advice().is_none()
    }

    /// What to do with an image of this kind instead of loading it; `None` when it loads.
    pub(crate) fn unloadable_advice(self) -> Option<&'static str> {
        match self {
            ImageKind::Ptx | ImageKind::Cubin | ImageKind::Fatbin => None,
            ImageKind::LtoIr => Some(
                "link it first with cudyn::Linker (LinkOptions::lto) or cudyn::compile::link_lto, \
                 then load the linked image",
            ),
            ImageKind::HostBinary => Some(
                "a host program or object is not a library of device code; load its embedded \
                 fatbins (Image::embedded_fatbins) instead",
            ),
            ImageKind::Archive => Some(
                "a static library is linked, not loaded: link it with cudyn::Linker \
                 (InputKind::Library) or `cudyn link`, then load the linked image",
            ),
        }
    }
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageKind::Ptx => "PTX",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
            ImageKind::LtoIr => "LTO-IR",
            ImageKind::HostBinary => "host binary",
            ImageKind::Archive => "static library",
        })
    }
}

/// The kind of device code a [`Program`](crate::compile::Program) produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Output {
    /// SASS for one real architecture, in an ELF cubin: loads on any driver that knows the GPU,
    /// whatever NVRTC's version. The default.
    #[default]
    Cubin,
    /// PTX for a virtual architecture, NUL-terminated, JIT-compiled by the driver when loaded;
    /// refused when NVRTC is newer than the driver (see [`crate::compile::target`]).
    Ptx,
    /// LTO-IR (`-dlto`), for [`Linker`](crate::compile::Linker) with link-time optimization. Pieces that call
    /// into each other also need [`Program::relocatable`](crate::compile::Program::relocatable).
    LtoIr,
}

impl Output {
    /// The usual file extension: `cubin`, `ptx` or `ltoir`.
    pub fn extension(&self) -> &'static str {
        match self {
            Output::Cubin => "cubin",
            Output::Ptx => "ptx",
            Output::LtoIr => "ltoir",
        }
    }
}

impl From<Output> for ImageKind {
    /// The kind of image a compile or link of `output` gives.
    fn from(output: Output) -> ImageKind {
        match output {
            Output::Cubin => ImageKind::Cubin,
            Output::Ptx => ImageKind::Ptx,
            Output::LtoIr => ImageKind::LtoIr,
        }
    }
}

/// The kind of a linker input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputKind {
    /// A cubin (ELF with SASS), relocatable or not.
    Cubin,
    /// PTX text; nvJitLink compiles it to SASS itself.
    Ptx,
    /// LTO-IR from NVRTC or nvcc with `-dlto`; needs [`LinkOptions::lto`](crate::compile::LinkOptions::lto).
    LtoIr,
    /// A fat binary.
    Fatbin,
    /// A host object file with embedded device code (`.o`).
    Object,
    /// A host library archive with embedded device code (`.a`).
    Library,
    /// Let nvJitLink tell (from a file's extension).
    Any,
}

impl InputKind {
    /// The input kind of device code of `kind`.
    pub fn of(kind: ImageKind) -> InputKind {
        match kind {
            ImageKind::Ptx => InputKind::Ptx,
            ImageKind::Cubin => InputKind::Cubin,
            ImageKind::Fatbin => InputKind::Fatbin,
            ImageKind::LtoIr => InputKind::LtoIr,
            ImageKind::HostBinary => InputKind::Object,
            ImageKind::Archive => InputKind::Library,
        }
    }

    /// The kind of device code an input of this kind must be; `None` for [`InputKind::Any`].
    pub(crate) fn image_kind(self) -> Option<ImageKind> {
        match self {
            InputKind::Ptx => Some(ImageKind::Ptx),
            InputKind::Cubin => Some(ImageKind::Cubin),
            InputKind::Fatbin => Some(ImageKind::Fatbin),
            InputKind::LtoIr => Some(ImageKind::LtoIr),
            InputKind::Object => Some(ImageKind::HostBinary),
            InputKind::Library => Some(ImageKind::Archive),
            InputKind::Any => None,
        }
    }
}
