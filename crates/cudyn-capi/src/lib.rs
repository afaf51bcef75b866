//! # cudyn-capi: cudyn for C and C++
//!
//! A C library (`libcudyn_capi.so`, `libcudyn_capi.a`) over cudyn's safe API, declared in
//! `include/cudyn.h` (generated from this crate by cbindgen; a test fails when it is stale) and
//! wrapped for C++ by the header-only `include/cudyn.hpp`. `docs/C_API.md` has a guide;
//! `examples/c/saxpy.c` and `examples/cpp/saxpy.cpp` are whole programs.
//!
//! The rules every function keeps:
//!
//! - **Status codes.** Every fallible function returns a `cudyn_status`: `CUDYN_SUCCESS` (0) or
//!   the kind of failure, and sets the calling thread's last-error message
//!   (`cudyn_last_error()`) to cudyn's full text: what failed, what to do, and any compiler or
//!   JIT log. Results go through out-pointers, written only on success.
//! - **No crash on bad arguments.** Null pointers are refused with
//!   `CUDYN_ERROR_INVALID_ARGUMENT` (except in the free functions, where null does nothing, as
//!   with C's `free`). Handles are looked up, never dereferenced: a freed or made-up handle is an
//!   error, never a crash. What C cannot check (that a pointer points to as many bytes as it
//!   says) is in each function's `Safety` section.
//! - **No panic crosses into C.** Every entry point runs its body under `catch_unwind`; a panic
//!   (a bug in cudyn) becomes `CUDYN_ERROR_INTERNAL` with its message.
//! - **Ownership is reference counting.** Every handle holds a reference: a kernel keeps its
//!   library loaded after `cudyn_library_unload`, and the library is released when the last
//!   handle is gone (then unloaded, or kept loaded for a later identical load within cudyn's
//!   retention limits: `CUDYN_RETAIN_LIBRARIES=0` turns keeping off). A kernel wrapped from a foreign `cudaKernel_t`/`CUkernel` is borrowed and
//!   never unloaded by cudyn.
//! - **Threads.** Every function may be called from any thread; devices are per thread
//!   (`cudyn_set_device`), as in the CUDA runtime.

mod handles;
pub mod info;
pub mod kernel;
pub mod launch;
pub mod library;
pub mod memory;
pub mod status;
pub mod stream;
pub mod types;
