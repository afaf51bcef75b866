//! What the examples share: running one, comparing its result with the CPU's, and reporting.
//!
//! Every example checks one or more results and prints one line, `<example>: ok: <what was checked>`, and exits 0 when the GPU's
//! result equals the CPU's; `<example>: MISMATCH: ...` and exit status 1 when it does not; and,
//! when cudyn fails (no driver, no GPU, a compile error), `error: ...` with its causes on stderr
//! and exit status 1.

use std::error::Error;
use std::fmt::Debug;
use std::process::ExitCode;

/// The outcome of an example: what was computed, and the first difference from the CPU if any.
#[derive(Debug)]
pub struct Verdict {
    what: String,
    difference: Option<String>,
}

/// Compares the GPU's values with the CPU's, element by element.
pub fn compare<T: PartialEq + Debug>(what: impl Into<String>, gpu: &[T], cpu: &[T]) -> Verdict {
    let difference = if gpu.len() != cpu.len() {
        Some(format!(
            "{} values from the GPU, {} from the CPU",
            gpu.len(),
            cpu.len()
        ))
    } else {
        gpu.iter()
            .zip(cpu)
            .position(|(g, c)| g != c)
            .map(|i| format!("at {i}: the GPU gives {:?}, the CPU {:?}", gpu[i], cpu[i]))
    };
    Verdict {
        what: what.into(),
        difference,
    }
}

/// Several verdicts as one: the first difference wins.
fn all(verdicts: Vec<Verdict>) -> Verdict {
    let what = verdicts
        .iter()
        .map(|verdict| verdict.what.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let difference = verdicts
        .into_iter()
        .find_map(|verdict| Some(format!("{}: {}", verdict.what, verdict.difference?)));
    Verdict { what, difference }
}

/// Runs an example's body and reports as the module documentation says.
pub fn run(example: &str, body: impl FnOnce() -> Result<Vec<Verdict>, Box<dyn Error>>) -> ExitCode {
    match body().map(all) {
        Ok(Verdict {
            what,
            difference: None,
        }) => {
            println!("{example}: ok: {what}, equal to the CPU's");
            ExitCode::SUCCESS
        }
        Ok(Verdict {
            what,
            difference: Some(difference),
        }) => {
            println!("{example}: MISMATCH: {what}: {difference}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error}");
            let mut cause = error.source();
            while let Some(error) = cause {
                eprintln!("  caused by: {error}");
                cause = error.source();
            }
            ExitCode::FAILURE
        }
    }
}
