//! The library's isolated links (`LinkOptions::isolated`): the same result as a link in the
//! process, nvJitLink's own failures as they are, and a worker that crashes, hangs or grows
//! stopped with an error naming the inputs, the calling process living on. Its own test binary:
//! the misbehaving inputs are named in the environment, which every link worker reads when it
//! starts. Needs NVRTC and nvJitLink (the CUDA wheels), no GPU.

mod common;

use std::sync::Once;
use std::time::{Duration, Instant};

use cudyn::compile::{set_workers, Arch, InputKind, LinkOptions, Linked, Output, WorkerSetting};
use cudyn::error::LinkStop;
use cudyn::Error;

const ARCH: Arch = Arch::new(9, 0);
const KERNEL: &str = "__device__ float twice(float x);\n\
    extern \"C\" __global__ void k(float *p) { *p = twice(*p); }";
const HELPER: &str = "__device__ float twice(float x) { return 2 * x; }";

/// Link workers from this package's `cudyn`, misbehaving on the inputs named here.
fn workers() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("CUDYN_WORKER_TEST_ABORT", "crash.ltoir");
        std::env::set_var("CUDYN_WORKER_TEST_HANG", "hang.ltoir");
        std::env::set_var("CUDYN_WORKER_TEST_GROW", "grow.ltoir");
        set_workers(WorkerSetting::Executable(common::cudyn_binary()));
    });
}

fn link(options: LinkOptions, kind: InputKind, inputs: &[(&[u8], &str)]) -> cudyn::Result<Linked> {
    let mut linker = options.arch(ARCH).cache(false).linker()?;
    for (bytes, name) in inputs {
        linker.add(kind, bytes, name)?;
    }
    linker.finish()
}

#[test]
fn an_isolated_link_makes_what_a_link_in_this_process_makes() {
    workers();
    for (kind, output, lto) in [
        (InputKind::LtoIr, Output::LtoIr, true),
        (InputKind::Cubin, Output::Cubin, false),
    ] {
        let (kernel, helper) = (
            common::relocatable_piece(KERNEL, ARCH, output),
            common::relocatable_piece(HELPER, ARCH, output),
        );
        let inputs = [(&kernel[..], "kernel"), (&helper[..], "helper")];
        let here = link(LinkOptions::new().lto(lto), kind, &inputs).unwrap();
        for _ in 0..3 {
            let isolated = link(LinkOptions::new().lto(lto).isolated(true), kind, &inputs)
                .unwrap_or_else(|error| panic!("{kind:?}: {error}"));
            assert_eq!(isolated, here, "{kind:?}");
        }
    }
}

#[test]
fn nvjitlink_s_own_failure_comes_back_as_it_is() {
    workers();
    let kernel = common::relocatable_piece(KERNEL, ARCH, Output::Cubin);
    let inputs = [(&kernel[..], "kernel_piece.cubin")];
    let here = link(LinkOptions::new(), InputKind::Cubin, &inputs).unwrap_err();
    let isolated = link(LinkOptions::new().isolated(true), InputKind::Cubin, &inputs).unwrap_err();
    assert!(matches!(isolated, Error::Cuda(_)), "{isolated:?}");
    assert_eq!(isolated.to_string(), here.to_string());
    assert_eq!(isolated.log(), here.log());
    assert!(isolated.log().unwrap().contains("Undefined reference"));
}

/// A link of the helper and a piece named `name`, which the workers misbehave on.
fn misbehaving(name: &str, options: LinkOptions) -> (Error, Duration) {
    workers();
    let helper = common::relocatable_piece(HELPER, ARCH, Output::LtoIr);
    let kernel = common::relocatable_piece(KERNEL, ARCH, Output::LtoIr);
    let started = Instant::now();
    let error = link(
        options.lto(true),
        InputKind::LtoIr,
        &[(&helper, "helper.ltoir"), (&kernel, name)],
    )
    .unwrap_err();
    (error, started.elapsed())
}

#[test]
fn a_crash_in_the_worker_is_an_error_naming_the_inputs_and_the_signal() {
    let (error, _) = misbehaving("crash.ltoir", LinkOptions::new().isolated(true));
    let Error::LinkStopped { inputs, stop } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(inputs, &["helper.ltoir", "crash.ltoir"]);
    assert_eq!(stop, &LinkStop::Signal(libc::SIGABRT));
    assert!(
        error.to_string().starts_with(
            "nvJitLink crashed (SIGABRT, it aborted) while linking helper.ltoir, crash.ltoir:"
        ),
        "{error}"
    );
    // The caller lives on, and the next link gets a new worker.
    an_isolated_link_makes_what_a_link_in_this_process_makes();
}

#[test]
fn a_link_past_its_time_limit_is_stopped_at_the_limit() {
    let limit = Duration::from_millis(1500);
    let (error, took) = misbehaving("hang.ltoir", LinkOptions::new().time_limit(limit));
    assert!(
        matches!(&error, Error::LinkStopped { stop: LinkStop::TimeLimit(l), .. } if *l == limit),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with(
            "the link of helper.ltoir, hang.ltoir did not finish within its time limit of 1.5 s"
        ),
        "{error}"
    );
    assert!(took >= limit && took < limit * 4, "{took:?}");
}

#[test]
fn a_link_that_grows_past_its_memory_limit_is_stopped() {
    let limit = 300 << 20;
    let (error, took) = misbehaving("grow.ltoir", LinkOptions::new().memory_limit(limit));
    assert!(
        matches!(&error, Error::LinkStopped { stop: LinkStop::MemoryLimit(l), .. } if *l == limit),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with(
            "the link of helper.ltoir, grow.ltoir grew past its memory limit of 300 MiB"
        ),
        "{error}"
    );
    // 16 MiB every 5 ms reaches the limit in well under a second; the default time limit is
    // ten minutes.
    assert!(took < Duration::from_secs(30), "{took:?}");
}
