//! The C functions called from Rust, as a C program calls them: compiling with options, name
//! expressions, streams, copies at offsets, and the lifetime of kernels and libraries.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};

use cudyn_capi::kernel::*;
use cudyn_capi::launch::*;
use cudyn_capi::library::*;
use cudyn_capi::memory::*;
use cudyn_capi::status::{cudyn_last_error, cudyn_status};
use cudyn_capi::stream::*;
use cudyn_capi::types::*;

fn last_error() -> String {
    // SAFETY: a NUL-terminated string valid until the next failure on this thread.
    unsafe { CStr::from_ptr(cudyn_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts success, showing cudyn's message otherwise.
fn ok(status: cudyn_status) {
    assert_eq!(status, cudyn_status::CUDYN_SUCCESS, "{}", last_error());
}

/// Compiles `source` with `options` and loads it.
fn compile(source: &CStr, options: &cudyn_compile_options) -> (cudyn_status, *mut cudyn_library) {
    let mut library = null_mut();
    // SAFETY: a C string, options whose pointers are valid for the call, a writable pointer.
    let status = unsafe { cudyn_library_compile(source.as_ptr(), options, null(), &mut library) };
    (status, library)
}

fn options(name: &CStr, arch: &CStr) -> cudyn_compile_options {
    cudyn_compile_options {
        name: name.as_ptr(),
        arch: arch.as_ptr(),
        options: null(),
        option_count: 0,
        name_expressions: null(),
        name_expression_count: 0,
    }
}

#[test]
fn a_source_that_does_not_compile_is_a_compile_error_with_the_log() {
    let defines = [c"-DBROKEN=1".as_ptr()];
    let options = cudyn_compile_options {
        options: defines.as_ptr(),
        option_count: 1,
        ..options(c"broken.cu", c"sm_90")
    };
    let source = c"#if BROKEN\nextern \"C\" __global__ void k(int *p) { *p = }\n#endif\n";
    let (status, library) = compile(source, &options);
    assert_eq!(
        status,
        cudyn_status::CUDYN_ERROR_COMPILE,
        "{}",
        last_error()
    );
    assert!(library.is_null());
    let message = last_error();
    assert!(message.contains("nvrtcCompileProgram"), "{message}");
    // The program's name and the define reached NVRTC: the log points into broken.cu line 2.
    assert!(message.contains("broken.cu(2): error"), "{message}");
}

#[test]
fn an_unknown_architecture_is_an_invalid_argument() {
    let (status, _) = compile(
        c"extern \"C\" __global__ void k() {}",
        &options(c"k.cu", c"sm_9x"),
    );
    assert_eq!(status, cudyn_status::CUDYN_ERROR_INVALID_ARGUMENT);
    assert!(
        last_error().contains("`sm_9x` is not a GPU architecture"),
        "{}",
        last_error()
    );
}

const SCALE: &CStr = c"
template <typename T>
__global__ void scale(T *data, T factor, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}";

/// `scale<float>` compiled for the current GPU, by its name expression.
fn scale_kernel() -> (*mut cudyn_library, *mut cudyn_kernel) {
    let expressions = [c"scale<float>".as_ptr()];
    let options = cudyn_compile_options {
        name: null(),
        arch: null(),
        options: null(),
        option_count: 0,
        name_expressions: expressions.as_ptr(),
        name_expression_count: 1,
    };
    let (status, library) = compile(SCALE, &options);
    ok(status);
    let mut kernel = null_mut();
    // SAFETY: a live library, a C string, a writable pointer.
    ok(unsafe { cudyn_library_kernel(library, c"scale<float>".as_ptr(), &mut kernel) });
    (library, kernel)
}

/// A device buffer holding `data`.
fn buffer_of(data: &[f32]) -> (*mut cudyn_buffer, u64) {
    let bytes = size_of_val(data);
    let (mut buffer, mut address) = (null_mut(), 0);
    // SAFETY: writable out-pointers; `data` holds `bytes` bytes.
    unsafe {
        ok(cudyn_buffer_alloc(bytes, &mut buffer));
        ok(cudyn_buffer_copy_from_host(
            buffer,
            0,
            data.as_ptr().cast(),
            bytes,
        ));
        ok(cudyn_buffer_address(buffer, &mut address));
    }
    (buffer, address)
}

/// The argument array of `scale`: pointers to its three values.
fn scale_args(address: &mut u64, factor: &mut f32, n: &mut u64) -> [*mut c_void; 3] {
    [
        (address as *mut u64).cast(),
        (factor as *mut f32).cast(),
        (n as *mut u64).cast(),
    ]
}

/// Blocks of 128 threads over `n` elements, on `stream`.
fn scale_config(n: u64, stream: *const cudyn_stream) -> cudyn_launch_config {
    cudyn_launch_config {
        grid: cudyn_dim3 {
            x: n.div_ceil(128) as u32,
            y: 1,
            z: 1,
        },
        block: cudyn_dim3 { x: 128, y: 1, z: 1 },
        shared_mem_bytes: 0,
        stream,
    }
}

/// Launches `scale` over `n` floats at `address`, multiplying by `factor`, on `stream`.
fn launch_scale(
    kernel: *const cudyn_kernel,
    stream: *const cudyn_stream,
    mut address: u64,
    mut factor: f32,
    mut n: u64,
) -> cudyn_status {
    let mut args = scale_args(&mut address, &mut factor, &mut n);
    let sizes = [8, 4, 8];
    let config = scale_config(n, stream);
    // SAFETY: three pointers to values of the parameters' types; the buffer at `address` holds
    // `n` floats and outlives the launch (the callers synchronize before freeing it).
    unsafe { cudyn_launch(kernel, &config, args.as_mut_ptr(), 3, sizes.as_ptr()) }
}

#[test]
#[ignore = "gpu: a template kernel found by its name expression, launched on a stream"]
fn gpu_a_name_expression_finds_the_template_kernel_and_a_stream_runs_it() {
    let (library, kernel) = scale_kernel();
    let input: Vec<f32> = (0..5000).map(|i| (i % 101) as f32 - 50.0).collect();
    let (buffer, address) = buffer_of(&input);
    let mut stream = null_mut();
    let mut raw_stream: *mut c_void = null_mut();
    // SAFETY: writable out-pointers.
    unsafe {
        ok(cudyn_stream_create(&mut stream));
        ok(cudyn_stream_raw(stream, &mut raw_stream));
    }
    assert!(!raw_stream.is_null());
    // The second half only: the buffer's address plus 2500 floats.
    ok(launch_scale(kernel, stream, address + 2500 * 4, 4.0, 2500));
    ok(cudyn_stream_synchronize(stream));
    let mut out = vec![0f32; 2500];
    // SAFETY: `out` holds 2500 floats.
    ok(unsafe { cudyn_buffer_copy_to_host(buffer, 2500 * 4, out.as_mut_ptr().cast(), 2500 * 4) });
    let expected: Vec<f32> = input[2500..].iter().map(|v| v * 4.0).collect();
    assert_eq!(out, expected);
    // SAFETY: `out` holds 2500 floats; the first half was not touched.
    ok(unsafe { cudyn_buffer_copy_to_host(buffer, 0, out.as_mut_ptr().cast(), 2500 * 4) });
    assert_eq!(out, input[..2500]);

    let mut name: *mut c_char = null_mut();
    // SAFETY: a writable out-pointer; the string is freed below.
    ok(unsafe { cudyn_kernel_name(kernel, &mut name) });
    // SAFETY: a string cudyn returned.
    let mangled = unsafe { CStr::from_ptr(name) }.to_str().unwrap().to_owned();
    // The symbol of the instantiation, mangled: a template has no C linkage.
    assert!(mangled.starts_with("_Z5scaleIfE"), "{mangled}");
    ok(cudyn_capi::info::cudyn_string_free(name));

    ok(cudyn_stream_destroy(stream));
    assert_eq!(
        cudyn_stream_synchronize(stream),
        cudyn_status::CUDYN_ERROR_INVALID_ARGUMENT
    );
    ok(cudyn_buffer_free(buffer));
    ok(cudyn_kernel_release(kernel));
    ok(cudyn_library_unload(library));
}

/// `scale<float>(float*, float, unsigned long long)` launched through `cudyn_launch_ex` with
/// the argument types `types` and the values of `launch_scale`.
fn launch_scale_typed(
    kernel: *const cudyn_kernel,
    mut address: u64,
    mut factor: f32,
    mut n: u64,
    types: &[cudyn_arg_type; 3],
    check_only: bool,
) -> cudyn_status {
    let mut args = scale_args(&mut address, &mut factor, &mut n);
    let config = cudyn_launch_config_ex {
        base: scale_config(n, null()),
        cooperative: false,
        cluster: cudyn_dim3 { x: 0, y: 0, z: 0 },
    };
    let sizes = [8, 4, 8];
    if check_only {
        // SAFETY: a live kernel and three sizes and types; nothing is launched.
        return unsafe { cudyn_launch_check(kernel, &config, 3, sizes.as_ptr(), types.as_ptr()) };
    }
    // SAFETY: three pointers to values of the parameters' types; the buffer at `address` holds
    // `n` floats and outlives the launch (the caller synchronizes before freeing it).
    unsafe {
        cudyn_launch_ex(
            kernel,
            &config,
            args.as_mut_ptr(),
            3,
            sizes.as_ptr(),
            types.as_ptr(),
        )
    }
}

#[test]
#[ignore = "gpu: C callers get the type check of a C++ kernel: wrong types refused, right ones run"]
fn gpu_c_callers_get_the_type_check() {
    let (library, kernel) = scale_kernel();
    let spelled = |index| {
        let mut text: *mut c_char = null_mut();
        // SAFETY: a live kernel and a writable out-pointer; the string is freed below.
        ok(unsafe { cudyn_kernel_param_type(kernel, index, &mut text) });
        // SAFETY: a string cudyn returned.
        let spelled = unsafe { CStr::from_ptr(text) }.to_str().unwrap().to_owned();
        ok(cudyn_capi::info::cudyn_string_free(text));
        spelled
    };
    assert_eq!(
        [spelled(0), spelled(1), spelled(2)],
        ["float*", "float", "unsigned long long"]
    );
    let ty = |scalar, indirection| cudyn_arg_type {
        scalar,
        indirection,
    };
    let right = [
        ty(CUDYN_TYPE_FLOAT, CUDYN_POINTER),
        ty(CUDYN_TYPE_FLOAT, CUDYN_VALUE),
        ty(CUDYN_TYPE_UINT64, CUDYN_VALUE),
    ];
    let input: Vec<f32> = (0..3000).map(|i| (i % 17) as f32 - 8.0).collect();
    let (buffer, address) = buffer_of(&input);
    let wrong = [
        // An int for the float factor.
        (
            [right[0], ty(CUDYN_TYPE_INT32, CUDYN_VALUE), right[2]],
            "parameter 1 is `float`",
        ),
        // A signed count for an unsigned one.
        (
            [right[0], right[1], ty(CUDYN_TYPE_INT64, CUDYN_VALUE)],
            "`unsigned long long`",
        ),
        // A read-only pointer for the data the kernel writes.
        (
            [
                ty(CUDYN_TYPE_FLOAT, CUDYN_CONST_POINTER),
                right[1],
                right[2],
            ],
            "read-only",
        ),
        // Doubles for floats.
        (
            [ty(CUDYN_TYPE_DOUBLE, CUDYN_POINTER), right[1], right[2]],
            "`f64`",
        ),
    ];
    for (types, expected) in wrong {
        for check_only in [true, false] {
            let status = launch_scale_typed(kernel, address, 2.0, 3000, &types, check_only);
            assert_eq!(status, cudyn_status::CUDYN_ERROR_LAUNCH, "{types:?}");
            assert!(
                last_error().contains(expected),
                "{expected}: {}",
                last_error()
            );
        }
    }
    ok(launch_scale_typed(kernel, address, 2.0, 3000, &right, true));
    ok(launch_scale_typed(
        kernel, address, 2.0, 3000, &right, false,
    ));
    ok(cudyn_capi::info::cudyn_synchronize());
    let mut out = vec![0f32; 3000];
    // SAFETY: `out` holds 3000 floats.
    ok(unsafe { cudyn_buffer_copy_to_host(buffer, 0, out.as_mut_ptr().cast(), 3000 * 4) });
    // The refused launches changed nothing: one doubling.
    let expected: Vec<f32> = input.iter().map(|v| v * 2.0).collect();
    assert_eq!(out, expected);
    ok(cudyn_buffer_free(buffer));
    ok(cudyn_kernel_release(kernel));
    ok(cudyn_library_unload(library));
}

#[test]
#[ignore = "gpu: a kernel keeps its library loaded after the library handle is unloaded"]
fn gpu_a_kernel_outlives_its_library_handle_and_wraps_as_a_foreign_one() {
    let (library, kernel) = scale_kernel();
    ok(cudyn_library_unload(library));
    assert_eq!(
        cudyn_library_unload(library),
        cudyn_status::CUDYN_ERROR_INVALID_ARGUMENT,
        "a second unload of one handle is refused"
    );
    let input = vec![1.5f32; 1000];
    let (buffer, address) = buffer_of(&input);
    ok(launch_scale(kernel, null(), address, 2.0, 1000));

    // cudyn's own handle wrapped as a foreign one: borrowed, launched, released.
    let mut raw = null_mut();
    let mut wrapped = null_mut();
    // SAFETY: writable out-pointers; `raw` stays loaded while `kernel` lives, which it does
    // until after `wrapped` is released.
    unsafe {
        ok(cudyn_kernel_raw(kernel, &mut raw));
        ok(cudyn_kernel_from_raw(raw, &mut wrapped));
    }
    ok(launch_scale(wrapped, null(), address, 2.0, 1000));
    ok(cudyn_kernel_release(wrapped));
    ok(launch_scale(kernel, null(), address, 2.0, 1000));
    ok(cudyn_capi::info::cudyn_synchronize());
    let mut out = vec![0f32; 1000];
    // SAFETY: `out` holds 1000 floats.
    ok(unsafe { cudyn_buffer_copy_to_host(buffer, 0, out.as_mut_ptr().cast(), 4000) });
    assert!(out.iter().all(|&v| v == 12.0), "{:?}", &out[..4]);
    ok(cudyn_buffer_free(buffer));
    ok(cudyn_kernel_release(kernel));
}
