//! Rows about a process's start run in new processes: this program again, with [`MODE_ENV`]
//! naming the measurement. A measuring process prints one result line of numbers.

use std::ffi::OsStr;

/// Set only in measuring processes: what to measure (`first-launch:cudyn:warm`, ...).
pub const MODE_ENV: &str = "CUDYN_BENCH_CHILD";
/// The source file, in measuring processes.
pub const SOURCE_ENV: &str = "CUDYN_BENCH_SOURCE";
/// The reference cubin of the source, in measuring processes of the `start` rows.
pub const CUBIN_ENV: &str = "CUDYN_BENCH_CUBIN";
/// The architecture (`sm_90`) of the compile measurements, which need no GPU.
pub const ARCH_ENV: &str = "CUDYN_BENCH_ARCH";
/// Marks the result line among anything else a measuring process prints.
const RESULT: &str = "cudyn-bench-result:";

/// Makes the measurement `mode` names and prints its result line.
pub fn run(mode: &str) -> Result<(), String> {
    let parts: Vec<&str> = mode.split(':').collect();
    let figures = match parts.as_slice() {
        ["first-launch", framework, cache] => {
            crate::start::first_launch_child(framework.parse()?, *cache == "warm")?
        }
        ["repeat", framework] => crate::start::repeat_child(framework.parse()?)?,
        ["compile", how, count] => crate::compile_rows::compile_child(
            how,
            count
                .parse()
                .map_err(|_| format!("{MODE_ENV}: not a count: {count}"))?,
        )?,
        ["sharing"] => crate::sharing::child()?,
        _ => return Err(format!("unknown {MODE_ENV}={mode}")),
    };
    let figures: Vec<String> = figures.iter().map(f64::to_string).collect();
    println!("{RESULT} {}", figures.join(" "));
    Ok(())
}

/// Runs this program in `mode` with `envs` set and `CUDYN_CACHE` unset; its result line.
pub fn spawn(mode: &str, envs: &[(&str, &OsStr)]) -> Result<Vec<f64>, String> {
    crate::spawn::spawn(MODE_ENV, RESULT, mode, envs)
}

/// The value of a variable the parent sets.
pub fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}
