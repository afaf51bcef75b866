//! Runtime and driver handles are interchangeable (`cudaKernel_t` is `CUkernel`): a kernel loaded
//! through the runtime is launched with the driver's `cuLaunchKernel`, and an attribute set
//! through the runtime (`cudaKernelSetAttributeForDevice`) on a kernel loaded through the driver
//! is read back through the driver (`cuKernelGetAttribute`), using the raw calls of `cudyn::sys`.
//! That module follows the CUDA headers and is outside cudyn's semantic versioning; the handle
//! types exchanged here are also in `cudyn::raw`, which is covered.
//!
//! `cargo run -p cudyn --example interop` (without a GPU: `-- --arch sm_90`, the compile alone)

mod common;

use std::ffi::c_void;
use std::process::ExitCode;

use cudyn::sys::{driver, runtime, Api};
use cudyn::{Backend, DeviceBuffer, KernelAttribute, Library, Program};

const FILL: &str = r#"
extern "C" __global__ void fill(int *out, int value, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = value + (int)i;
}
"#;

const N: usize = 1000;
const BLOCK: u32 = 128;
/// Dynamic shared memory beyond the 48 KiB every kernel may use without asking.
const SHARED_BYTES: i32 = 64 * 1024;

fn main() -> ExitCode {
    let compile = |options: &_| common::compile(options, Program::new(FILL), "fill.cu");
    common::run("interop", compile, |compiled| {
        let load = |backend| Library::loader().backend(backend).load_compiled(&compiled);

        // Loaded through the runtime, launched with cuLaunchKernel.
        let fill = load(Backend::Runtime)?.kernel("fill")?;
        let out = DeviceBuffer::<i32>::zeroed(N)?; // makes the device's context current
        let (mut pointer, mut value, mut n) = (out.as_raw(), 7i32, N as u64);
        let mut params: [*mut c_void; 3] = [
            (&mut pointer as *mut u64).cast(),
            (&mut value as *mut i32).cast(),
            (&mut n as *mut u64).cast(),
        ];
        let cuda = cudyn::sys::driver()?;
        let launch = cuda
            .api
            .cuLaunchKernel
            .ok_or_else(|| cuda.missing("cuLaunchKernel"))?;
        let blocks = (N as u32).div_ceil(BLOCK);
        // SAFETY: a kernel handle is accepted as a CUfunction; three parameter pointers of the
        // kernel's parameter sizes (8, 4, 8) that live across the call; fill writes out[i] for
        // i < N only, and `out` holds N ints and is read after the kernel (to_vec waits).
        let status = unsafe {
            launch(
                fill.as_raw() as driver::CUfunction,
                blocks,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        cuda.check("cuLaunchKernel", status)?;
        let filled = out.to_vec()?;
        let expected: Vec<i32> = (0..N as i32).map(|i| 7 + i).collect();

        // Loaded through the driver, an attribute set through the runtime, read through the driver.
        let fill = load(Backend::Driver)?.kernel("fill")?;
        let device = cudyn::current_device()?;
        let cudart = cudyn::sys::runtime()?;
        let set_attribute = cudart
            .api
            .cudaKernelSetAttributeForDevice
            .ok_or_else(|| cudart.missing("cudaKernelSetAttributeForDevice"))?;
        // SAFETY: a kernel handle, a settable attribute, a value within every GPU's opt-in limit
        // since Volta (96 KiB or more).
        let status = unsafe {
            set_attribute(
                fill.as_runtime_raw(),
                runtime::cudaFuncAttributeMaxDynamicSharedMemorySize,
                SHARED_BYTES,
                device.ordinal() as i32,
            )
        };
        cudart.check("cudaKernelSetAttributeForDevice", status)?;
        let read_back = fill.attribute(KernelAttribute::MaxDynamicSharedSizeBytes, device)?;

        Ok(vec![
            common::compare(
                format!("{N} ints filled by a runtime-loaded kernel launched with cuLaunchKernel"),
                &filled,
                &expected,
            ),
            common::compare(
                "a shared-memory limit set through the runtime, read through the driver",
                &[read_back],
                &[SHARED_BYTES],
            ),
        ])
    })
}
