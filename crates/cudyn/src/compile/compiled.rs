//! What NVRTC produces: the kinds of output, and a compiled program.

use super::target::Arch;
use crate::error::Result;
use crate::image::Checked;
pub use crate::kinds::Output;
use crate::library::loader::Checks;
use crate::library::{Library, LibraryLoader};
use crate::shared_bytes::SharedBytes;

/// How the compile cache served a compile ([`Compiled::cache_use`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheUse {
    /// The result came from the compile cache: NVRTC did not run.
    Hit,
    /// NVRTC compiled it, and the result was offered to the cache for next time.
    Miss,
    /// NVRTC compiled it without the cache: the cache is off for the process or the program,
    /// or its folder is refused (see [`crate::cache`]).
    #[default]
    Off,
    /// NVRTC compiled it, and the cache neither answered nor stored it: what the compile
    /// reads cannot be known for certain, for this reason (see
    /// [`Dependencies::unknown`](super::Dependencies::unknown)).
    Uncacheable(String),
}

/// What compiling a [`Program`](super::Program) produced.
///
/// Cloning it is cheap: the code is shared, with the compile cache's copy too.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub(crate) name: String,
    pub(crate) output: Output,
    pub(crate) arch: Arch,
    pub(crate) code: SharedBytes,
    pub(crate) log: String,
    pub(crate) lowered_names: Vec<(String, String)>,
    /// What the check before a load found in the code, when it was checked as it was stored in
    /// (or read from) the compile cache: a load of it need not check or hash it again.
    pub(crate) checked: Option<Checked>,
    pub(crate) cache_use: CacheUse,
}

/// Two results are equal when everything they give is: whether the code was checked already
/// is the loader's business, and whether it came from the cache the cache's.
impl PartialEq for Compiled {
    fn eq(&self, other: &Compiled) -> bool {
        let Compiled {
            name,
            output,
            arch,
            code,
            log,
            lowered_names,
            checked: _,
            cache_use: _,
        } = self;
        (name, output, arch, code, log, lowered_names)
            == (
                &other.name,
                &other.output,
                &other.arch,
                &other.code,
                &other.log,
                &other.lowered_names,
            )
    }
}

impl Eq for Compiled {}

impl Compiled {
    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kind of code.
    pub fn output(&self) -> Output {
        self.output
    }

    /// The architecture it was compiled for.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The device code, ready for `cudaLibraryLoadData` (PTX includes its terminating NUL).
    pub fn code(&self) -> &[u8] {
        &self.code
    }

    /// The device code, owned (a copy when the code is shared, as it is with the compile
    /// cache).
    pub fn into_code(self) -> Vec<u8> {
        self.code.to_vec()
    }

    /// NVRTC's log: warnings and remarks; empty when it had nothing to say.
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The lowered (mangled) name of a name expression given to
    /// [`Program::name_expression`](super::Program::name_expression): `_Z5saxpyIfEvT_PS0_S1_S1_m` for `saxpy<float>`. This is the
    /// name to look the kernel up by in the loaded code.
    pub fn lowered_name(&self, expression: &str) -> Option<&str> {
        self.lowered_names
            .iter()
            .find(|(given, _)| given == expression)
            .map(|(_, lowered)| lowered.as_str())
    }

    /// Whether the compile cache answered, stored the result, was off, or could not be used
    /// for this program (and why).
    pub fn cache_use(&self) -> &CacheUse {
        &self.cache_use
    }

    /// Every name expression with its lowered name, in the order given.
    pub fn lowered_names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lowered_names
            .iter()
            .map(|(given, lowered)| (given.as_str(), lowered.as_str()))
    }
}

/// What the compile layer adds to the loader below it: loading its own results.
impl LibraryLoader {
    /// Loads what NVRTC compiled (a cubin or PTX); its name expressions then work as kernel
    /// names: `library.kernel("saxpy<float>")`.
    pub fn load_compiled(&self, compiled: &Compiled) -> Result<Library> {
        let code = compiled.code();
        let checks = compiled
            .checked
            .map_or(Checks::CompilerOutput, Checks::Done);
        self.load_checked(
            &compiled.lowered_names,
            code,
            &|| crate::image::bytes_given(code),
            checks,
        )
    }
}
