//! Compiled and linked code run on a GPU, loaded through the runtime's library API
//! (`cudaLibraryLoadData` + `cudaLibraryGetKernel` + `cudaLaunchKernel`, see raw_runtime/).
//!
//! Run on a machine with a GPU: `cargo test -p cudyn --test compile_gpu -- --include-ignored`. Each test
//! fails, never skips, when the driver, the GPU, the runtime or the compilers are missing.

mod raw_runtime;

use std::ffi::c_void;

use cudyn::compile::{self, Arch, Output, Program};
use cudyn::sys::nvjitlink;
use raw_runtime::{launch, synchronize, DeviceBuffer, RawLibrary};

const SAXPY: &str = include_str!("kernels/saxpy.cu");
const SAXPY_TEMPLATE: &str = include_str!("kernels/saxpy_template.cu");
const ITERATE_KERNEL: &str = include_str!("kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("kernels/iterate_step.cu");

/// The sizes of the NVRTC documentation's SAXPY example: 32 blocks of 128 threads.
const NUM_THREADS: u32 = 128;
const NUM_BLOCKS: u32 = 32;

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| i as f32).collect();
    let y = (0..n).map(|i| (i * 2) as f32).collect();
    (x, y)
}

/// Runs a `saxpy(a, x, y, out, n)` kernel of `image` and returns `out`.
fn run_saxpy(image: &[u8], kernel: &str, a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    let library = RawLibrary::load(image).expect("cudaLibraryLoadData");
    let kernel = library.kernel(kernel).expect("cudaLibraryGetKernel");
    let mut a = a;
    let mut n = x.len();
    let mut dx = DeviceBuffer::from_slice(x).unwrap();
    let mut dy = DeviceBuffer::from_slice(y).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![0.0f32; x.len()]).unwrap();
    let mut args: [*mut c_void; 5] = [
        (&mut a as *mut f32).cast(),
        (dx.pointer() as *mut *mut c_void).cast(),
        (dy.pointer() as *mut *mut c_void).cast(),
        (out.pointer() as *mut *mut c_void).cast(),
        (&mut n as *mut usize).cast(),
    ];
    launch(kernel, NUM_BLOCKS, NUM_THREADS, &mut args).expect("cudaLaunchKernel");
    synchronize().expect("the kernel ran");
    out.to_vec().unwrap()
}

/// The CPU's result. The factors used are exact in binary and the inputs small integers, so the
/// products are exact and the GPU's fused multiply-add gives bit for bit the same.
fn cpu_saxpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}

#[test]
#[ignore = "gpu: loads and launches NVRTC output through the runtime"]
fn nvrtc_saxpy_runs_through_the_runtime_and_matches_the_cpu() {
    let n = (NUM_THREADS * NUM_BLOCKS) as usize;
    let (x, y) = inputs(n);
    // The default target: SASS for this GPU.
    let compiled = Program::new(SAXPY).name("saxpy.cu").compile().unwrap();
    assert_eq!(compiled.output(), Output::Cubin);
    let out = run_saxpy(compiled.code(), "saxpy", 2.5, &x, &y);
    assert_eq!(out, cpu_saxpy(2.5, &x, &y));
}

#[test]
#[ignore = "gpu: loads PTX through the runtime when the driver can take it"]
fn ptx_loads_when_the_driver_is_new_enough_and_is_refused_otherwise() {
    let n = (NUM_THREADS * NUM_BLOCKS) as usize;
    let (x, y) = inputs(n);
    let nvrtc = cudyn::sys::nvrtc().unwrap().version;
    let driver = cudyn::sys::driver().unwrap().version;
    let requested = Program::new(SAXPY).output(Output::Ptx).compile();
    if nvrtc > driver {
        let error = requested.unwrap_err();
        assert!(
            matches!(error, cudyn::Error::PtxNewerThanDriver { .. }),
            "{error:?}"
        );
        // The documented way out: PTX finished to SASS by nvJitLink.
        let ptx = Program::new(SAXPY)
            .output(Output::Ptx)
            .allow_newer_ptx(true)
            .compile()
            .unwrap();
        // It needs an nvJitLink at least as new as NVRTC; an older one says so in its log.
        let nvjitlink = cudyn::sys::nvjitlink().unwrap().version;
        let finished = compile::ptx_to_cubin(ptx.code(), None);
        if nvjitlink >= nvrtc {
            assert_eq!(
                run_saxpy(finished.unwrap().code(), "saxpy", 2.0, &x, &y),
                cpu_saxpy(2.0, &x, &y)
            );
        } else {
            let error = finished.unwrap_err();
            let code = error.cuda_code();
            assert_eq!(
                code,
                Some(nvjitlink::NVJITLINK_ERROR_PTX_COMPILE as i32),
                "{error}"
            );
            assert!(
                error.log().unwrap_or("").contains("Unsupported .version"),
                "{error}"
            );
        }
    } else {
        let ptx = requested.unwrap();
        assert_eq!(
            run_saxpy(ptx.code(), "saxpy", 2.0, &x, &y),
            cpu_saxpy(2.0, &x, &y)
        );
    }
}

#[test]
#[ignore = "gpu: launches a template kernel found by its lowered name"]
fn a_template_kernel_runs_under_its_lowered_name() {
    let n = (NUM_THREADS * NUM_BLOCKS) as usize;
    let (x, y) = inputs(n);
    let compiled = Program::new(SAXPY_TEMPLATE)
        .name_expression("saxpy<float>")
        .compile()
        .unwrap();
    let lowered = compiled.lowered_name("saxpy<float>").unwrap();
    assert_eq!(
        run_saxpy(compiled.code(), lowered, -1.5, &x, &y),
        cpu_saxpy(-1.5, &x, &y)
    );
}

/// The result of linking NVRTC's LTO-IR, or `None` after checking the documented refusal when
/// NVRTC is newer than nvJitLink (whose LTO-IR an older nvJitLink cannot read; doctor warns of
/// that pairing).
fn linked_unless_nvrtc_is_newer<T: std::fmt::Debug>(linked: cudyn::Result<T>) -> Option<T> {
    let nvrtc = cudyn::sys::nvrtc().unwrap().version;
    if nvrtc <= cudyn::sys::nvjitlink().unwrap().version {
        return Some(linked.unwrap());
    }
    let error = linked.unwrap_err();
    let code = error.cuda_code();
    assert_eq!(
        code,
        Some(nvjitlink::NVJITLINK_ERROR_OUTDATED_LIBRARY as i32),
        "{error}"
    );
    None
}

/// The two pieces of the `iterate` program as relocatable LTO-IR for this GPU.
fn iterate_pieces() -> (compile::Compiled, compile::Compiled) {
    let piece = |source: &str| {
        Program::new(source)
            .output(Output::LtoIr)
            .relocatable(true)
            .compile()
            .unwrap()
    };
    (piece(ITERATE_KERNEL), piece(ITERATE_STEP))
}

/// What `iterate` computes, on the CPU.
fn cpu_iterate(data: &[f32], steps: i32) -> Vec<f32> {
    data.iter()
        .map(|&v| (0..steps).fold(v, |v, _| v * 0.5 + 1.0))
        .collect()
}

#[test]
#[ignore = "gpu: runs the two-piece program linked with link-time optimization"]
fn the_two_piece_lto_program_runs_and_is_correct() {
    let arch = Arch::current().unwrap();
    let (kernel, step) = iterate_pieces();
    let linked = compile::link_lto(&[kernel.code(), step.code()], None);
    let Some(linked) = linked_unless_nvrtc_is_newer(linked) else {
        return;
    };
    assert_eq!(linked.arch(), arch);

    let n = (NUM_THREADS * NUM_BLOCKS) as usize;
    let data: Vec<f32> = (0..n).map(|i| i as f32 - 100.0).collect();
    let library = RawLibrary::load(linked.code()).unwrap();
    let iterate = library.kernel("iterate").unwrap();
    let mut buffer = DeviceBuffer::from_slice(&data).unwrap();
    let mut steps: i32 = 5;
    let mut len = n;
    let mut args: [*mut c_void; 3] = [
        (buffer.pointer() as *mut *mut c_void).cast(),
        (&mut steps as *mut i32).cast(),
        (&mut len as *mut usize).cast(),
    ];
    launch(iterate, NUM_BLOCKS, NUM_THREADS, &mut args).unwrap();
    synchronize().unwrap();
    assert_eq!(buffer.to_vec().unwrap(), cpu_iterate(&data, 5));
}

#[test]
#[ignore = "gpu: one call from source to a loaded library, kernels found by name expression"]
fn program_load_finds_a_template_kernel_by_its_name_expression() {
    let n = 1usize << 20;
    let (x, y) = inputs(n);
    let library = Program::new(SAXPY_TEMPLATE)
        .name_expression("saxpy<float>")
        .load()
        .unwrap();
    let saxpy = library.kernel("saxpy<float>").unwrap();
    let dx = cudyn::DeviceBuffer::from_slice(&x).unwrap();
    let dy = cudyn::DeviceBuffer::from_slice(&y).unwrap();
    let mut out = cudyn::DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    // SAFETY: saxpy reads x[i], y[i] and writes out[i] for i < n, and the three buffers hold n
    // floats; the synchronization below waits for it.
    unsafe {
        saxpy.launch(
            &cudyn::LaunchConfig::for_elements(n, 256),
            (3.0f32, &dx, &dy, &mut out, n as u64),
        )
    }
    .unwrap();
    cudyn::synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), cpu_saxpy(3.0, &x, &y));
}

#[test]
#[ignore = "gpu: one call from LTO-IR pieces to a loaded library"]
fn lto_ir_pieces_load_in_one_call() {
    let (kernel, step) = iterate_pieces();
    let library = cudyn::Library::from_lto_ir(&[kernel.code(), step.code()]);
    let Some(library) = linked_unless_nvrtc_is_newer(library) else {
        return;
    };
    let iterate = library.kernel("iterate").unwrap();
    let n = 1usize << 20;
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 100.0).collect();
    let mut buffer = cudyn::DeviceBuffer::from_slice(&data).unwrap();
    // SAFETY: iterate updates data[i] in place for i < n, and the buffer holds n floats; the
    // synchronization below waits for it.
    unsafe {
        iterate.launch(
            &cudyn::LaunchConfig::for_elements(n, 256),
            (&mut buffer, 7i32, n as u64),
        )
    }
    .unwrap();
    cudyn::synchronize().unwrap();
    assert_eq!(buffer.to_vec().unwrap(), cpu_iterate(&data, 7));
}

#[test]
#[ignore = "gpu: the default target follows set_device"]
fn with_no_arch_each_thread_compiles_and_links_for_its_current_device() {
    // On a machine whose GPUs differ (say sm_80 and sm_90), a default taken from GPU 0 builds
    // device 1's code for the wrong architecture; each device is checked on a thread of its own,
    // so that no earlier set_device leaks into the next check.
    let devices = cudyn::Device::all().unwrap();
    assert!(!devices.is_empty(), "the driver sees no GPU");
    for device in devices {
        std::thread::spawn(move || {
            let chosen = cudyn::set_device(device.ordinal()).unwrap();
            let (major, minor) = chosen.compute_capability().unwrap();
            let expected = Arch::new(major, minor);
            assert_eq!(
                Arch::current().unwrap(),
                expected,
                "device {}",
                device.ordinal()
            );

            let compiled = Program::new(SAXPY).compile().unwrap();
            assert_eq!(compiled.arch(), expected, "device {}", device.ordinal());
            // A batch compiles on a pool whose threads never called set_device.
            let batch = [Program::new(SAXPY), Program::new(SAXPY_TEMPLATE)];
            for compiled in compile::compile_all(&batch)
                .into_iter()
                .chain(compile::compile_all_on(&batch, 2))
            {
                assert_eq!(
                    compiled.unwrap().arch(),
                    expected,
                    "device {}",
                    device.ordinal()
                );
            }
            let library = Program::new(SAXPY).load().unwrap();
            library.kernel("saxpy").unwrap();

            let (kernel, step) = iterate_pieces();
            let linked = compile::link_lto(&[kernel.code(), step.code()], None);
            if let Some(linked) = linked_unless_nvrtc_is_newer(linked) {
                assert_eq!(linked.arch(), expected, "device {}", device.ordinal());
            }
        })
        .join()
        .unwrap();
    }
}
