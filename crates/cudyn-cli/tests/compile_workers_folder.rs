//! Relative paths of a batch resolve from the calling process's working folder at the time of
//! the batch, as in the process itself, even when it changed after the compile server started.
//! Its own test binary: it changes the process's working folder. Needs NVRTC (the CUDA wheels),
//! no GPU.

mod common;
mod worker_programs;

use cudyn::compile::{set_workers, Program, WorkerSetting};
use worker_programs::{assert_same_as_here, on_workers, programs, ARCH};

fn use_built_cudyn() {
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
}

#[test]
fn relative_paths_resolve_from_the_callers_working_folder_at_each_batch() {
    use_built_cudyn();
    // The server is running, started wherever this process was then.
    on_workers(&programs("started", 3));
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join("inc")).unwrap();
    std::fs::write(project.path().join("inc/value.h"), "#define VALUE 7\n").unwrap();
    std::env::set_current_dir(project.path()).unwrap();
    let batch: Vec<Program> = (0..3)
        .map(|k| {
            Program::new(format!(
                "#include \"value.h\"\nextern \"C\" __global__ void k(int *p) {{ *p = VALUE + {k}; }}"
            ))
            .name(format!("relative_{k}.cu"))
            .arch(ARCH)
            .include("inc")
            // The line table names the folder compiled in, so the code shows it too.
            .line_info(true)
            .cache(false)
        })
        .collect();
    let (results, _) = on_workers(&batch);
    for (program, result) in batch.iter().zip(&results) {
        assert!(result.is_ok(), "{result:?}");
        assert_same_as_here(program, result);
    }
}
