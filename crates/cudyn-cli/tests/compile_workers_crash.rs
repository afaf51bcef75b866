//! A compile worker that crashes or hangs fails its own job with a clear error, is replaced, and
//! the batch goes on. Its own test binary: the server reads the test hooks once, at its start.
//! Needs NVRTC (the CUDA wheels), no GPU.

mod common;
mod worker_programs;

use std::time::{Duration, Instant};

use cudyn::compile::{set_job_time_limit, set_workers, Program, WorkerSetting};
use cudyn::Error;
use worker_programs::{assert_same_as_here, on_workers, programs, ARCH};

fn misbehaving(name: &str) -> Program {
    Program::new("__global__ void k() {}")
        .name(name)
        .arch(ARCH)
        .cache(false)
}

#[test]
fn a_crashed_or_hung_worker_fails_its_job_and_the_batch_goes_on() {
    // Read by the compile server when it starts, at this process's first batch.
    std::env::set_var("CUDYN_WORKER_TEST_ABORT", "crash.cu");
    std::env::set_var("CUDYN_WORKER_TEST_HANG", "hang.cu");
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
    set_job_time_limit(Duration::from_secs(3));
    let mut batch = programs("around", 4);
    batch.insert(1, misbehaving("crash.cu"));
    batch.insert(3, misbehaving("hang.cu"));

    let start = Instant::now();
    let (results, server) = on_workers(&batch);
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    match &results[1] {
        Err(error @ Error::CompileWorker { program, what }) => {
            assert_eq!(program, "crash.cu");
            assert!(what.contains("SIGABRT"), "{what}");
            assert!(
                error.to_string().starts_with("`crash.cu` was not compiled"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    match &results[3] {
        Err(Error::CompileWorker { program, what }) => {
            assert_eq!(program, "hang.cu");
            assert!(what.contains("time limit of 3 s"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    for index in [0, 2, 4, 5] {
        assert_same_as_here(&batch[index], &results[index]);
    }

    // The dead workers were replaced: the same server compiles the next batch.
    let after = programs("after", 4);
    let (results, same_server) = on_workers(&after);
    assert_eq!(same_server, server);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}
