//! What the tests of compile worker processes share: programs, and the check that a result is
//! what this process's own compile makes.

use cudyn::compile::{compile_batch, Arch, Batch, BatchRun, Compiled, Program};
use cudyn::Result;

/// No GPU is needed: every program names its architecture.
pub const ARCH: Arch = Arch::new(9, 0);

/// `count` different programs (a template with two instantiations, a constant of their own),
/// named `{tag}_{k}.cu`, that never come from the compile cache.
pub fn programs(tag: &str, count: usize) -> Vec<Program> {
    (0..count)
        .map(|k| {
            Program::new(format!(
                "template <typename T> __global__ void scale(T *p) {{ *p = *p * T({k}) + T(1); }}\n"
            ))
            .name(format!("{tag}_{k}.cu"))
            .arch(ARCH)
            .name_expression("scale<float>")
            .name_expression("scale<double>")
            .cache(false)
        })
        .collect()
}

/// Compiles `programs` as a batch, and fails unless it ran in worker processes.
#[allow(dead_code)]
pub fn on_workers(programs: &[Program]) -> (Vec<Result<Compiled>>, u32) {
    let Batch { results, run, .. } = compile_batch(programs);
    match run {
        BatchRun::Workers { server_pid, .. } => (results, server_pid),
        other => panic!("the batch did not run in worker processes: {other:?}"),
    }
}

/// Fails unless `result` is exactly what compiling `program` in this process gives.
#[allow(dead_code)]
pub fn assert_same_as_here(program: &Program, result: &Result<Compiled>) {
    let here = program.compile();
    match (result, &here) {
        (Ok(there), Ok(here)) => {
            assert_eq!(
                there.code(),
                here.code(),
                "{}: code differs",
                program.source()
            );
            assert_eq!(there, here);
        }
        (Err(there), Err(here)) => assert_eq!(there.to_string(), here.to_string()),
        _ => panic!("worker: {result:?}\nthis process: {here:?}"),
    }
}
