//! Compile workers are fresh `cudyn __compile-worker` processes, children of the compile server,
//! and their results are what this process's own compiles make. Needs NVRTC (the CUDA wheels),
//! no GPU.

mod common;
mod worker_programs;

use cudyn::compile::{set_workers, WorkerSetting};
use worker_programs::{assert_same_as_here, on_workers, programs};

/// The command lines of the live children of `parent`.
fn children_of(parent: u32) -> Vec<String> {
    let mut found = Vec::new();
    for process in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(process.path().join("stat")) else {
            continue;
        };
        // The parent's pid is the second field after the command's closing parenthesis.
        let after_name = stat.rsplit(')').next().unwrap_or("");
        let ppid = after_name.split_whitespace().nth(1);
        if ppid == Some(parent.to_string().as_str()) {
            let cmdline = std::fs::read(process.path().join("cmdline")).unwrap_or_default();
            found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    found
}

#[test]
fn workers_are_fresh_cudyn_processes_of_the_server() {
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
    let batch = programs("fresh", 4);
    let (results, server) = on_workers(&batch);
    for (program, result) in batch.iter().zip(&results) {
        assert_same_as_here(program, result);
    }
    let workers = children_of(server);
    assert!(
        !workers.is_empty(),
        "the server (pid {server}) has no workers"
    );
    assert!(
        workers.iter().all(|line| line.contains("__compile-worker")),
        "{workers:?}"
    );
}
