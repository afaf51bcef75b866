//! NVRTC's start-up in a new process, the cost every compile worker pays on its first job: the
//! first and second compile of a source of five template instantiations, in new processes, with
//! the CUDA driver (`libcuda.so.1`, which NVRTC 13 opens during a compile where one is installed)
//! left to NVRTC, opened before the first compile, or opened on a thread while it runs. Medians in
//! ms. Needs NVRTC; the driver variants matter where a driver is installed.
//!
//! ```text
//! cargo build --release -p cudyn-bench --bin nvrtc_start
//! target/release/nvrtc_start [STARTS]      # 11 new processes per variant unless given
//! ```

#[path = "../../../cudyn/tests/batch_sources/mod.rs"]
mod batch_sources;

#[path = "../durations.rs"]
mod durations;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use cudyn::compile::{Arch, Program};
use durations::median;

const VARIANT_ENV: &str = "CUDYN_NVRTC_START_VARIANT";
const VARIANTS: [&str; 4] = [
    "nvrtc alone",
    "driver opened first",
    "driver on a thread",
    "no GPU visible",
];

fn main() -> ExitCode {
    let result = match std::env::var(VARIANT_ENV) {
        Ok(variant) => child(&variant),
        Err(_) => parent(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("nvrtc_start: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parent() -> Result<(), String> {
    let starts: usize = std::env::args()
        .nth(1)
        .map_or(Ok(11), |a| a.parse().map_err(|e| format!("{a}: {e}")))?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut times = vec![Vec::new(); VARIANTS.len()];
    for start in 0..starts {
        for (index, variant) in VARIANTS.iter().enumerate() {
            let mut command = Command::new(&me);
            command
                .env(VARIANT_ENV, variant)
                .env(cudyn::cache::SWITCH_ENV, "off");
            if *variant == "no GPU visible" {
                command.env("CUDA_VISIBLE_DEVICES", "");
            }
            let output = command.output().map_err(|e| e.to_string())?;
            if !output.status.success() {
                return Err(format!(
                    "{variant}: {}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            let parts: Vec<f64> = String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .map(|t| t.parse().map_err(|e| format!("{t}: {e}")))
                .collect::<Result<_, String>>()?;
            if start > 0 || starts == 1 {
                times[index].push(parts);
            }
        }
    }
    println!("NVRTC start-up in new processes, medians in ms (open driver / first compile / second compile / whole process to second):");
    for (variant, runs) in VARIANTS.iter().zip(times) {
        let column = |i: usize| {
            median(
                runs.iter()
                    .map(|r| Duration::from_secs_f64(r[i] / 1e3))
                    .collect(),
            )
            .as_secs_f64()
                * 1e3
        };
        println!(
            "  {variant:>22}: {:7.2} {:8.2} {:8.2} {:8.2}",
            column(0),
            column(1),
            column(2),
            column(3)
        );
    }
    Ok(())
}

fn child(variant: &str) -> Result<(), String> {
    let begin = Instant::now();
    let open = || {
        // SAFETY: libcuda's initializers run no code that cares who opens it.
        unsafe { libloading::Library::new("libcuda.so.1") }
            .map(std::mem::forget)
            .ok()
    };
    let mut opened = Duration::ZERO;
    let thread = match variant {
        "driver opened first" => {
            let start = Instant::now();
            open();
            opened = start.elapsed();
            None
        }
        "driver on a thread" => Some(std::thread::spawn(open)),
        _ => None,
    };
    let compile = |k: usize| {
        let source = batch_sources::batch_source(k, "start", batch_sources::links());
        let start = Instant::now();
        Program::new(source)
            .arch(Arch::new(9, 0))
            .compile()
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(start.elapsed())
    };
    let first = compile(0)?;
    let second = compile(1)?;
    if let Some(thread) = thread {
        let _ = thread.join();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{:.3} {:.3} {:.3} {:.3}",
        ms(opened),
        ms(first),
        ms(second),
        ms(begin.elapsed())
    );
    Ok(())
}
