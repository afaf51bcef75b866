//! A compile server whose executable is replaced while it runs (an upgrade installed meanwhile)
//! still starts its new workers from its own file: they speak its protocol, and batches go on.
//! Its own test binary: the workers read the test hooks from the environment the server got at
//! its start. Needs NVRTC (the CUDA wheels), no GPU.

mod common;
mod worker_programs;

use std::os::unix::fs::PermissionsExt;

use cudyn::compile::{set_workers, Program, WorkerSetting};
use cudyn::Error;
use worker_programs::{assert_same_as_here, on_workers, programs, ARCH};

#[test]
fn workers_started_after_the_executable_was_replaced_are_the_servers_own() {
    std::env::set_var("CUDYN_WORKER_TEST_ABORT", "crash.cu");
    let folder = tempfile::tempdir().unwrap();
    let executable = folder.path().join("cudyn");
    std::fs::copy(common::cudyn_binary(), &executable).unwrap();
    set_workers(WorkerSetting::Executable(executable.clone()));
    let (_, server) = on_workers(&programs("before", 3));

    // Replaced the way installers replace a file: a new file renamed over the path.
    let other = folder.path().join("other");
    std::fs::write(&other, "#!/bin/sh\necho 'not a cudyn'\nexit 1\n").unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&other, &executable).unwrap();

    // A worker dies, and the server starts another in its place.
    let mut batch = programs("during", 3);
    batch.insert(
        0,
        Program::new("__global__ void k() {}")
            .name("crash.cu")
            .arch(ARCH)
            .cache(false),
    );
    let (results, same_server) = on_workers(&batch);
    assert_eq!(same_server, server);
    assert!(
        matches!(&results[0], Err(Error::CompileWorker { program, .. }) if program == "crash.cu"),
        "{:?}",
        results[0]
    );

    // The server is still there, and its workers compile as this process does.
    let after = programs("after", 4);
    let (results, same_server) = on_workers(&after);
    assert_eq!(same_server, server, "the server ended");
    for (program, result) in after.iter().zip(&results) {
        assert_same_as_here(program, result);
    }
}
