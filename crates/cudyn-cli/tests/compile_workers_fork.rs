//! How workers start: afresh by default (the server's children are `cudyn __compile-worker`
//! processes), forked from the warm server with `CUDYN_WORKER_START=fork` (its children are
//! copies of the server); either way their results are what this process's own compiles make.
//! Its own test binary: the variable is read when a server starts, and this test starts two.
//! Needs NVRTC (the CUDA wheels), no GPU.

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
fn workers_start_afresh_by_default_or_forked_on_request() {
    for (start, command) in [
        (None, "__compile-worker"),
        (Some("fork"), "__compile-server"),
    ] {
        match start {
            Some(start) => std::env::set_var("CUDYN_WORKER_START", start),
            None => std::env::remove_var("CUDYN_WORKER_START"),
        }
        // Setting the executable again starts a new server for the next batch.
        set_workers(WorkerSetting::Executable(common::cudyn_binary()));
        let batch = programs(start.unwrap_or("exec"), 4);
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
            workers.iter().all(|line| line.contains(command)),
            "{start:?}: {workers:?}"
        );
    }
}
