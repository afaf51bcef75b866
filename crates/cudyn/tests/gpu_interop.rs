//! Runtime and driver handles are interchangeable (`cudaKernel_t` is `CUkernel`, `cudaLibrary_t`
//! is `CUlibrary`): load with one API, launch or set attributes with the other.
//! Run with `cargo test -p cudyn --test gpu_interop -- --include-ignored` on a machine with a GPU.

mod common;

use std::ffi::c_void;

use common::{compile, Output, SAXPY};
use cudyn::sys::{driver, runtime};
use cudyn::{Backend, DeviceBuffer, Kernel, KernelAttribute, LaunchConfig, Library};

fn library(backend: Backend) -> Library {
    let cubin = compile(SAXPY, Output::Cubin);
    let library = Library::loader()
        .backend(backend)
        .load(cubin.bytes())
        .unwrap();
    assert_eq!(library.backend(), backend);
    library
}

fn driver_api() -> &'static driver::Driver {
    cudyn::sys::driver().unwrap()
}

fn runtime_api() -> &'static runtime::Runtime {
    let runtime = cudyn::sys::runtime().unwrap();
    assert!(
        runtime.has_library_api(),
        "the runtime found has the library API (CUDA 12.8 or newer)"
    );
    runtime
}

/// `fill(out, value, n)`'s parameters as the C launch APIs take them.
struct FillParams {
    out: u64,
    value: i32,
    n: u64,
}

impl FillParams {
    fn pointers(&mut self) -> [*mut c_void; 3] {
        [
            (&mut self.out as *mut u64).cast(),
            (&mut self.value as *mut i32).cast(),
            (&mut self.n as *mut u64).cast(),
        ]
    }
}

#[test]
#[ignore = "gpu: runtime-loaded kernel launched with cuLaunchKernel"]
fn loaded_through_the_runtime_launched_through_cu_launch_kernel() {
    let fill = library(Backend::Runtime).kernel("fill").unwrap();
    let out = DeviceBuffer::<i32>::zeroed(64).unwrap();
    let mut params = FillParams {
        out: out.as_raw(),
        value: 11,
        n: 64,
    };
    let mut pointers = params.pointers();
    let launch = driver_api().api.cuLaunchKernel.unwrap();
    // cudyn made the primary context current on this thread (zeroed above).
    // SAFETY: the kernel handle is cast to CUfunction, as cuLaunchKernel accepts; three
    // parameter pointers of the kernel's sizes (8, 4, 8); no extra; default stream.
    let status = unsafe {
        launch(
            fill.as_raw() as driver::CUfunction,
            1,
            1,
            1,
            64,
            1,
            1,
            0,
            std::ptr::null_mut(),
            pointers.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, driver::CUDA_SUCCESS);
    cudyn::synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![11; 64]);
}

#[test]
#[ignore = "gpu: driver-loaded kernel launched with cudaLaunchKernel"]
fn loaded_through_the_driver_launched_through_cuda_launch_kernel() {
    let fill = library(Backend::Driver).kernel("fill").unwrap();
    let out = DeviceBuffer::<i32>::zeroed(64).unwrap();
    let mut params = FillParams {
        out: out.as_raw(),
        value: -5,
        n: 64,
    };
    let mut pointers = params.pointers();
    let rt = runtime_api();
    let dim = |x| runtime::dim3 { x, y: 1, z: 1 };
    // SAFETY: the kernel handle as the runtime's `const void*` function; three parameter
    // pointers of the kernel's sizes; no shared memory; default stream.
    let status = unsafe {
        (rt.api.cudaLaunchKernel.unwrap())(
            fill.as_runtime_raw().cast_const().cast(),
            dim(1),
            dim(64),
            pointers.as_mut_ptr(),
            0,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, runtime::cudaSuccess);
    // SAFETY: no arguments.
    let status = unsafe { (rt.api.cudaDeviceSynchronize.unwrap())() };
    assert_eq!(status, runtime::cudaSuccess);
    assert_eq!(out.to_vec().unwrap(), vec![-5; 64]);
}

#[test]
#[ignore = "gpu: an attribute set through one API is read through the other"]
fn attributes_set_through_the_driver_are_read_through_the_runtime_and_back() {
    let saxpy = library(Backend::Runtime).kernel("saxpy").unwrap();
    let device = cudyn::current_device().unwrap();
    let rt = runtime_api();
    let read_through_runtime = |kernel: &Kernel| {
        let mut attributes = runtime::cudaFuncAttributes::default();
        // SAFETY: writes one cudaFuncAttributes; the kernel handle is accepted as a function.
        let status = unsafe {
            (rt.api.cudaFuncGetAttributes.unwrap())(&mut attributes, kernel.as_function_ptr())
        };
        assert_eq!(status, runtime::cudaSuccess);
        attributes
    };

    // Driver (cuKernelSetAttribute, through cudyn) -> runtime (cudaFuncGetAttributes).
    saxpy
        .set_attribute(
            KernelAttribute::MaxDynamicSharedSizeBytes,
            64 * 1024,
            device,
        )
        .unwrap();
    assert_eq!(
        read_through_runtime(&saxpy).maxDynamicSharedSizeBytes,
        64 * 1024
    );
    // Both APIs agree on what the compiler decided.
    assert_eq!(
        read_through_runtime(&saxpy).numRegs,
        saxpy
            .attribute(KernelAttribute::NumRegisters, device)
            .unwrap()
    );

    // Runtime (cudaKernelSetAttributeForDevice) -> driver (cuKernelGetAttribute, through cudyn).
    // SAFETY: a kernel handle, a settable attribute, a value within the device's opt-in limit.
    let status = unsafe {
        (rt.api.cudaKernelSetAttributeForDevice.unwrap())(
            saxpy.as_runtime_raw(),
            runtime::cudaFuncAttributeMaxDynamicSharedMemorySize,
            96 * 1024,
            device.ordinal() as i32,
        )
    };
    assert_eq!(status, runtime::cudaSuccess);
    assert_eq!(
        saxpy
            .attribute(KernelAttribute::MaxDynamicSharedSizeBytes, device)
            .unwrap(),
        96 * 1024
    );
    // A launch asking for that much dynamic shared memory now passes cudyn's check and runs.
    let n = 256usize;
    let x = DeviceBuffer::from_slice(&vec![1.0f32; n]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(n).unwrap();
    // SAFETY: saxpy reads x[i] and writes out[i] for i < n with 256 threads, both buffers hold n
    // floats, and it uses no dynamic shared memory; the copy below waits for it.
    unsafe {
        saxpy.launch(
            &LaunchConfig::new(1, 256).shared_mem(96 * 1024),
            (2.0f32, &x, &x, &mut out, n as u64),
        )
    }
    .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![3.0; n]);
}

#[test]
#[ignore = "gpu: library and kernel handles round-trip between the APIs"]
fn library_handles_round_trip_between_runtime_and_driver() {
    let driver = driver_api();
    for backend in [Backend::Runtime, Backend::Driver] {
        let loaded = library(backend);
        assert_eq!(loaded.as_raw() as usize, loaded.as_runtime_raw() as usize);
        let kernel = loaded.kernel("fill").unwrap();

        // The other API's lookup on the same handle finds the same kernel.
        let mut other: driver::CUkernel = std::ptr::null_mut();
        // SAFETY: writes one kernel handle; the library is loaded; the name is NUL-terminated.
        let status = unsafe {
            (driver.api.cuLibraryGetKernel.unwrap())(&mut other, loaded.as_raw(), c"fill".as_ptr())
        };
        assert_eq!(status, driver::CUDA_SUCCESS);
        let mut through_runtime: runtime::cudaKernel_t = std::ptr::null_mut();
        // SAFETY: as above, through the runtime, on the handle cast to cudaLibrary_t.
        let status = unsafe {
            (runtime_api().api.cudaLibraryGetKernel.unwrap())(
                &mut through_runtime,
                loaded.as_runtime_raw(),
                c"fill".as_ptr(),
            )
        };
        assert_eq!(status, runtime::cudaSuccess);
        assert_eq!(other, kernel.as_raw());
        assert_eq!(through_runtime as usize, kernel.as_raw() as usize);

        // The kernel leads back to its library.
        let mut owner: driver::CUlibrary = std::ptr::null_mut();
        // SAFETY: writes one library handle.
        let status =
            unsafe { (driver.api.cuKernelGetLibrary.unwrap())(&mut owner, kernel.as_raw()) };
        assert_eq!(status, driver::CUDA_SUCCESS);
        assert_eq!(owner, loaded.as_raw());

        // A foreign handle, wrapped for the other backend, serves lookups and launches; dropping
        // the wrapper does not unload the library.
        let flipped = match backend {
            Backend::Runtime => Backend::Driver,
            Backend::Driver => Backend::Runtime,
            other => panic!("this test covers the runtime and the driver, not {other:?}"),
        };
        // SAFETY: `loaded` keeps the library loaded for the whole block.
        let wrapped = unsafe { Library::from_raw(loaded.as_raw(), flipped) };
        let fill = wrapped.kernel("fill").unwrap();
        assert_eq!(fill.as_raw(), kernel.as_raw());
        drop(wrapped);
        let mut out = DeviceBuffer::<i32>::zeroed(8).unwrap();
        // SAFETY: fill writes out[i] for i < n, and out holds 8 ints; the launches run in order
        // on the default stream, and the copy below waits for both.
        unsafe {
            fill.launch(&LaunchConfig::new(1, 8), (&mut out, 4i32, 8u64))
                .unwrap();
            kernel
                .launch(&LaunchConfig::new(1, 4), (&mut out, 6i32, 4u64))
                .unwrap();
        }
        assert_eq!(out.to_vec().unwrap(), [6, 6, 6, 6, 4, 4, 4, 4]);

        // A raw kernel handle wrapped by cudyn launches with checks like any other.
        // SAFETY: `loaded` keeps the kernel's library loaded.
        let foreign = unsafe { Kernel::from_raw(other) };
        assert_eq!(foreign.name().unwrap(), "fill");
        // SAFETY: refused by the count check (fill takes three parameters), so nothing runs.
        let refused = unsafe { foreign.launch(&LaunchConfig::new(1, 1), (&mut out, 1i32)) };
        assert!(refused.is_err());
    }
}
