//! cudyn and cudarc together (feature `cudarc`, on for every test build through cudyn's
//! dev-dependency on itself): cudarc's slices, views and streams in cudyn's checked launch,
//! cudyn's buffers and streams in cudarc's copies and launches, each result compared with the
//! same computation on the CPU; and cudarc contexts that are not primary, refused.
//! Run with `cargo test -p cudyn --test gpu_cudarc -- --include-ignored` on a machine with a GPU.
#![cfg(feature = "cudarc")]

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, PushKernelArg};
use cudarc::nvrtc::Ptx;
use cudyn::cudarc::LaunchStream;
use cudyn::{DeviceBuffer, Error, KernelArg, LaunchConfig, Output, Program, Stream};

/// `out[i] = a * x[i] + y[i]` in wrapping 32-bit integers, so that the CPU reference is exact.
/// With `spin` set, each thread first idles for about that many clock cycles, so that work
/// queued after the kernel without waiting for it would run before the kernel's writes land.
const AXPY: &str = r#"
extern "C" __global__ void axpy(unsigned int a, const unsigned int *x, const unsigned int *y,
                                unsigned int *out, size_t n, long long spin) {
    long long start = clock64();
    while (clock64() - start < spin) {}
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"#;

const N: usize = 100_003;
const A: u32 = 2_654_435_761;
/// About 50 ms of idling at the H200's ~2 GHz.
const SLOW: i64 = 100_000_000;

fn expected(x: &[u32], y: &[u32]) -> Vec<u32> {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| A.wrapping_mul(x).wrapping_add(y))
        .collect()
}

fn random_words(len: usize, seed: u64) -> Vec<u32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| rng.u32(..)).collect()
}

/// `len` random words from `seed`, and their copy in a cudarc slice on `stream`.
fn upload(stream: &Arc<CudaStream>, len: usize, seed: u64) -> (Vec<u32>, CudaSlice<u32>) {
    let host = random_words(len, seed);
    let device = stream.clone_htod(&host).unwrap();
    (host, device)
}

fn axpy_kernel() -> cudyn::Kernel {
    Program::new(AXPY)
        .name("axpy.cu")
        .load()
        .expect("axpy compiles for device 0 and loads")
        .kernel("axpy")
        .unwrap()
}

/// Launches axpy over the first N elements with a checked launch: `x` and `y` as its inputs,
/// `out` as its output.
///
/// # Safety
/// `x`, `y` and `out` are device memory of at least N words, alive and not touched by other
/// work until the kernel completes, `out` lent mutably.
unsafe fn launch_axpy(
    axpy: &cudyn::Kernel,
    config: &LaunchConfig<'_>,
    x: impl KernelArg,
    y: impl KernelArg,
    out: impl KernelArg,
    spin: i64,
) {
    // SAFETY: the caller's contract; axpy reads x[i] and y[i] and writes out[i] for i < N.
    unsafe { axpy.launch(config, (A, x, y, out, N as u64, spin)) }.unwrap();
}

fn primary_stream() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let context = CudaContext::new(0).expect("GPU tests need a GPU: device 0 is not usable");
    let stream = context.new_stream().unwrap();
    (context, stream)
}

#[test]
#[ignore = "gpu: launches a cudyn kernel on cudarc slices, views and a cudarc stream"]
fn a_cudyn_kernel_runs_on_cudarc_memory_and_stream() {
    let (_context, stream) = primary_stream();
    let (x_host, x) = upload(&stream, N, 1);
    // y's data sits in the second half of a longer slice: the kernel gets a view at an offset.
    let (y_host, y) = upload(&stream, 2 * N, 2);
    let mut out = stream.alloc_zeros::<u32>(N + 1).unwrap();

    let axpy = axpy_kernel();
    let launch = LaunchStream::new(&stream).unwrap();
    let config = LaunchConfig::for_elements(N, 256).stream(&launch);
    let y_view = y.slice(N..);
    let mut out_view = out.slice_mut(..N);
    // SAFETY: axpy reads x[i] and y_view[i] and writes out_view[i] for i < N, and all three
    // hold N words (`out` one more, which stays 0); the launch is on `stream`, where cudarc
    // orders the copy below after it, and every slice outlives it.
    unsafe {
        launch_axpy(
            &axpy,
            &config,
            launch.read(&x),
            launch.read(&y_view),
            launch.write(&mut out_view),
            0,
        )
    };

    let got = stream.clone_dtoh(&out).unwrap();
    assert_eq!(got[..N], expected(&x_host, &y_host[N..]));
    assert_eq!(got[N], 0, "the element past the view is untouched");
}

#[test]
#[ignore = "gpu: a cudarc copy on another stream waits for the cudyn launch that wrote the slice"]
fn cudarc_orders_its_work_after_a_cudyn_launch_on_its_slices() {
    let (context, writer) = primary_stream();
    let reader = context.new_stream().unwrap();
    let (x_host, x) = upload(&writer, N, 3);
    let (y_host, y) = upload(&writer, N, 4);
    let mut out = writer.alloc_zeros::<u32>(N).unwrap();
    writer.synchronize().unwrap();

    let axpy = axpy_kernel();
    let launch = LaunchStream::new(&writer).unwrap();
    let config = LaunchConfig::for_elements(N, 256).stream(&launch);
    // SAFETY: as in the test above; the slow kernel writes `out`, and the copy below reads it
    // on another stream, which cudarc makes wait for the event the write argument recorded.
    unsafe {
        launch_axpy(
            &axpy,
            &config,
            launch.read(&x),
            launch.read(&y),
            launch.write(&mut out),
            SLOW,
        )
    };

    // Without the recorded event, this copy would run while the kernel still idles, and read
    // the zeros.
    let got = reader.clone_dtoh(&out).unwrap();
    assert_eq!(got, expected(&x_host, &y_host));
}

#[test]
#[ignore = "gpu: cudarc copies into and out of cudyn buffers and launches a kernel on them"]
fn cudarc_copies_and_launches_on_cudyn_buffers() {
    let (context, stream) = primary_stream();
    let x_host = random_words(N, 5);
    let y_host = random_words(N, 6);
    let x = DeviceBuffer::from_slice(&x_host).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(N).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(N).unwrap();

    // A cudarc copy into a cudyn buffer, read back by cudyn.
    stream
        .memcpy_htod(&y_host, &mut y.as_slice_mut().for_cudarc(&stream).unwrap())
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), y_host);

    // The same kernel, compiled by cudyn to a cubin, loaded and launched by cudarc.
    let cubin = Program::new(AXPY)
        .name("axpy.cu")
        .output(Output::Cubin)
        .compile()
        .unwrap();
    let module = context
        .load_module(Ptx::from_binary(cubin.code().to_vec()))
        .unwrap();
    let function = module.load_function("axpy").unwrap();
    let x_view = x.as_slice().for_cudarc(&stream).unwrap();
    let y_view = y.as_slice().for_cudarc(&stream).unwrap();
    let mut out_view = out.as_slice_mut().for_cudarc(&stream).unwrap();
    let (n, spin) = (N as u64, 0i64);
    let config = cudarc::driver::LaunchConfig {
        grid_dim: (N.div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = stream.launch_builder(&function);
    builder
        .arg(&A)
        .arg(&x_view)
        .arg(&y_view)
        .arg(&mut out_view)
        .arg(&n)
        .arg(&spin);
    // SAFETY: axpy reads x[i] and y[i] and writes out[i] for i < N, and each buffer holds N
    // words; the stream is synchronized before the buffers are read or dropped.
    unsafe { builder.launch(config) }.unwrap();
    stream.synchronize().unwrap();

    let want = expected(&x_host, &y_host);
    assert_eq!(out.to_vec().unwrap(), want, "read back by cudyn");
    let out_view = out.as_slice().for_cudarc(&stream).unwrap();
    assert_eq!(
        stream.clone_dtoh(&out_view).unwrap(),
        want,
        "read back by cudarc"
    );
}

#[test]
#[ignore = "gpu: a cudyn stream used by cudarc copies and a cudyn launch, in order"]
fn a_cudyn_stream_carries_cudarc_copies_and_cudyn_launches() {
    let context = CudaContext::new(0).expect("GPU tests need a GPU: device 0 is not usable");
    let stream = Stream::new().unwrap();
    // SAFETY: `shared` is used only in this test, before `stream` is dropped, and every piece
    // of work on it is queued in order on this one stream.
    let shared = unsafe { stream.to_cudarc(&context) }.unwrap();
    let (x_host, x) = upload(&shared, N, 7);
    let (y_host, y) = upload(&shared, N, 8);
    let mut out = DeviceBuffer::<u32>::zeroed(N).unwrap();

    let axpy = axpy_kernel();
    let launch = LaunchStream::new(&shared).unwrap();
    let config = LaunchConfig::for_elements(N, 256).stream(&stream);
    // SAFETY: axpy reads x[i] and y[i] and writes out[i] for i < N, all of N words; the copies
    // of x and y and the launch are queued in that order on one stream, and `out` is read after
    // the stream is synchronized.
    unsafe {
        launch_axpy(
            &axpy,
            &config,
            launch.read(&x),
            launch.read(&y),
            &mut out,
            0,
        )
    };
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), expected(&x_host, &y_host));
}

#[test]
#[ignore = "gpu: a cudarc context that is not primary is refused in every direction"]
fn a_context_that_is_not_primary_is_refused() {
    let (_primary, primary_stream) = primary_stream();
    let cudyn_stream = Stream::new().unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(4).unwrap();
    // Makes the new context current on this thread, until set_device below.
    let other = CudaContext::new_non_primary(0, 0).unwrap();
    let other_stream = other.new_stream().unwrap();
    let is_refused = |result: cudyn::Result<()>, what: &str| match result {
        Err(Error::NotPrimaryContext { device: 0, .. }) => {}
        other => panic!("{what}: expected NotPrimaryContext, got {other:?}"),
    };
    is_refused(
        LaunchStream::new(&other_stream).map(drop),
        "a launch stream",
    );
    is_refused(
        buffer.as_slice().for_cudarc(&other_stream).map(drop),
        "a view",
    );
    is_refused(
        buffer.as_slice_mut().for_cudarc(&other_stream).map(drop),
        "a mutable view",
    );
    // SAFETY: refused before anything is wrapped.
    is_refused(
        unsafe { cudyn_stream.to_cudarc(&other) }.map(drop),
        "a cudyn stream",
    );
    cudyn::set_device(0).unwrap();
    // The primary context's stream is accepted.
    LaunchStream::new(&primary_stream).unwrap();
}

#[test]
fn a_refusal_says_how_to_make_the_context_cudyn_uses() {
    let error = Error::NotPrimaryContext {
        what: "the cudarc stream",
        device: 1,
    };
    let text = error.to_string();
    assert!(
        text.starts_with("the cudarc stream belongs to a context that is not the primary context of device 1: make it in the primary context (cudarc: CudaContext::new(1)"),
        "{text}"
    );
}

/// The types cudyn hands to cudarc and back can cross threads like the handles they borrow.
#[test]
fn interop_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<LaunchStream<'static>>();
    send_sync::<cudyn::cudarc::CudarcView<'static, f32>>();
    send_sync::<cudyn::cudarc::CudarcViewMut<'static, f32>>();
}
