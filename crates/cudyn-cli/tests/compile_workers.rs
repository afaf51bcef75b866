//! `cudyn::compile_all` in worker processes of the `cudyn` executable: results identical to this
//! process's own compiles, several batches at once, and the fallback to this process's threads.
//! Needs NVRTC (the CUDA wheels), no GPU.

mod common;
mod worker_programs;

use cudyn::compile::{compile_batch, set_workers, BatchRun, Output, Program, WorkerSetting};
use cudyn::Error;
use worker_programs::{assert_same_as_here, on_workers, programs, ARCH};

fn use_built_cudyn() {
    set_workers(WorkerSetting::Executable(common::cudyn_binary()));
}

#[test]
fn a_batch_through_workers_equals_this_processs_compiles() {
    use_built_cudyn();
    let mut batch = programs("same", 2);
    batch.push(
        Program::new(
            "#include \"half.h\"\nextern \"C\" __global__ void k(float *p) { *p = HALF * N; }",
        )
        .name("options.cu")
        .arch(ARCH)
        .header("half.h", "#define HALF 0.5f")
        .define_value("N", "3")
        .fast_math(true)
        .line_info(true)
        .cache(false),
    );
    batch.push(
        Program::new("__global__ void k(float *p) { *p = 1; }")
            .name("ptx.cu")
            .arch(ARCH)
            .output(Output::Ptx)
            .allow_newer_ptx(true)
            .cache(false),
    );
    batch.push(
        Program::new("extern \"C\" __global__ void broken(float *p) { *p = undefined_name; }")
            .name("broken.cu")
            .arch(ARCH)
            .cache(false),
    );
    batch.push(
        Program::new("#include \"nowhere.h\"\n__global__ void k() {}")
            .name("missing_header.cu")
            .arch(ARCH)
            .cache(false),
    );
    let (results, _) = on_workers(&batch);
    assert_eq!(results.len(), batch.len());
    for (program, result) in batch.iter().zip(&results) {
        assert_same_as_here(program, result);
    }
    assert!(results[..4].iter().all(Result::is_ok), "{results:?}");
    assert!(
        matches!(&results[4], Err(Error::Cuda(call)) if call.log.as_deref().unwrap_or("").contains("undefined_name")),
        "{:?}",
        results[4]
    );
    assert!(
        matches!(&results[5], Err(Error::HeaderNotFound { header, .. }) if header == "nowhere.h"),
        "{:?}",
        results[5]
    );
}

#[test]
fn batches_from_two_threads_share_the_server() {
    use_built_cudyn();
    let run = |tag: &'static str| {
        std::thread::spawn(move || {
            let batch = programs(tag, 4);
            let (results, pid) = on_workers(&batch);
            for (k, result) in results.iter().enumerate() {
                assert_eq!(result.as_ref().unwrap().name(), format!("{tag}_{k}.cu"));
            }
            (batch, results, pid)
        })
    };
    let (first, second) = (run("first"), run("second"));
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    assert_eq!(first.2, second.2, "one compile server serves both batches");
    assert_same_as_here(&first.0[3], &first.1[3]);
    assert_same_as_here(&second.0[1], &second.1[1]);
}

#[test]
fn small_batches_and_cached_programs_stay_in_this_process() {
    use_built_cudyn();
    // The only test here that uses the compile cache, so the folder can still be chosen.
    let cache = tempfile::tempdir().unwrap();
    cudyn::cache::set_dir(cache.path()).unwrap();
    let cached: Vec<Program> = programs("cached", 3)
        .into_iter()
        .map(|p| p.cache(true))
        .collect();
    let (first, _) = on_workers(&cached);
    let again = compile_batch(&cached);
    assert_eq!(
        again.run,
        BatchRun::NothingToCompile,
        "the workers' results were stored"
    );
    for (first, again) in first.iter().zip(&again.results) {
        assert_eq!(first.as_ref().unwrap(), again.as_ref().unwrap());
    }
    let stats = cudyn::cache::Cache::global().unwrap().stats().unwrap();
    assert_eq!(
        (stats.misses, stats.writes, stats.memory_hits),
        (3, 3, 3),
        "{stats:?}"
    );

    let small = programs("small", 2);
    let batch = compile_batch(&small);
    assert!(
        matches!(&batch.run, BatchRun::InProcess { programs: 2, why } if why.contains("fewer than")),
        "{:?}",
        batch.run
    );
    assert!(batch.results.iter().all(Result::is_ok));
}
