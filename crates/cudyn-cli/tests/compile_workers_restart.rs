//! The compile server dying fails the jobs it still held, clearly, and the next batch starts a
//! new one. Its own test binary: it kills the process's compile server. Needs NVRTC (the CUDA
//! wheels), no GPU.

mod common;
mod worker_programs;

use std::time::Duration;

use cudyn::compile::{set_workers, Program, WorkerSetting};
use cudyn::Error;
use worker_programs::{on_workers, programs, ARCH};

#[test]
fn a_killed_server_fails_its_jobs_and_the_next_batch_starts_another() {
    // A job that never ends keeps the batch waiting until the server is killed.
    std::env::set_var("CUDYN_WORKER_TEST_HANG", "hang.cu");
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
    let (_, server) = on_workers(&programs("before", 3));

    let mut batch = programs("during", 3);
    batch.push(
        Program::new("__global__ void k() {}")
            .name("hang.cu")
            .arch(ARCH)
            .cache(false),
    );
    let running = std::thread::spawn(move || on_workers(&batch));
    std::thread::sleep(Duration::from_millis(500));
    let killed = std::process::Command::new("kill")
        .args(["-9", &server.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (results, same_server) = running.join().unwrap();
    assert_eq!(same_server, server);
    match &results[3] {
        Err(Error::CompileWorker { program, what }) => {
            assert_eq!(program, "hang.cu");
            let ended = format!("the compile server (pid {server}) ended");
            assert!(what.contains(&ended), "{what}");
        }
        other => panic!("{other:?}"),
    }
    for result in &results[..3] {
        assert!(
            matches!(result, Ok(_) | Err(Error::CompileWorker { .. })),
            "{result:?}"
        );
    }

    let (results, new_server) = on_workers(&programs("after", 3));
    assert_ne!(new_server, server, "a new server was started");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}
