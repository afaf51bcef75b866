//! `cudyn run`: load device code (or compile a .cu with NVRTC), launch one kernel with arguments
//! from the command line, time it with device events and summarize the buffers it leaves.

mod arguments;
mod gpu;
mod limits;
mod output;
mod spec;
mod values;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::compile::{Arch, Program};
use cudyn::inspect::Module;
use cudyn::{Image, LaunchConfig, ParamLayout};

use crate::terminal;
use spec::{ArgSpec, Dims, OutSpec};

const AFTER_HELP: &str = "\
Arguments (--arg, one per kernel parameter, in order):
  TYPE:VALUE             a scalar, by value; TYPE is i8, u8, i16, u16, i32, u32, i64, u64,
                         f32 or f64 (size_t is u64, int is i32, float is f32)
  buf:TYPE:COUNT[=INIT]  COUNT elements of device memory, passed as their address. INIT is a
                         value for every element (0 when left out), `range` (0, 1, 2, ...),
                         `random` (seeded with the argument's index) or `random:SEED`; random
                         floats lie in [0, 1), random integers in 0..100
  buf:TYPE:@FILE         device memory holding FILE's bytes, read as native-endian elements

Every launch sees the buffers as given (they are restored between --repeat launches); the
summary is of the buffers after the last one. `run` trusts the kernel to stay within the
buffers given, as any launcher must: a kernel that reads or writes past them (because the
sizes passed disagree with the buffers, say) has undefined behaviour, usually a CUDA
illegal-address error.

Exit status:
  0  the kernel ran (with --check: the arguments, grid, block and shared memory fit the kernel)
  1  failure: a file cannot be read, the code does not compile or load, CUDA reports an error
  2  usage: a malformed option or --arg value
  3  no GPU: no NVIDIA driver or no GPU (with a .cu and no --arch, even for --check)
  4  the kernel and the arguments disagree: no such kernel, a different number, size or
     alignment of arguments, or a grid, block or shared memory size the kernel cannot take
     (with --check: beyond the limits of the architecture or of the kernel's device code)

Examples:
  # SAXPY on 2^20 random floats: out = 2.5 x + y; write out to out.bin
  cudyn run saxpy.cu saxpy --grid 4096 --block 256 --arg f32:2.5 \\
      --arg buf:f32:1048576=random --arg buf:f32:1048576=1 --arg buf:f32:1048576 \\
      --arg u64:1048576 --out 3=out.bin
  # The same from a cubin, timed over 100 launches, as JSON
  cudyn run saxpy.cubin saxpy --grid 4096 --block 256 --repeat 100 --json --arg f32:2.5 \\
      --arg buf:f32:1048576=random --arg buf:f32:1048576=1 --arg buf:f32:1048576 \\
      --arg u64:1048576
  # Check the arguments and the launch against the kernel and sm_90, with no GPU
  cudyn run saxpy.cu saxpy --arch sm_90 --check --grid 4096 --block 256 --arg f32:2.5 \\
      --arg buf:f32:0 --arg buf:f32:0 --arg buf:f32:0 --arg u64:0
  # A 2-D launch reading a matrix from a file
  cudyn run blur.fatbin blur --grid 64,64 --block 16,16 --arg buf:f32:@image.bin \\
      --arg buf:f32:1048576 --arg i32:1024";

/// Options of `cudyn run`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Device code: a cubin, fatbin or PTX file, or CUDA C++ (a .cu file), compiled with NVRTC
    /// for the GPU (or for --arch).
    #[arg(value_hint = clap::ValueHint::FilePath)]
    file: PathBuf,
    /// The kernel: its symbol (as `cudyn inspect` lists it) or, when launching, its C++ name
    /// (`scale<float>`).
    kernel: String,
    /// Blocks in the grid: N, X,Y or X,Y,Z.
    #[arg(long, value_name = "N|X,Y,Z")]
    grid: Dims,
    /// Threads in a block: N, X,Y or X,Y,Z.
    #[arg(long, value_name = "N|X,Y,Z")]
    block: Dims,
    /// Dynamic shared memory per block, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    shared: u32,
    /// A kernel argument (repeat it for each parameter, in order): TYPE:VALUE,
    /// buf:TYPE:COUNT[=INIT] or buf:TYPE:@FILE (see below).
    #[arg(long = "arg", value_name = "ARG")]
    arguments: Vec<ArgSpec>,
    /// Launches to time (each timed with device events; the median and minimum are printed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Write the buffer passed as argument INDEX (from 0) to FILE after the launch.
    #[arg(long, value_name = "INDEX=FILE")]
    out: Vec<OutSpec>,
    /// The architecture a .cu file is compiled for (sm_90, 90 or 9.0); the GPU's when left out.
    #[arg(long)]
    arch: Option<Arch>,
    /// Check the arguments against the kernel's parameters as the device code records them,
    /// then stop: needs no GPU (the kernel is named by its symbol).
    #[arg(long)]
    check: bool,
    /// Print the result as JSON (the schema is in docs/CLI.md).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limit: crate::input::Limit,
}

/// How `cudyn run` ended, as its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Anything that is not the command line's or the kernel's fault.
    Failure = 1,
    /// The command line asks for something malformed or impossible.
    Usage = 2,
    /// There is no driver or no GPU.
    NoGpu = 3,
    /// The arguments or the configuration do not fit the kernel, or there is no such kernel.
    Mismatch = 4,
}

/// Why `cudyn run` failed: a message in the command's terms, the exit status, and the error
/// behind it.
#[derive(Debug)]
pub struct Failure {
    status: Status,
    message: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Failure {
    fn new(status: Status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
            cause: None,
        }
    }

    fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// `what` failed because of `error`; the status follows from the kind of error.
    fn from_cuda(what: impl Into<String>, error: cudyn::Error) -> Self {
        let status = match &error {
            cudyn::Error::KernelNotFound { .. }
            | cudyn::Error::AmbiguousKernel { .. }
            | cudyn::Error::KernelNotInImage { .. }
            | cudyn::Error::LaunchArguments { .. }
            | cudyn::Error::LaunchConfig { .. } => Status::Mismatch,
            cudyn::Error::ArchRequired { .. } => Status::NoGpu,
            _ => Status::Failure,
        };
        Failure::new(status, what).caused_by(error)
    }
}

impl From<crate::output::CliError> for Failure {
    fn from(error: crate::output::CliError) -> Self {
        let status = match error.exit_code() {
            code if code == std::process::ExitCode::from(2) => Status::Usage,
            _ => Status::Failure,
        };
        Failure::new(status, error.to_string()).caused_by(error)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

pub fn run(args: &Args) -> ExitCode {
    match execute(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            terminal::print_error("cudyn run", &failure);
            ExitCode::from(failure.status as u8)
        }
    }
}

fn execute(args: &Args) -> Result<(), Failure> {
    check_outputs(&args.out, &args.arguments)?;
    let arguments = arguments::prepare(&args.arguments, args.limit)?;
    let DeviceCode { code, symbol } = device_code(args)?;
    // A template instantiated for this run is known by the symbol NVRTC gave it.
    let kernel_name = symbol.as_deref().unwrap_or(&args.kernel);
    let image = Image::new(code.as_slice()).map_err(|error| {
        Failure::from_cuda(format!("{} is not device code", args.file.display()), error)
    })?;
    let config = LaunchConfig::new(args.grid.0, args.block.0).shared_mem(args.shared);
    if let Some(params) = offline_params(args, kernel_name, &image)? {
        arguments::check_offline(kernel_name, &params, &arguments)?;
        if args.check {
            limits::check_offline(&image, kernel_name, args.arch, &config)?;
            return output::print_check(args, &params);
        }
    }

    let device = gpu::first_device()?;
    let kernel = gpu::load_kernel(&code, kernel_name)?;
    gpu::allow_shared_memory(&kernel, device, args.shared)?;
    let outcome = gpu::launch(&kernel, &config, &arguments, args.repeat)?;
    let buffers = output::summarize(&arguments, &outcome.after);
    for out in &args.out {
        let bytes = outcome.after.get(out.argument).and_then(Option::as_ref);
        std::fs::write(&out.path, bytes.map_or(&[][..], Vec::as_slice)).map_err(|error| {
            Failure::new(
                Status::Failure,
                format!(
                    "cannot write argument {} to {}",
                    out.argument,
                    out.path.display()
                ),
            )
            .caused_by(error)
        })?;
    }
    output::print_run(args, &device, &outcome.times, &buffers)
}

/// The kernel's parameters as the device code records them, to check the arguments against
/// before any GPU is involved (so that a mismatch reads the same with or without one). `None`
/// when no symbol has the kernel's name, which may be a C++ name that only the loaded library
/// resolves; with --check, which has nothing else to go by, that is an error.
fn offline_params(
    args: &Args,
    kernel: &str,
    image: &Image<'_>,
) -> Result<Option<Vec<ParamLayout>>, Failure> {
    match image.param_layout(kernel) {
        Ok(params) => Ok(Some(params)),
        Err(cudyn::Error::KernelNotInImage { .. }) if !args.check => Ok(None),
        Err(error @ cudyn::Error::KernelNotInImage { .. }) => {
            let mut symbols: Vec<String> = image
                .inspect()
                .map(|inspection| kernel_symbols(&inspection))
                .unwrap_or_default();
            // A fatbin names each kernel once per architecture.
            let mut seen = std::collections::HashSet::new();
            symbols.retain(|symbol| seen.insert(symbol.clone()));
            let known = if symbols.is_empty() {
                "it defines none".to_owned()
            } else {
                format!("its kernels are {}", symbols.join(", "))
            };
            Err(Failure::from_cuda(
                format!(
                    "no kernel `{}` in {}: {known} (--check names a kernel by its symbol)",
                    args.kernel,
                    args.file.display()
                ),
                error,
            ))
        }
        Err(error) => Err(Failure::from_cuda(
            format!(
                "cannot read the parameters of kernel `{}` from {}",
                args.kernel,
                args.file.display()
            ),
            error,
        )),
    }
}

/// The symbols of every kernel an image defines, in order, with their C++ names.
fn kernel_symbols(inspection: &cudyn::Inspection) -> Vec<String> {
    let named = |symbol: &str, demangled: &Option<String>| match demangled {
        Some(demangled) => format!("{symbol} ({demangled})"),
        None => symbol.to_owned(),
    };
    inspection
        .modules()
        .iter()
        .flat_map(|module| match module {
            Module::Cubin(cubin) => cubin
                .kernels
                .iter()
                .map(|k| named(&k.name, &k.demangled))
                .collect::<Vec<_>>(),
            Module::Ptx(ptx) => ptx
                .entries
                .iter()
                .map(|e| named(&e.name, &e.demangled))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Every `--out` must name a buffer argument.
fn check_outputs(outs: &[OutSpec], specs: &[ArgSpec]) -> Result<(), Failure> {
    for out in outs {
        match specs.get(out.argument) {
            Some(ArgSpec::Buffer { .. }) => {}
            found => {
                let what = if found.is_some() {
                    "a scalar"
                } else {
                    "not given"
                };
                return Err(Failure::new(
                    Status::Usage,
                    format!(
                        "--out {}={}: argument {} is {what}; --out names a buffer argument by \
                         its index, from 0",
                        out.argument,
                        out.path.display(),
                        out.argument
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The device code to run, and the kernel's symbol when compiling made it known.
struct DeviceCode {
    code: Vec<u8>,
    symbol: Option<String>,
}

/// The device code in the file: its bytes, or for a .cu file the cubin NVRTC makes of it, named
/// by its path (NVRTC finds quoted headers beside it). A kernel named as a template instance
/// (`scale<float>`) is instantiated there: its symbol comes back with the code.
fn device_code(args: &Args) -> Result<DeviceCode, Failure> {
    let file = &args.file;
    if file.extension() != Some(std::ffi::OsStr::new("cu")) {
        return Ok(DeviceCode {
            code: crate::input::device_code(file, args.limit)?,
            symbol: None,
        });
    }
    let source = crate::input::source(file, args.limit)?;
    let mut program = Program::new(source).name(file.to_string_lossy());
    if let Some(arch) = args.arch {
        program = program.arch(arch);
    }
    let instance = template_instance(&args.kernel).map(|instance| {
        (
            instance,
            program.clone().name_expression(instance).compile(),
        )
    });
    if let Some((instance, Ok(compiled))) = instance {
        return Ok(DeviceCode {
            symbol: compiled.lowered_name(instance).map(str::to_owned),
            code: compiled_code(compiled),
        });
    }
    // No such template (or no instance asked for): the source alone, whose kernels the error
    // for a missing kernel lists, and whose compile errors are the ones to report.
    let compiled = program.compile().map_err(|error| match error {
        // The library's message names its own setters; here the fix is an option, and the
        // cause is why there is no GPU.
        cudyn::Error::ArchRequired { cause, .. } => Failure::new(
            Status::NoGpu,
            format!(
                "cannot compile {} for the GPU: there is none here; pass --arch (e.g. --arch \
                 sm_90) to compile it for --check",
                file.display()
            ),
        )
        .caused_by(*cause),
        error => Failure::from_cuda(format!("cannot compile {}", file.display()), error),
    })?;
    Ok(DeviceCode {
        code: compiled_code(compiled),
        symbol: None,
    })
}

/// The code of a compile, its log (warnings) shown first.
fn compiled_code(compiled: cudyn::compile::Compiled) -> Vec<u8> {
    if !compiled.log().trim().is_empty() {
        crate::streams::errln!("{}", compiled.log().trim_end());
    }
    compiled.into_code()
}

/// The template instance a kernel's C++ name asks for (`ns::scale<float>`, also written with
/// its parameters, `scale<float>(float*, float)`): what NVRTC must instantiate for it to exist.
fn template_instance(kernel: &str) -> Option<&str> {
    let name = kernel.split('(').next().unwrap_or(kernel).trim();
    name.ends_with('>').then_some(name)
}
