//! Host-side cost of loading device code: what cudyn does on the CPU for each
//! `Library::loader().load(image)` besides the driver's own `cudaLibraryLoadData`, timed without
//! a GPU on the images the `load` rows of `cudyn-bench` load (the kernels of
//! `crates/cudyn-bench/kernels/peers.cu` compiled by NVRTC for sm_90: a cubin, PTX, and a fatbin
//! of the two built by nvFatbin).
//!
//! Per image, medians over many rounds (each round times a batch of calls and divides, so that the
//! clock's own cost does not count), the kinds interleaved:
//!
//! - **detect**: `Image::detect`, the kind from the headers;
//! - **check**: `Image::check`, the check every load of bytes from outside makes before the
//!   driver sees them (the loader's detection and `validate_loadable`: the same calls, PTX read as
//!   text once). Bytes found whole are remembered, so this is the check of bytes checked before:
//!   their comparison with the copy remembered. **first check** is the first of them in the
//!   process, timed once (cold caches included), the full walk; and a last line times the full
//!   walk of images new to the process, each told apart by an empty kernel of its own (for a
//!   fatbin, in its PTX, which is compressed and so decompressed too);
//! - **detect+validate**: `Image::new` + `Image::validate`, the same check in two public calls (PTX
//!   read as text by each);
//! - **key**: blake3 of the image, the bulk of the key under which a load that may share
//!   (`Sharing::Auto` or `Always`) looks for a library loaded already; a load with
//!   `Sharing::Never` does not hash;
//! - **inspect**: `Image::inspect`, for scale only: a load reads the image this far only when a
//!   second load would share the library and must know whether it defines variables.
//!
//! Run: `source ~/.cache/cudyn/venv-cu13.0/bin/activate` (NVRTC and nvFatbin from the CUDA
//! wheels, or a CUDA toolkit), then `cargo run --release -p cudyn-bench --bin bench_load_host`;
//! arguments (`cubin`, `ptx`, `fatbin`) time only those images, e.g. under a profiler, and
//! arguments naming files time those files too (e.g. a bigger cubin from `cudyn compile`). It
//! needs no GPU and no driver.
//!
//! For an instruction count per step (repeatable where times are not, e.g. under
//! `valgrind --tool=callgrind`): `bench_load_host --write DIR` writes the three images to
//! `DIR/peers.{cubin,ptx,fatbin}` and their variants new to the process to
//! `DIR/new/peers-K.{cubin,ptx,fatbin}`, and `bench_load_host --repeat N STEP FILE...` runs one
//! step (`detect`, `check`, `detect+validate`, `key`, `inspect`) N times on each file and prints
//! nothing; the count of N + 1 rounds less that of 1 round, over N, is the step's cost per call.
//! The full walk of a check, uncounted when the bytes were checked before, is the count of
//! `--repeat 1 check` over K + 1 variants less that over one, over K.

#[path = "../durations.rs"]
mod durations;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use durations::median;

use cudyn::compile::{Arch, FatbinBuilder, Output, Program};
use cudyn::{Image, Result};

const SOURCE: &str = include_str!("../../kernels/peers.cu");

/// One piece of a load's host-side work, on an image.
type Step = fn(&[u8]) -> Result<()>;

/// The steps timed, by name.
const STEPS: [(&str, Step); 5] = [
    ("detect", |image| Image::detect(image).map(drop)),
    ("check", |image| Image::check(image).map(drop)),
    ("detect+validate", |image| Image::new(image)?.validate()),
    ("key", |image| {
        black_box(blake3::hash(image));
        Ok(())
    }),
    ("inspect", |image| Image::new(image)?.inspect().map(drop)),
];

/// Images of each kind new to the process whose check is timed.
const NEW_IMAGES: usize = 101;

/// Rounds per figure, and calls per round.
const ROUNDS: usize = 501;
const BATCH: usize = 16;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match arguments.first().map(String::as_str) {
        Some("--write") => return write_images(arguments.get(1).map_or(".", String::as_str)),
        Some("--repeat") => return repeat(&arguments[1..]),
        _ => {}
    }
    let (files, wanted): (Vec<String>, Vec<String>) = std::env::args()
        .skip(1)
        .partition(|argument| Path::new(argument).is_file());
    let all = wanted.is_empty() && files.is_empty();
    let mut images: Vec<_> = images()?
        .into_iter()
        .filter(|(name, _)| all || wanted.iter().any(|w| w == name))
        .map(|(name, image)| (name.to_string(), image))
        .collect();
    for file in files {
        let image = std::fs::read(&file).map_err(|error| cudyn::Error::read_file(&file, error))?;
        images.push((file, image));
    }
    let width = images
        .iter()
        .map(|(name, _)| name.len())
        .fold(8, usize::max);
    let steps = STEPS;
    // Every call once: a failure is reported before any figure. The first check is timed.
    let mut first_checks = Vec::new();
    for (_, image) in &images {
        for (name, step) in &steps {
            let start = Instant::now();
            step(image)?;
            if *name == "check" {
                first_checks.push(start.elapsed());
            }
        }
    }
    let mut samples = vec![vec![Vec::with_capacity(ROUNDS); steps.len()]; images.len()];
    for _ in 0..ROUNDS {
        for (image_samples, (_, image)) in samples.iter_mut().zip(&images) {
            for (step_samples, (_, step)) in image_samples.iter_mut().zip(&steps) {
                let start = Instant::now();
                for _ in 0..BATCH {
                    step(black_box(image))?;
                }
                step_samples.push(start.elapsed() / BATCH as u32);
            }
        }
    }
    println!(
        "{:<width$} {:>7} {:>12}{}",
        "image",
        "bytes",
        "first check",
        steps
            .iter()
            .map(|(name, _)| format!("{name:>16}"))
            .collect::<String>()
    );
    for (((name, image), image_samples), first) in images.iter().zip(samples).zip(first_checks) {
        let figures: String = image_samples
            .into_iter()
            .map(|step_samples| format!("{:>14.2}us", micros(median(step_samples))))
            .collect();
        println!(
            "{name:<width$} {:>7} {:>10.2}us{figures}",
            image.len(),
            micros(first)
        );
    }
    println!(
        "medians of {ROUNDS} rounds of {BATCH} calls; check = what every load of outside bytes \
         runs before the driver"
    );
    for kind in KINDS {
        if !(all || wanted.iter().any(|w| w == kind)) {
            continue;
        }
        let fresh = new_images(kind)?;
        let mut checks = Vec::with_capacity(fresh.len());
        for image in &fresh {
            let start = Instant::now();
            Image::check(image)?;
            checks.push(start.elapsed());
        }
        println!(
            "{kind} new to the process: check {:.2}us (median of {} {kind}s with a kernel of their \
             own)",
            micros(median(checks)),
            fresh.len()
        );
    }
    Ok(())
}

/// `--write DIR`: the images of the `load` rows as `DIR/peers.<kind>`, and their variants new to
/// the process as `DIR/new/peers-K.<kind>`.
fn write_images(folder: &str) -> Result<()> {
    let new = Path::new(folder).join("new");
    std::fs::create_dir_all(&new).map_err(|error| cudyn::Error::read_file(&new, error))?;
    let write = |path: std::path::PathBuf, image: &[u8]| {
        std::fs::write(&path, image).map_err(|error| cudyn::Error::read_file(&path, error))
    };
    for (kind, image) in images()? {
        write(Path::new(folder).join(format!("peers.{kind}")), &image)?;
    }
    for kind in KINDS {
        for (index, image) in new_images(kind)?.iter().enumerate() {
            write(new.join(format!("peers-{index}.{kind}")), image)?;
        }
    }
    println!("{folder}/peers.{{cubin,ptx,fatbin}}, {folder}/new/peers-K.{{cubin,ptx,fatbin}}");
    Ok(())
}

/// `--repeat N STEP FILE...`: the step N times on each file, untimed (for an instruction count).
fn repeat(arguments: &[String]) -> Result<()> {
    let usage =
        "usage: bench_load_host --repeat N STEP FILE... (STEP: detect, check, detect+validate, key, \
         inspect)";
    let count = arguments
        .first()
        .and_then(|count| count.parse::<usize>().ok());
    let step = arguments
        .get(1)
        .and_then(|name| STEPS.iter().find(|(step, _)| step == name));
    let (Some(count), Some((_, step))) = (count, step) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    for file in &arguments[2..] {
        let image = std::fs::read(file).map_err(|error| cudyn::Error::read_file(file, error))?;
        for _ in 0..count {
            step(black_box(&image))?;
        }
    }
    Ok(())
}

/// The kinds of the images, as their arguments and file extensions name them.
const KINDS: [&str; 3] = ["cubin", "ptx", "fatbin"];

/// [`NEW_IMAGES`] images of `kind` new to the process, each told apart by an empty kernel of its
/// own (compilers drop comments): the `load` rows' cubin compiled with it, their PTX with it
/// appended, or fatbins of their cubin and such PTX. Only the kind asked for is built: the
/// cubins are a hundred NVRTC compiles.
fn new_images(kind: &str) -> Result<Vec<Vec<u8>>> {
    let arch = Arch::new(9, 0);
    if kind == "cubin" {
        return (0..NEW_IMAGES)
            .map(|round| {
                let source = format!(
                    "{SOURCE}\nextern \"C\" __global__ void bench_load_host_{round}() {{}}\n"
                );
                Ok(Program::new(source).arch(arch).compile()?.code().to_vec())
            })
            .collect();
    }
    let ptx = Program::new(SOURCE)
        .arch(arch)
        .output(Output::Ptx)
        .compile()?;
    let text = ptx.code().strip_suffix(b"\0").unwrap_or(ptx.code());
    let ptx_variant = |round: usize| {
        let mut variant = text.to_vec();
        let entry = format!(".visible .entry bench_load_host_{round}()\n{{\n\tret;\n}}\n\0");
        variant.extend_from_slice(entry.as_bytes());
        variant
    };
    if kind == "ptx" {
        return Ok((0..NEW_IMAGES).map(ptx_variant).collect());
    }
    let cubin = Program::new(SOURCE).arch(arch).compile()?;
    (0..NEW_IMAGES)
        .map(|round| fatbin(cubin.code(), &ptx_variant(round)))
        .collect()
}

/// A fatbin of `cubin` and `ptx` for sm_90, as nvFatbin builds it (the PTX compressed).
fn fatbin(cubin: &[u8], ptx: &[u8]) -> Result<Vec<u8>> {
    let arch = Arch::new(9, 0);
    let mut fatbin = FatbinBuilder::new()?;
    fatbin
        .add_cubin(cubin, arch, "peers.cu")?
        .add_ptx(ptx, arch, "peers.cu")?;
    fatbin.finish()
}

/// The images of the `load` rows: peers.cu as a cubin, as PTX, and as a fatbin of the two.
fn images() -> Result<Vec<(&'static str, Vec<u8>)>> {
    let arch = Arch::new(9, 0);
    let compile = |output| -> Result<Vec<u8>> {
        let compiled = Program::new(SOURCE).arch(arch).output(output).compile()?;
        Ok(compiled.code().to_vec())
    };
    let (cubin, ptx) = (compile(Output::Cubin)?, compile(Output::Ptx)?);
    let fatbin = fatbin(&cubin, &ptx)?;
    Ok(vec![("cubin", cubin), ("ptx", ptx), ("fatbin", fatbin)])
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
