//! # cudyn-build
//!
//! A build-script helper for Rust crates that link CUDA C++ kernels compiled by nvcc and launch
//! them with [cudyn](https://docs.rs/cudyn): it compiles `.cu` files into a static library
//! linked into the crate, with the CUDA runtime's static library, and generates a Rust function
//! per kernel that returns its `cudyn::Kernel`.
//!
//! A kernel compiled by nvcc registers with the CUDA runtime instance it is linked with. With
//! `-cudart static` (nvcc's default, and what cudyn-build links) that instance is private to the
//! program: cudyn's own runtime, opened at run time, does not know the kernel, so
//! `cudaGetKernel` must be called *inside* the code the kernel was compiled with. cudyn-build
//! therefore compiles each source together with one `extern "C"` getter per kernel
//! (`cudaError_t cudyn_kernel_<library>_<kernel>(cudaKernel_t *)`, calling `cudaGetKernel`) and
//! the generated Rust function hands the getter to `cudyn::Kernel::from_getter`. The handle is
//! borrowed: cudyn never unloads it.
//!
//! ```no_run
//! // build.rs, in fn main
//! cudyn_build::Build::new()
//!     .file("kernels/vector_add.cu", ["vectorAdd"])
//!     .arch("sm_90")
//!     .compile_or_stub("linked_kernels")
//!     .unwrap_or_else(|error| panic!("{error}"));
//! ```
//!
//! ```ignore
//! // src/main.rs
//! mod linked {
//!     include!(concat!(env!("OUT_DIR"), "/linked_kernels.rs"));
//! }
//! let vector_add: cudyn::Kernel = linked::vector_add()?;
//! println!("{:?}", vector_add.params()?);
//! ```
//!
//! nvcc is found as [`nvcc::candidates`] says: `$CUDYN_NVCC`, `$CUDA_HOME/bin`, `$CUDA_PATH/bin`,
//! `PATH`, `/usr/local/cuda/bin`, then the CUDA wheels cudyn's `scripts/cuda-wheels` installs.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

mod generate;
pub mod nvcc;

pub use nvcc::Nvcc;

/// Everything that can stop a build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// nvcc is in none of the places looked at.
    #[error(
        "nvcc was not found: install the CUDA toolkit and set CUDA_HOME to it (or CUDYN_NVCC to \
         nvcc itself), or run cudyn's scripts/cuda-wheels, which installs nvcc from pip. \
         Looked at, in order:\n  - {}",
        searched.join("\n  - ")
    )]
    NvccNotFound {
        /// Every place looked at.
        searched: Vec<String>,
    },
    /// The toolkit of the nvcc found lacks the CUDA runtime's static library.
    #[error(
        "libcudart_static.a is not in the lib64 or lib folder of the toolkit of {}: install the \
         whole toolkit (or the nvidia-cuda-runtime wheel beside nvidia-cuda-nvcc)",
        nvcc.display()
    )]
    StaticRuntimeNotFound {
        /// The nvcc found.
        nvcc: PathBuf,
    },
    /// nvcc (or the archiver) ran and failed.
    #[error("fix the error nvcc reports for {}:\n{command}\n{output}", file.display())]
    NvccFailed {
        /// The file being compiled, or the library being archived.
        file: PathBuf,
        /// The command line.
        command: String,
        /// What nvcc printed.
        output: String,
    },
    /// A program could not be started, or a file written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A kernel's name is not a C identifier, which its getter's symbol must be.
    #[error(
        "`{name}` is not a C identifier: name the kernel's getter with Kernel::instance(\"{name}\", \
         \"a_c_identifier\")"
    )]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A source path an `#include` cannot name.
    #[error("{} holds a quote, backslash or line break, which an #include cannot name: rename it", path.display())]
    UnincludablePath {
        /// The path.
        path: PathBuf,
    },
    /// No output folder: not in a build script, and none given.
    #[error("OUT_DIR is not set: call this from a build script, or give Build::out_dir")]
    NoOutDir,
}

/// A kernel to take a handle of: the C++ expression naming its entry function and the C
/// identifier its getter (and, in snake case, its Rust function) is named after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    expression: String,
    name: String,
}

impl Kernel {
    /// A kernel named by an identifier, e.g. `vectorAdd` (Rust function `vector_add`).
    pub fn new(name: &str) -> Kernel {
        Kernel::instance(name, name)
    }

    /// One instance of a kernel template, e.g. `("scale<float>", "scale_f32")`, or any kernel
    /// under another name (`("ns::axpy", "axpy")`).
    pub fn instance(expression: &str, name: &str) -> Kernel {
        Kernel {
            expression: expression.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl From<&str> for Kernel {
    fn from(name: &str) -> Kernel {
        Kernel::new(name)
    }
}

/// The sources of one static library and how to compile them.
#[derive(Debug, Clone, Default)]
pub struct Build {
    sources: Vec<(PathBuf, Vec<Kernel>)>,
    archs: Vec<String>,
    flags: Vec<String>,
    out_dir: Option<PathBuf>,
}

/// What [`Build::compile`] made.
#[derive(Debug, Clone)]
pub struct Linked {
    /// The nvcc used.
    pub nvcc: Nvcc,
    /// The static library, `lib<name>.a`.
    pub library: PathBuf,
    /// The generated Rust module, `<name>.rs`, to `include!`.
    pub rust: PathBuf,
}

impl Build {
    /// An empty build.
    pub fn new() -> Build {
        Build::default()
    }

    /// Compiles `path` (relative to the crate's folder in a build script) and takes a handle of
    /// each of `kernels`: names such as `"vectorAdd"`, or [`Kernel::instance`].
    pub fn file<K: Into<Kernel>>(
        &mut self,
        path: impl AsRef<Path>,
        kernels: impl IntoIterator<Item = K>,
    ) -> &mut Build {
        let kernels = kernels.into_iter().map(Into::into).collect();
        self.sources.push((path.as_ref().to_path_buf(), kernels));
        self
    }

    /// Compiles for `arch` (`sm_90`): SASS for it and PTX the driver can compile for newer GPUs.
    /// Repeat for several. None given: nvcc's default architecture.
    pub fn arch(&mut self, arch: &str) -> &mut Build {
        self.archs.push(arch.to_owned());
        self
    }

    /// Passes `flag` to nvcc (`-O3`, `-DN=4`, `-Iinclude`, ...).
    pub fn flag(&mut self, flag: &str) -> &mut Build {
        self.flags.push(flag.to_owned());
        self
    }

    /// Writes into `dir` instead of `$OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Compiles the library `lib<name>.a` and `<name>.rs`, and tells cargo to link it with the
    /// static CUDA runtime. Fails when nvcc is missing: see [`Build::compile_or_stub`].
    pub fn compile(&self, name: &str) -> Result<Linked, Error> {
        let nvcc = self.find_nvcc()?;
        self.compile_with(name, nvcc)
    }

    /// As [`Build::compile`], but without nvcc the build goes on: a cargo warning says so, and
    /// every generated kernel function returns `cudyn::Error::KernelNotLinked` with the reason at
    /// run time. For a crate that must build on machines without CUDA (a workspace member, an
    /// optional part). A failing compile still fails the build. `None` when stubbed.
    pub fn compile_or_stub(&self, name: &str) -> Result<Option<Linked>, Error> {
        self.check_names()?;
        match self.find_nvcc() {
            Ok(nvcc) => self.compile_with(name, nvcc).map(Some),
            Err(error @ Error::NvccNotFound { .. }) => {
                let reason = format!("it was built without nvcc. {error}");
                println!(
                    "cargo:warning=building without the CUDA kernels ({}): nvcc was not found; \
                     set CUDA_HOME or run scripts/cuda-wheels, then rebuild",
                    self.kernel_list()
                );
                let rust = self.output_dir()?.join(format!("{name}.rs"));
                write(&rust, &self.rust_module(name, Some(&reason)))?;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    fn compile_with(&self, name: &str, nvcc: Nvcc) -> Result<Linked, Error> {
        // Checked first: without it nothing built would link.
        let runtime = nvcc
            .static_runtime_dir()
            .ok_or_else(|| Error::StaticRuntimeNotFound {
                nvcc: nvcc.path.clone(),
            })?;
        let linked = self.build(name, nvcc)?;
        print_link_lines(name, &linked, &runtime);
        Ok(linked)
    }

    /// Every kernel's name is a C identifier, as its getter's symbol and Rust function need.
    fn check_names(&self) -> Result<(), Error> {
        let kernels = self.sources.iter().flat_map(|(_, kernels)| kernels);
        match kernels
            .into_iter()
            .find(|kernel| !is_c_identifier(&kernel.name))
        {
            Some(kernel) => Err(Error::InvalidName {
                name: kernel.name.clone(),
            }),
            None => Ok(()),
        }
    }

    fn kernel_list(&self) -> String {
        let names: Vec<&str> = self
            .sources
            .iter()
            .flat_map(|(_, kernels)| kernels.iter().map(|kernel| kernel.expression.as_str()))
            .collect();
        names.join(", ")
    }

    fn find_nvcc(&self) -> Result<Nvcc, Error> {
        for variable in nvcc::ENVIRONMENT {
            println!("cargo:rerun-if-env-changed={variable}");
        }
        nvcc::find(nvcc::candidates(|key| std::env::var_os(key)))
            .map_err(|searched| Error::NvccNotFound { searched })
    }

    fn output_dir(&self) -> Result<PathBuf, Error> {
        self.out_dir
            .clone()
            .or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from))
            .ok_or(Error::NoOutDir)
    }

    fn rust_module(&self, name: &str, stubbed: Option<&str>) -> String {
        let sources: Vec<(&Path, &[Kernel])> = self
            .sources
            .iter()
            .map(|(path, kernels)| (path.as_path(), kernels.as_slice()))
            .collect();
        generate::rust_module(name, &sources, stubbed)
    }

    /// Compiles every source with its getters and archives the objects, without printing
    /// anything for cargo.
    pub fn build(&self, name: &str, nvcc: Nvcc) -> Result<Linked, Error> {
        self.check_names()?;
        let out = self.output_dir()?.join("cudyn-build");
        std::fs::create_dir_all(&out).map_err(|source| Error::Io {
            what: format!("cannot create {}", out.display()),
            source,
        })?;
        let mut objects = Vec::new();
        for (index, (source, kernels)) in self.sources.iter().enumerate() {
            let absolute = std::path::absolute(source).map_err(|error| Error::Io {
                what: format!("cannot resolve {}", source.display()),
                source: error,
            })?;
            let stem = source.file_stem().unwrap_or_default().to_string_lossy();
            let wrapper = out.join(format!("{index}_{stem}.getters.cu"));
            write(&wrapper, &generate::wrapper(name, &absolute, kernels)?)?;
            let object = out.join(format!("{index}_{stem}.o"));
            let mut command = Command::new(&nvcc.path);
            // -fPIC: Rust links position-independent executables by default.
            command.args(["-c", "-cudart", "static", "-Xcompiler", "-fPIC"]);
            for arch in &self.archs {
                let number = arch.trim_start_matches("sm_");
                command.arg(format!(
                    "-gencode=arch=compute_{number},code=[sm_{number},compute_{number}]"
                ));
            }
            command
                .args(&self.flags)
                .arg("-o")
                .arg(&object)
                .arg(&wrapper);
            run(command, source)?;
            println!("cargo:rerun-if-changed={}", source.display());
            objects.push(object);
        }
        let library = out.join(format!("lib{name}.a"));
        let mut archive = Command::new(&nvcc.path);
        archive.arg("--lib").arg("-o").arg(&library).args(&objects);
        run(archive, &library)?;
        let rust = self.output_dir()?.join(format!("{name}.rs"));
        write(&rust, &self.rust_module(name, None))?;
        Ok(Linked {
            nvcc,
            library,
            rust,
        })
    }
}

/// The lines that tell cargo to link the static library `name` and the static CUDA runtime in
/// `runtime`.
fn print_link_lines(name: &str, linked: &Linked, runtime: &Path) {
    let folder = linked.library.parent().unwrap_or(Path::new("."));
    println!("cargo:rerun-if-changed={}", linked.nvcc.path.display());
    println!("cargo:rustc-link-search=native={}", folder.display());
    println!("cargo:rustc-link-lib=static={name}");
    println!("cargo:rustc-link-search=native={}", runtime.display());
    // The static runtime needs the C++ library (nvcc's host code is C++) and librt, libdl
    // and libpthread.
    for library in ["static=cudart_static", "stdc++", "rt", "dl", "pthread"] {
        println!("cargo:rustc-link-lib={library}");
    }
}

fn is_c_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        what: format!("cannot write {}", path.display()),
        source,
    })
}

fn run(mut command: Command, file: &Path) -> Result<(), Error> {
    let line = format!("{command:?}");
    let output = command.output().map_err(|source| Error::Io {
        what: format!("cannot run {line}"),
        source,
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::NvccFailed {
        file: file.to_path_buf(),
        command: line,
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_name_that_is_no_c_identifier_is_refused_before_nvcc_runs() {
        let dir = tempfile::tempdir().unwrap();
        let error = Build::new()
            .file("kernels.cu", ["scale<float>"])
            .out_dir(dir.path())
            .compile_or_stub("mine")
            .unwrap_err();
        assert!(
            matches!(&error, Error::InvalidName { name } if name == "scale<float>"),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("Kernel::instance(\"scale<float>\""),
            "{error}"
        );
        assert!(Build::new()
            .file(
                "kernels.cu",
                [Kernel::instance("scale<float>", "scale_f32")]
            )
            .check_names()
            .is_ok());
    }
}
