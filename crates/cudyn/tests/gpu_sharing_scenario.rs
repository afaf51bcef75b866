//! The third use case of "Dynamic Loading in the CUDA Runtime" (NVIDIA), in one process: kernel
//! handles shared between libraries that each carry their own static CUDA runtime, and cudyn.
//!
//! 1. libvector_add, built by nvcc with `-cudart static`, defines `__global__ vectorAdd`, takes
//!    its handle with `cudaGetKernel` and hands it out through an `extern "C"` function;
//! 2. cudyn loads `matrixMul` compiled by NVRTC;
//! 3. libcommon, with a static runtime instance of its own, launches both handles with
//!    `cudaLaunchKernel`;
//! 4. Rust code on cudyn wraps the C++ library's handle without taking ownership, reads its
//!    parameter layout and launches it with checked arguments.
//!
//! Every result is compared with the CPU's. The libraries are built by nvcc when the tests run
//! (the C++ sources are in tests/sharing/ and compiled into this test), so only this test
//! program needs to travel to a machine with a GPU and a CUDA toolkit. The one test without `ignore`
//! builds them without a GPU and checks what nvcc put in them.
//!
//! Run with `cargo test -p cudyn --test gpu_sharing_scenario -- --include-ignored` on a machine
//! with a GPU (nvcc from CUDA_HOME).

mod common;

use std::ffi::c_void;
use std::sync::OnceLock;

use common::{any_nvcc, device_arch, shared_library, Compiled, CudaRuntime};
use cudyn::param::ParamLayout;
use cudyn::sys::runtime::{cudaError_t, cudaKernel_t, cudaSuccess};
use cudyn::{DeviceBuffer, Error, Kernel, KernelGetter, LaunchConfig, Program};
use object::{Object, ObjectSymbol};

const VECTOR_ADD: &str = include_str!("sharing/vector_add.cu");
const COMMON: &str = include_str!("sharing/common.cu");
const SHARED_RUNTIME_ADD: &str = include_str!("sharing/shared_runtime_add.cu");

/// `vectorAdd(const float*, const float*, float*, int)`, as C++ names it without C linkage.
const VECTOR_ADD_SYMBOL: &str = "_Z9vectorAddPKfS0_Pfi";

/// The layout of `(const float*, const float*, float*, int)`: three pointers and an int.
const POINTERS_AND_INT: [(usize, usize); 4] = [(0, 8), (8, 8), (16, 8), (24, 4)];

/// The kernel libmatrix_mul of the article loads at run time, here compiled by NVRTC.
const MATRIX_MUL: &str = r#"
extern "C" __global__ void matrixMul(const float *a, const float *b, float *c, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
        c[row * n + col] = sum;
    }
}
"#;

type VectorAddEntry = unsafe extern "C" fn() -> *const c_void;
/// `common_vector_add` and `common_matrix_mul`: launch `kernel` on `(a, b, c, n)`, synchronize,
/// return the runtime's status.
type CommonLaunch = unsafe extern "C" fn(
    kernel: cudaKernel_t,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    n: i32,
) -> cudaError_t;

fn layout(params: &[ParamLayout]) -> Vec<(usize, usize)> {
    params
        .iter()
        .map(|param| (param.offset, param.size))
        .collect()
}

/// Launches `kernel` on `(a, b, c, n)` through one of libcommon's functions, which synchronizes.
/// Both kernels read `a` and `b` and write `c` inside the sizes their `n` gives (n floats for
/// vectorAdd, n x n for matrixMul), which each caller's buffers hold.
fn launch_through(
    launch: CommonLaunch,
    kernel: cudaKernel_t,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &DeviceBuffer<f32>,
    n: i32,
) -> cudaError_t {
    // SAFETY: the kernel's accesses stay inside the buffers (see above), which outlive the call;
    // the call synchronizes, so nothing runs on them afterwards.
    unsafe {
        launch(
            kernel,
            a.as_raw() as *const f32,
            b.as_raw() as *const f32,
            c.as_raw() as *mut f32,
            n,
        )
    }
}

/// A C function of an opened library.
fn function<T: Copy>(library: &libloading::Library, name: &str) -> T {
    // SAFETY: each caller names a function of tests/sharing/ with the C signature T declares.
    *unsafe { library.get::<T>(name.as_bytes()) }
        .unwrap_or_else(|error| panic!("{name} is exported: {error}"))
}

/// The article's two nvcc-built libraries, built for device 0 and opened once per process.
/// They stay loaded for the life of the process: the kernel handles they hand out are borrowed
/// and live only as long as the library that registered them.
struct Libraries {
    vector_add: &'static libloading::Library,
    common: &'static libloading::Library,
}

fn libraries() -> &'static Libraries {
    static LIBRARIES: OnceLock<Libraries> = OnceLock::new();
    LIBRARIES.get_or_init(|| {
        let nvcc = any_nvcc();
        let arch = device_arch();
        let open = |name: &str, source: &str| {
            let built = shared_library(&nvcc, name, source, &arch, CudaRuntime::Static);
            // SAFETY: the library's initializers only register its fatbin with its own static
            // CUDA runtime.
            let library = unsafe { libloading::Library::new(&built.path) }
                .unwrap_or_else(|error| panic!("lib{name}.so opens: {error}"));
            // The file may go once it is open.
            drop(built);
            &*Box::leak(Box::new(library))
        };
        Libraries {
            vector_add: open("vector_add", VECTOR_ADD),
            common: open("common", COMMON),
        }
    })
}

/// Small integers and halves: sums and products of them are exact in `f32` in any order, so the
/// GPU's results equal the CPU's bit for bit.
fn exact_values(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed) % 9) as f32 * 0.5)
        .collect()
}

fn cpu_vector_add(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(a, b)| a + b).collect()
}

fn cpu_matrix_mul(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; n * n];
    for row in 0..n {
        for col in 0..n {
            c[row * n + col] = (0..n).map(|k| a[row * n + k] * b[k * n + col]).sum();
        }
    }
    c
}

#[test]
#[ignore = "gpu: the article's three libraries share vectorAdd and matrixMul, and cudyn launches vectorAdd"]
fn the_article_s_libraries_share_kernel_handles_with_cudyn() {
    let libraries = libraries();

    // (1) libvector_add hands out the handle of its statically registered kernel.
    let get_vector_add: KernelGetter = function(libraries.vector_add, "vector_add_kernel");
    let mut vector_add_handle: cudaKernel_t = std::ptr::null_mut();
    // SAFETY: writes one kernel handle.
    let status = unsafe { get_vector_add(&mut vector_add_handle) };
    assert_eq!(status, cudaSuccess, "cudaGetKernel inside libvector_add");

    // (2) cudyn loads matrixMul from NVRTC's output.
    let matrix_mul = Program::new(MATRIX_MUL)
        .load()
        .unwrap()
        .kernel("matrixMul")
        .unwrap();

    // (3) libcommon launches both handles with its own runtime instance.
    let common_vector_add: CommonLaunch = function(libraries.common, "common_vector_add");
    let common_matrix_mul: CommonLaunch = function(libraries.common, "common_matrix_mul");
    let n = 1 << 16;
    let (a, b) = (exact_values(n, 1), exact_values(n, 4));
    let (d_a, d_b) = (
        DeviceBuffer::from_slice(&a).unwrap(),
        DeviceBuffer::from_slice(&b).unwrap(),
    );
    let d_c = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let status = launch_through(
        common_vector_add,
        vector_add_handle,
        &d_a,
        &d_b,
        &d_c,
        n as i32,
    );
    assert_eq!(
        status, cudaSuccess,
        "libcommon launches libvector_add's kernel"
    );
    assert_eq!(d_c.to_vec().unwrap(), cpu_vector_add(&a, &b));

    let side = 64;
    let (ma, mb) = (exact_values(side * side, 2), exact_values(side * side, 5));
    let (d_ma, d_mb) = (
        DeviceBuffer::from_slice(&ma).unwrap(),
        DeviceBuffer::from_slice(&mb).unwrap(),
    );
    let d_mc = DeviceBuffer::<f32>::zeroed(side * side).unwrap();
    let status = launch_through(
        common_matrix_mul,
        matrix_mul.as_runtime_raw(),
        &d_ma,
        &d_mb,
        &d_mc,
        side as i32,
    );
    assert_eq!(status, cudaSuccess, "libcommon launches cudyn's kernel");
    assert_eq!(d_mc.to_vec().unwrap(), cpu_matrix_mul(&ma, &mb, side));

    // (4) cudyn wraps libvector_add's handle without owning it and launches it, checked.
    // SAFETY: libvector_add stays loaded for the life of the process (see `libraries`).
    let vector_add = unsafe { Kernel::from_raw(vector_add_handle.cast()) };
    assert!(vector_add.library().is_none(), "borrowed, not owned");
    assert_eq!(vector_add.name().unwrap(), VECTOR_ADD_SYMBOL);
    assert_eq!(layout(vector_add.params().unwrap()), POINTERS_AND_INT);
    let mut d_rust = DeviceBuffer::<f32>::zeroed(n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    // SAFETY: as for libcommon's launch above; d_rust is read back by a copy ordered after the
    // kernel on the legacy default stream.
    unsafe { vector_add.launch(&config, (&d_a, &d_b, &mut d_rust, n as i32)) }.unwrap();
    assert_eq!(d_rust.to_vec().unwrap(), cpu_vector_add(&a, &b));
    // The check refuses what the C++ signature does not take: a 64-bit count for the int.
    // SAFETY: refused before the driver sees it.
    let refused = unsafe { vector_add.launch(&config, (&d_a, &d_b, &mut d_rust, n as u64)) };
    assert!(
        matches!(&refused, Err(Error::LaunchArguments { .. })),
        "{refused:?}"
    );

    // The same handle through cudyn's getter wrapper, as cudyn-build's generated code takes it.
    // SAFETY: vector_add_kernel writes a handle or returns an error; the library stays loaded.
    let from_getter = unsafe { Kernel::from_getter("vectorAdd", get_vector_add) }.unwrap();
    assert_eq!(layout(from_getter.params().unwrap()), POINTERS_AND_INT);
    let mut d_getter = DeviceBuffer::<f32>::zeroed(n).unwrap();
    // SAFETY: as above.
    unsafe { from_getter.launch(&config, (&d_a, &d_b, &mut d_getter, n as i32)) }.unwrap();
    assert_eq!(d_getter.to_vec().unwrap(), cpu_vector_add(&a, &b));
    // Dropping cudyn's wrappers leaves the kernel to its library: libcommon still launches it.
    drop((vector_add, from_getter));
    let status = launch_through(
        common_vector_add,
        vector_add_handle,
        &d_b,
        &d_b,
        &d_c,
        n as i32,
    );
    assert_eq!(status, cudaSuccess, "the handle outlives cudyn's wrappers");
    assert_eq!(d_c.to_vec().unwrap(), cpu_vector_add(&b, &b));
}

#[test]
#[ignore = "gpu: cudaGetKernel through cudyn's runtime does not know a kernel of a static runtime"]
fn a_kernel_of_a_static_runtime_is_not_found_by_cudyn_s_runtime_and_the_error_says_why() {
    let entry: VectorAddEntry = function(libraries().vector_add, "vector_add_entry");
    // SAFETY: returns the address of vectorAdd's host entry function.
    let entry = unsafe { entry() };
    // SAFETY: an address in this process; libvector_add stays loaded.
    let error = unsafe { Kernel::from_host_function(entry) }.unwrap_err();
    let runtime = &cudyn::sys::runtime().unwrap().library.path;
    assert!(
        matches!(&error, Error::KernelNotRegistered { entry: address, runtime: asked, .. }
            if *address == entry as usize && asked == runtime),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("-cudart shared"), "{message}");
    assert!(message.contains("Kernel::from_getter"), "{message}");
}

#[test]
#[ignore = "gpu: a kernel of a -cudart shared library is found by cudyn from its host function"]
fn a_kernel_of_the_shared_runtime_is_found_from_its_host_function_and_launched() {
    // cudyn's runtime first: the library's libcudart.so.13 then resolves to it by its soname,
    // whichever copy the system loader would have found, and both register in one instance.
    let runtime = cudyn::sys::runtime().unwrap();
    let built = shared_library(
        &any_nvcc(),
        "shared_runtime_add",
        SHARED_RUNTIME_ADD,
        &device_arch(),
        CudaRuntime::Shared,
    );
    // SAFETY: the library's initializers register its fatbin with the shared CUDA runtime.
    let library = unsafe { libloading::Library::new(&built.path) }.unwrap();
    let entry: VectorAddEntry = function(&library, "vector_add_shared_entry");
    // SAFETY: returns the address of vectorAddShared's host entry function.
    let entry = unsafe { entry() };
    // SAFETY: an address in this process; `library` outlives the kernel (dropped after it).
    let kernel = unsafe { Kernel::from_host_function(entry) }.unwrap_or_else(|error| {
        panic!(
            "{error}\n(cudyn's runtime: {})",
            runtime.library.path.display()
        )
    });
    assert!(kernel.library().is_none(), "borrowed, not owned");
    assert_eq!(layout(kernel.params().unwrap()), POINTERS_AND_INT);
    let n = 10_000;
    let (a, b) = (exact_values(n, 3), exact_values(n, 8));
    let (d_a, d_b) = (
        DeviceBuffer::from_slice(&a).unwrap(),
        DeviceBuffer::from_slice(&b).unwrap(),
    );
    let mut d_c = DeviceBuffer::<f32>::zeroed(n).unwrap();
    // SAFETY: vectorAddShared reads a[i], b[i] and writes c[i] for i < n; each buffer holds n
    // floats; d_c is read back by a copy ordered after the kernel.
    unsafe {
        kernel.launch(
            &LaunchConfig::for_elements(n, 128),
            (&d_a, &d_b, &mut d_c, n as i32),
        )
    }
    .unwrap();
    assert_eq!(d_c.to_vec().unwrap(), cpu_vector_add(&a, &b));
    drop(kernel);
    drop(library);
}

/// Whether `symbol` is in `file`, and whether it is defined there.
fn symbol(file: &object::File<'_>, name: &str) -> Option<bool> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .find(|symbol| symbol.name() == Ok(name))
        .map(|symbol| !symbol.is_undefined())
}

#[test]
fn the_article_s_libraries_build_with_nvcc_and_each_carries_its_own_runtime() {
    let nvcc = any_nvcc();
    let build = |name, source, runtime| -> (Compiled, Vec<u8>) {
        let built = shared_library(&nvcc, name, source, "sm_90", runtime);
        let bytes = built.bytes();
        (built, bytes)
    };
    let (_vector_add, vector_add) = build("vector_add", VECTOR_ADD, CudaRuntime::Static);
    let (_common, common) = build("common", COMMON, CudaRuntime::Static);
    let (_shared, shared) = build(
        "shared_runtime_add",
        SHARED_RUNTIME_ADD,
        CudaRuntime::Shared,
    );

    // vectorAdd's device code, as the driver will see it: SASS for sm_90 with the parameter
    // layout cudyn checks launches against.
    // The static runtime brings fatbins of its own; exactly one fatbin defines vectorAdd.
    let fatbins = cudyn::inspect::host::embedded_fatbins(&vector_add).unwrap();
    let layouts: Vec<_> = fatbins
        .iter()
        .filter_map(|fatbin| {
            let image = cudyn::Image::new(*fatbin).unwrap();
            image.param_layout(VECTOR_ADD_SYMBOL).ok()
        })
        .collect();
    assert_eq!(layouts.len(), 1, "{} fatbins", fatbins.len());
    assert_eq!(layout(&layouts[0]), POINTERS_AND_INT);

    let files = [
        (
            "libvector_add",
            &vector_add,
            &["vector_add_kernel", "vector_add_entry"][..],
        ),
        (
            "libcommon",
            &common,
            &["common_vector_add", "common_matrix_mul"][..],
        ),
        (
            "libshared_runtime_add",
            &shared,
            &["vector_add_shared_entry"][..],
        ),
    ];
    for (name, bytes, exports) in files {
        let file = object::File::parse(&bytes[..]).unwrap();
        for export in exports {
            let exported = file
                .dynamic_symbols()
                .any(|symbol| symbol.name() == Ok(export) && !symbol.is_undefined());
            assert!(exported, "{name} exports {export}");
        }
        // The registration entry point of the runtime: defined inside a library with its own
        // static runtime instance, imported from libcudart.so by one on the shared runtime.
        let registers_with_own_runtime = symbol(&file, "__cudaRegisterFatBinary");
        let expected = if name == "libshared_runtime_add" {
            Some(false)
        } else {
            Some(true)
        };
        assert_eq!(registers_with_own_runtime, expected, "{name}");
    }
}
