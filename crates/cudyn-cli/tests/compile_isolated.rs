//! `compile_batch_isolated`: every program compiles in a compile worker, even alone, so that a
//! compile past the time limit or one that crashes fails by itself and the caller lives on; and
//! without workers nothing compiles in this process. Its own test binary: the server reads the
//! test hooks once, at its start. Needs NVRTC (the CUDA wheels), no GPU.

mod common;

use std::time::{Duration, Instant};

use cudyn::compile::{
    compile_batch_isolated, set_job_time_limit, set_workers, Arch, BatchRun, Program, WorkerSetting,
};
use cudyn::Error;

const ARCH: Arch = Arch::new(9, 0);

fn program(name: &str) -> Program {
    Program::new(format!("extern \"C\" __global__ void k() {{}} // {name}"))
        .name(name)
        .arch(ARCH)
        .cache(false)
}

fn lost(result: &cudyn::Result<cudyn::compile::Compiled>) -> &str {
    match result {
        Err(Error::CompileWorker { what, .. }) => what,
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_isolated_compile_is_stopped_at_the_limit_or_its_crash_reported_and_never_runs_here() {
    std::env::set_var("CUDYN_WORKER_TEST_HANG", "hang.cu");
    std::env::set_var("CUDYN_WORKER_TEST_ABORT", "crash.cu");
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
    let limit = Duration::from_secs(2);
    set_job_time_limit(limit);

    // One program alone, which compile_batch would compile here.
    let started = Instant::now();
    let batch = compile_batch_isolated(&[program("hang.cu")]);
    let took = started.elapsed();
    assert!(
        matches!(batch.run, BatchRun::Workers { programs: 1, .. }),
        "{:?}",
        batch.run
    );
    let what = lost(&batch.results[0]);
    assert!(what.contains("time limit of 2 s"), "{what}");
    assert!(took >= limit && took < limit * 10, "{took:?}");

    let batch = compile_batch_isolated(&[program("crash.cu")]);
    let what = lost(&batch.results[0]);
    assert!(what.contains("SIGABRT"), "{what}");

    // What a worker compiles is what this process compiles.
    let good = program("good.cu");
    let batch = compile_batch_isolated(std::slice::from_ref(&good));
    assert!(
        matches!(batch.run, BatchRun::Workers { .. }),
        "{:?}",
        batch.run
    );
    let here = good.compile().unwrap();
    assert_eq!(batch.results[0].as_ref().unwrap().code(), here.code());

    // Without workers, nothing compiles here.
    set_workers(WorkerSetting::Off);
    let batch = compile_batch_isolated(&[program("good2.cu")]);
    assert!(
        matches!(batch.run, BatchRun::NoWorkers { programs: 1, .. }),
        "{:?}",
        batch.run
    );
    let what = lost(&batch.results[0]);
    assert!(
        what.starts_with("no compile worker could be had: turned off"),
        "{what}"
    );
}
