/* cudyn C API. Generated from crates/cudyn-capi by cbindgen: do not edit; run
 * `CUDYN_BLESS=1 cargo test -p cudyn-capi --test header` after changing the Rust source. */

#ifndef CUDYN_H
#define CUDYN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * `cudyn_load_options.backend`: the runtime when one with the library API (CUDA 12.8+) is
 * found, else the driver.
 */
#define CUDYN_BACKEND_PREFERRED 0

/**
 * `cudyn_load_options.backend`: the runtime's library API (`cudaLibraryLoadData`).
 */
#define CUDYN_BACKEND_RUNTIME 1

/**
 * `cudyn_load_options.backend`: the driver's library API (`cuLibraryLoadData`).
 */
#define CUDYN_BACKEND_DRIVER 2

/**
 * `cudyn_load_options.sharing`: share a library already loaded from identical device code with
 * identical options, unless the code defines device variables (which every sharer would see).
 */
#define CUDYN_SHARING_AUTO 0

/**
 * `cudyn_load_options.sharing`: share, device variables included.
 */
#define CUDYN_SHARING_ALWAYS 1

/**
 * `cudyn_load_options.sharing`: load a library of this load's own, shared with no later load.
 */
#define CUDYN_SHARING_NEVER 2

/**
 * `cudyn_arg_type.scalar`: a type cudyn is not told; the argument is checked by size only.
 */
#define CUDYN_TYPE_UNKNOWN 0

/**
 * `cudyn_arg_type.scalar`: `signed char` (`int8_t`).
 */
#define CUDYN_TYPE_INT8 1

/**
 * `cudyn_arg_type.scalar`: `unsigned char` (`uint8_t`).
 */
#define CUDYN_TYPE_UINT8 2

/**
 * `cudyn_arg_type.scalar`: `short` (`int16_t`).
 */
#define CUDYN_TYPE_INT16 3

/**
 * `cudyn_arg_type.scalar`: `unsigned short` (`uint16_t`).
 */
#define CUDYN_TYPE_UINT16 4

/**
 * `cudyn_arg_type.scalar`: `int` (`int32_t`).
 */
#define CUDYN_TYPE_INT32 5

/**
 * `cudyn_arg_type.scalar`: `unsigned int` (`uint32_t`).
 */
#define CUDYN_TYPE_UINT32 6

/**
 * `cudyn_arg_type.scalar`: `long long` or `long` (`int64_t`).
 */
#define CUDYN_TYPE_INT64 7

/**
 * `cudyn_arg_type.scalar`: `unsigned long long`, `unsigned long` or `size_t` (`uint64_t`).
 */
#define CUDYN_TYPE_UINT64 8

/**
 * `cudyn_arg_type.scalar`: `float`.
 */
#define CUDYN_TYPE_FLOAT 9

/**
 * `cudyn_arg_type.scalar`: `double`.
 */
#define CUDYN_TYPE_DOUBLE 10

/**
 * `cudyn_arg_type.scalar`: `__half`.
 */
#define CUDYN_TYPE_HALF 11

/**
 * `cudyn_arg_type.scalar`: `__nv_bfloat16`.
 */
#define CUDYN_TYPE_BFLOAT16 12

/**
 * `cudyn_arg_type.indirection`: the value itself.
 */
#define CUDYN_VALUE 0

/**
 * `cudyn_arg_type.indirection`: a device address of memory the kernel only reads (`const T*`).
 */
#define CUDYN_CONST_POINTER 1

/**
 * `cudyn_arg_type.indirection`: a device address of memory the kernel may write (`T*`).
 */
#define CUDYN_POINTER 2

/**
 * What a cudyn C function returns: `CUDYN_SUCCESS` (0), or the kind of failure. On a failure
 * `cudyn_last_error()` holds cudyn's full message, which says what failed and what to do.
 */
typedef enum {
  /**
   * The call succeeded.
   */
  CUDYN_SUCCESS = 0,
  /**
   * An argument is invalid: a null pointer, a handle that is not live (freed, or not made by
   * cudyn), text that is not UTF-8, a value out of range, a range outside a buffer. Nothing
   * was done.
   */
  CUDYN_ERROR_INVALID_ARGUMENT = 1,
  /**
   * No usable GPU: the CUDA driver was not found, or it reports no device. Compiling for the
   * current GPU needs one too (name an architecture instead).
   */
  CUDYN_ERROR_NO_GPU = 2,
  /**
   * A CUDA library cudyn needs (runtime, NVRTC, nvJitLink, ...) was not found, could not be
   * opened, or is too old.
   */
  CUDYN_ERROR_CUDA_LIBRARY = 3,
  /**
   * Device code was refused before the driver saw it: not device code, damaged, or needing a
   * link step first.
   */
  CUDYN_ERROR_INVALID_IMAGE = 4,
  /**
   * Compiling or linking failed; the message carries the compiler's log.
   */
  CUDYN_ERROR_COMPILE = 5,
  /**
   * No kernel of that name, or a name that fits several kernels.
   */
  CUDYN_ERROR_KERNEL_NOT_FOUND = 6,
  /**
   * A launch was refused by cudyn's checks (argument count or sizes, configuration beyond
   * the device's limits): nothing was launched.
   */
  CUDYN_ERROR_LAUNCH = 7,
  /**
   * A CUDA call failed (the message names the call and the CUDA error).
   */
  CUDYN_ERROR_CUDA = 8,
  /**
   * A file could not be read, or the compile cache could not be used.
   */
  CUDYN_ERROR_IO = 9,
  /**
   * A bug in cudyn: a panic was caught at the C boundary. Please report the message.
   */
  CUDYN_ERROR_INTERNAL = 10,
  /**
   * Any other failure; the message says what.
   */
  CUDYN_ERROR_OTHER = 11,
} cudyn_status;

/**
 * Device memory on the device that was current when it was allocated.
 */
typedef struct cudyn_buffer cudyn_buffer;

/**
 * A kernel handle. One taken from a library keeps that library loaded until it is released;
 * one wrapped from a foreign handle (`cudyn_kernel_from_raw`) borrows it.
 */
typedef struct cudyn_kernel cudyn_kernel;

/**
 * Device code loaded by cudyn: a reference to a loaded library. The library is released when
 * its last handle is unloaded and the last kernel taken from it is released (then unloaded, or
 * kept for a later identical load within cudyn's retention limits).
 */
typedef struct cudyn_library cudyn_library;

/**
 * A stream on the device that was current when it was made.
 */
typedef struct cudyn_stream cudyn_stream;

/**
 * Where one kernel parameter lies in the kernel's parameter buffer. The driver reports offset
 * and size only; a parameter's alignment is at most the largest power of two dividing its
 * offset (and is the C alignment of its device type).
 */
typedef struct {
  /**
   * Byte offset from the start of the parameter buffer.
   */
  size_t offset;
  /**
   * Size in bytes: what `args[i]` of `cudyn_launch` must point to.
   */
  size_t size;
} cudyn_param_layout;

/**
 * Grid or block dimensions.
 */
typedef struct {
  /**
   * Extent in x.
   */
  uint32_t x;
  /**
   * Extent in y (1 for a one-dimensional launch).
   */
  uint32_t y;
  /**
   * Extent in z (1 for a one- or two-dimensional launch).
   */
  uint32_t z;
} cudyn_dim3;

/**
 * How a kernel is launched.
 */
typedef struct {
  /**
   * Blocks in the grid.
   */
  cudyn_dim3 grid;
  /**
   * Threads per block.
   */
  cudyn_dim3 block;
  /**
   * Dynamic shared memory per block, in bytes.
   */
  uint32_t shared_mem_bytes;
  /**
   * The stream, or null for the legacy default stream.
   */
  const cudyn_stream *stream;
} cudyn_launch_config;

/**
 * A launch configuration with what `cudyn_launch_config` cannot say: a cooperative launch (its
 * blocks may synchronize grid-wide; the grid must fit on the device at once, which is checked)
 * and thread block clusters.
 */
typedef struct {
  /**
   * Grid, block, shared memory and stream.
   */
  cudyn_launch_config base;
  /**
   * Whether the launch is cooperative (`cudaLaunchCooperativeKernel`).
   */
  bool cooperative;
  /**
   * Blocks per cluster; all zero for no clusters.
   */
  cudyn_dim3 cluster;
} cudyn_launch_config_ex;

/**
 * What a launch argument is: a scalar (`CUDYN_TYPE_*`) by value, or a pointer to such scalars,
 * read-only or not. `{CUDYN_TYPE_FLOAT, CUDYN_CONST_POINTER}` is a `const float*`;
 * `{CUDYN_TYPE_UNKNOWN, CUDYN_POINTER}` a pointer to anything the kernel may write.
 */
typedef struct {
  /**
   * A `CUDYN_TYPE_*`: the value's type, or the pointee's.
   */
  uint32_t scalar;
  /**
   * `CUDYN_VALUE`, `CUDYN_CONST_POINTER` or `CUDYN_POINTER`.
   */
  uint32_t indirection;
} cudyn_arg_type;

/**
 * Options for loading device code. Start from `cudyn_load_options_default()` and change what
 * you need; a null options pointer means the defaults.
 */
typedef struct {
  /**
   * JIT optimization level 0 to 4, or -1 for the JIT's default (4). Used only for PTX.
   */
  int32_t optimization_level;
  /**
   * Most registers a thread may use, or 0 for no limit. Used only for PTX.
   */
  uint32_t max_registers;
  /**
   * Generate debug information when JIT-compiling PTX.
   */
  bool debug_info;
  /**
   * Generate line information when JIT-compiling PTX.
   */
  bool line_info;
  /**
   * Make the JIT's info log verbose.
   */
  bool verbose_log;
  /**
   * Capacity of each JIT log (info and error) in bytes, or 0 for the default (16 KiB).
   */
  size_t log_capacity;
  /**
   * Let the driver use the image in place (`CU_LIBRARY_BINARY_IS_PRESERVED`); cudyn keeps its
   * own copy of the bytes alive until the library is unloaded.
   */
  bool preserve_binary;
  /**
   * `CUDYN_BACKEND_PREFERRED`, `CUDYN_BACKEND_RUNTIME` or `CUDYN_BACKEND_DRIVER`.
   */
  int32_t backend;
  /**
   * `CUDYN_SHARING_AUTO`, `CUDYN_SHARING_ALWAYS` or `CUDYN_SHARING_NEVER`: whether this load
   * may share one loaded library with other loads of the same code, Rust's included.
   */
  int32_t sharing;
} cudyn_load_options;

/**
 * How `cudyn_library_compile` compiles. Zero-initialize it (`= {0}` in C, `{}` in C++) and set
 * what you need: every field's zero is its default.
 */
typedef struct {
  /**
   * The name NVRTC reports the source under in its log; null for `"program.cu"`.
   */
  const char *name;
  /**
   * The target architecture (`"sm_90"`, `"90"`, `"9.0"`); null for the current GPU's.
   */
  const char *arch;
  /**
   * NVRTC options passed as they are (`"-DBLOCK=256"`, `"--use_fast_math"`).
   */
  const char *const *options;
  /**
   * The number of entries of `options`.
   */
  size_t option_count;
  /**
   * C++ names to instantiate and find kernels by (`"saxpy<float>"`): after the load,
   * `cudyn_library_kernel` accepts them as kernel names.
   */
  const char *const *name_expressions;
  /**
   * The number of entries of `name_expressions`.
   */
  size_t name_expression_count;
} cudyn_compile_options;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The version of cudyn, such as `"0.1.0"`. The text is static.
 */
const char *cudyn_version(void);

/**
 * Frees a string returned by a cudyn function (`cudyn_toolchain_report`, `cudyn_kernel_name`).
 * A null pointer is allowed and does nothing. Any other pointer, or a string freed already, is
 * `CUDYN_ERROR_INVALID_ARGUMENT` and is left alone.
 */
cudyn_status cudyn_string_free(char *text);

/**
 * What CUDA cudyn finds here, as text: each CUDA library with its version and path (or why it
 * is missing) and the GPUs, then any warnings; the `cudyn doctor` command prints more.
 *
 * On success `*report` is a new string the caller frees with `cudyn_string_free`.
 *
 * # Safety
 * `report` is null (refused) or valid for writing a pointer.
 */
cudyn_status cudyn_toolchain_report(char **report);

/**
 * The number of GPUs the driver reports. Without a driver: `CUDYN_ERROR_NO_GPU`, with the
 * places searched in the message.
 *
 * # Safety
 * `count` is null (refused) or valid for writing a `size_t`.
 */
cudyn_status cudyn_device_count(size_t *count);

/**
 * Makes GPU `ordinal` the calling thread's current device: later allocations, streams, loads
 * and launches of this thread go to it.
 */
cudyn_status cudyn_set_device(size_t ordinal);

/**
 * Waits until all work on the calling thread's current device is done, and reports the first
 * failure of that work (a kernel that faulted).
 */
cudyn_status cudyn_synchronize(void);

/**
 * The kernel named `name` in `library` (`cudaLibraryGetKernel`): its symbol (the plain name of
 * an `extern "C"` kernel), a name expression it was compiled with, or its C++ name
 * (`"axpy<float>"`, `"scale(float*, int)"`). A name that fits no kernel is
 * `CUDYN_ERROR_KERNEL_NOT_FOUND`, listing the library's kernels nearest first.
 *
 * On success `*kernel` is a new handle; release it with `cudyn_kernel_release`. It keeps the
 * library loaded even after `cudyn_library_unload`.
 *
 * # Safety
 * `name` is a NUL-terminated UTF-8 string; `kernel` is valid for writing a pointer. Null `name`
 * or `kernel` is refused.
 */
cudyn_status cudyn_library_kernel(const cudyn_library *library,
                                  const char *name,
                                  cudyn_kernel **kernel);

/**
 * Wraps a kernel handle made elsewhere: a `cudaKernel_t` (from `cudaGetKernel` on a
 * `__global__` function of the program, or `cudaLibraryGetKernel`) or a `CUkernel`, which are
 * the same handle, possibly from another library with its own CUDA runtime.
 *
 * The handle is borrowed: cudyn never unloads what it belongs to, and releasing the
 * `cudyn_kernel` leaves it as it is. Its parameter layout is read from the driver
 * (`cuKernelGetParamInfo`, CUDA 12.4+), so the checked launch works for it too.
 *
 * On success `*kernel` is a new handle; release it with `cudyn_kernel_release`.
 *
 * # Safety
 * `raw` is a valid kernel handle, and the library or program it belongs to stays loaded while
 * the returned handle lives (a `cudaGetKernel` handle lives as long as the program's CUDA
 * runtime); `kernel` is valid for writing a pointer. Null `raw` or `kernel` is refused.
 */
cudyn_status cudyn_kernel_from_raw(void *raw, cudyn_kernel **kernel);

/**
 * The kernel's raw handle, a `CUkernel` that is also a `cudaKernel_t`: pass it to another
 * library, which may launch it with `cudaLaunchKernel((const void*)raw, ...)` or
 * `cuLaunchKernel`. It stays valid while this `cudyn_kernel` lives.
 *
 * # Safety
 * `raw` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_kernel_raw(const cudyn_kernel *kernel, void **raw);

/**
 * The kernel's name (its symbol: mangled for kernels without C linkage). On success `*name` is
 * a new string the caller frees with `cudyn_string_free`.
 *
 * # Safety
 * `name` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_kernel_name(const cudyn_kernel *kernel, char **name);

/**
 * The number of parameters of the kernel (read from the driver once per kernel, in the current
 * device's context).
 *
 * # Safety
 * `count` is valid for writing a `size_t` (null is refused).
 */
cudyn_status cudyn_kernel_param_count(const cudyn_kernel *kernel, size_t *count);

/**
 * The layout of parameter `index` (from 0) of the kernel; an index past the last parameter is
 * `CUDYN_ERROR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `layout` is valid for writing a `cudyn_param_layout` (null is refused).
 */
cudyn_status cudyn_kernel_param(const cudyn_kernel *kernel,
                                size_t index,
                                cudyn_param_layout *layout);

/**
 * Gives up this kernel handle. A kernel from a library lets that library be unloaded once
 * nothing else holds it; a wrapped foreign handle is left as it is. Null does nothing; a
 * handle released already is `CUDYN_ERROR_INVALID_ARGUMENT`.
 */
cudyn_status cudyn_kernel_release(cudyn_kernel *kernel);

/**
 * Launches the kernel with the argument array `args` after cudyn's checks; nothing reaches the
 * driver when one fails (`CUDYN_ERROR_LAUNCH`, the message naming the difference).
 *
 * `args[i]` points to the value of parameter `i`, as for `cudaLaunchKernel`; a buffer is passed
 * as its device address (`cudyn_buffer_address`), a pointer to a `uint64_t` holding it.
 *
 * Checked before the launch: the handles are live; `arg_count` equals the kernel's parameter
 * count; no `args[i]` is null; when `arg_sizes` is not null, `arg_sizes[i]` equals parameter
 * `i`'s size (pass `sizeof` of each argument: this catches a `double` for a `float` or an
 * `int` for a `size_t`); and the configuration is within the current device's limits (grid and
 * block extents, threads per block, shared memory). Without `arg_sizes` the sizes are taken
 * from the kernel's parameter layout (`cudyn_kernel_param`). To have the argument types
 * checked too, and for cooperative and cluster launches, use `cudyn_launch_ex`.
 *
 * The launch is asynchronous: `cudyn_synchronize`, `cudyn_stream_synchronize` or a copy on the
 * default stream waits for it.
 *
 * # Safety
 * `config` points to a launch configuration; `args` points to `arg_count` pointers (it may be
 * null when `arg_count` is 0), and `args[i]` to at least parameter `i`'s size in readable bytes
 * holding a value of the parameter's device type, for the duration of the call; `arg_sizes` is
 * null or points to `arg_count` sizes. And the launch-safety contract of cudyn's
 * `Kernel::launch`: every device address passed points to live device memory of the
 * parameter's pointee type, the kernel accesses memory only inside the buffers it is given
 * (the counts passed agree with their sizes), and until the kernel completes no memory it uses
 * is freed and no other work writes memory it reads or touches memory it writes.
 */
cudyn_status cudyn_launch(const cudyn_kernel *kernel,
                          const cudyn_launch_config *config,
                          void **args,
                          size_t arg_count,
                          const size_t *arg_sizes);

/**
 * `cudyn_launch` with the argument types checked and the launches it cannot make: each
 * `arg_types[i]` says what `args[i]` is (`CUDYN_TYPE_INT32`, a `CUDYN_POINTER` to
 * `CUDYN_TYPE_FLOAT`, ...), and where the kernel's parameter types are known (a C++ kernel's
 * mangled name, a kernel loaded from PTX; see `cudyn_kernel_param_type`), an argument of
 * another type is refused before the driver, the message naming both types: a `float` for an
 * `int`, an `unsigned int` for an `int`, a `CUDYN_CONST_POINTER` for a pointer the kernel may
 * write. `arg_types` may be null: the arguments are then checked by size only, as by
 * `cudyn_launch`. `config->cooperative` and `config->cluster` make a cooperative or cluster
 * launch.
 *
 * # Safety
 * As `cudyn_launch`, with `config` pointing to a `cudyn_launch_config_ex` and `arg_types` null
 * or pointing to `arg_count` types.
 */
cudyn_status cudyn_launch_ex(const cudyn_kernel *kernel,
                             const cudyn_launch_config_ex *config,
                             void **args,
                             size_t arg_count,
                             const size_t *arg_sizes,
                             const cudyn_arg_type *arg_types);

/**
 * Runs every check `cudyn_launch_ex` makes with these arguments and launches nothing:
 * `CUDYN_SUCCESS` when the launch would reach the driver, else the status and message the
 * launch would give. `args` may be null (the values are not read).
 *
 * # Safety
 * `config` points to a `cudyn_launch_config_ex`; `arg_sizes` and `arg_types` are null or point
 * to `arg_count` entries.
 */
cudyn_status cudyn_launch_check(const cudyn_kernel *kernel,
                                const cudyn_launch_config_ex *config,
                                size_t arg_count,
                                const size_t *arg_sizes,
                                const cudyn_arg_type *arg_types);

/**
 * The default load options: JIT defaults, the preferred backend.
 */
cudyn_load_options cudyn_load_options_default(void);

/**
 * Loads a .fatbin, .cubin or .ptx file. The file is read whole and checked before the driver
 * sees it (a damaged image is `CUDYN_ERROR_INVALID_IMAGE`, not a crash in the driver).
 *
 * On success `*library` is a new handle; unload it with `cudyn_library_unload`.
 *
 * # Safety
 * `path` is a NUL-terminated UTF-8 string; `options` is null or points to load options;
 * `library` is valid for writing a pointer. Null `path` or `library` is refused.
 */
cudyn_status cudyn_library_load_file(const char *path,
                                     const cudyn_load_options *options,
                                     cudyn_library **library);

/**
 * Loads device code from memory: a cubin, a fatbin or PTX text (`cudaLibraryLoadData`). The
 * `size` bytes are checked against the image's own headers first; the driver never reads
 * beyond them. cudyn copies what it needs: `image` may be freed after the call.
 *
 * On success `*library` is a new handle; unload it with `cudyn_library_unload`.
 *
 * # Safety
 * `image` points to `size` readable bytes; `options` is null or points to load options;
 * `library` is valid for writing a pointer. Null `image` or `library` is refused.
 */
cudyn_status cudyn_library_load_data(const void *image,
                                     size_t size,
                                     const cudyn_load_options *options,
                                     cudyn_library **library);

/**
 * Compiles CUDA C++ `source` with NVRTC (through cudyn's compile cache) for the current GPU, or
 * for `compile->arch`, and loads the result. A source that does not compile is
 * `CUDYN_ERROR_COMPILE`, with NVRTC's log and the source lines it points at in the message.
 *
 * On success `*library` is a new handle; unload it with `cudyn_library_unload`.
 *
 * # Safety
 * `source` is a NUL-terminated UTF-8 string; `compile` is null (defaults) or points to compile
 * options whose pointers are valid as documented; `load` is null or points to load options;
 * `library` is valid for writing a pointer. Null `source` or `library` is refused.
 */
cudyn_status cudyn_library_compile(const char *source,
                                   const cudyn_compile_options *compile,
                                   const cudyn_load_options *load,
                                   cudyn_library **library);

/**
 * The library's raw handle, a `CUlibrary` that is also a `cudaLibrary_t`, for use with the
 * CUDA runtime or driver. It stays valid while this library handle or a kernel from it lives.
 *
 * # Safety
 * `raw` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_library_raw(const cudyn_library *library, void **raw);

/**
 * Gives up this handle. The library is unloaded once no handle and no kernel taken from it
 * (`cudyn_kernel`) remains: kernels keep their library loaded. Null does nothing; a handle
 * unloaded already is `CUDYN_ERROR_INVALID_ARGUMENT`.
 */
cudyn_status cudyn_library_unload(cudyn_library *library);

/**
 * `bytes` bytes of device memory on the calling thread's current device, contents
 * unspecified. A buffer of 0 bytes allocates nothing (its address is 0). Free it with
 * `cudyn_buffer_free`.
 *
 * # Safety
 * `buffer` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_buffer_alloc(size_t bytes, cudyn_buffer **buffer);

/**
 * The buffer's device address (a `CUdeviceptr`): what a kernel's pointer parameter receives.
 * Pass a pointer to a `uint64_t` holding it in the argument array of `cudyn_launch`.
 *
 * # Safety
 * `address` is valid for writing a `uint64_t` (null is refused).
 */
cudyn_status cudyn_buffer_address(const cudyn_buffer *buffer, uint64_t *address);

/**
 * The buffer's size in bytes.
 *
 * # Safety
 * `bytes` is valid for writing a `size_t` (null is refused).
 */
cudyn_status cudyn_buffer_size(const cudyn_buffer *buffer, size_t *bytes);

/**
 * Copies `bytes` bytes from host memory at `source` into the buffer at byte `offset`. The
 * range must lie inside the buffer. Like `cudaMemcpy`, it returns when the copy is done and
 * runs after earlier work on the legacy default stream.
 *
 * # Safety
 * `source` points to `bytes` readable bytes (it may be null when `bytes` is 0).
 */
cudyn_status cudyn_buffer_copy_from_host(cudyn_buffer *buffer,
                                         size_t offset,
                                         const void *source,
                                         size_t bytes);

/**
 * Copies `bytes` bytes of the buffer from byte `offset` into host memory at `destination`.
 * The range must lie inside the buffer. Like `cudaMemcpy`, it waits for earlier work on the
 * legacy default stream (a kernel launched without a stream) and returns when the copy is done.
 *
 * # Safety
 * `destination` points to `bytes` writable bytes (it may be null when `bytes` is 0).
 */
cudyn_status cudyn_buffer_copy_to_host(const cudyn_buffer *buffer,
                                       size_t offset,
                                       void *destination,
                                       size_t bytes);

/**
 * Sets `bytes` bytes of the buffer from byte `offset` to `value` (`cudaMemset`). The range
 * must lie inside the buffer.
 */
cudyn_status cudyn_buffer_fill(cudyn_buffer *buffer, size_t offset, uint8_t value, size_t bytes);

/**
 * Frees the buffer, in the context it was allocated in, whichever thread calls. Like
 * `cudaFree`, it does not wait for kernels still using it: free it only after they completed.
 * Null does nothing; a buffer freed already is `CUDYN_ERROR_INVALID_ARGUMENT`.
 */
cudyn_status cudyn_buffer_free(cudyn_buffer *buffer);

/**
 * The message of the last failed cudyn call on this thread: what failed and what to do, with
 * any compiler or JIT log. An empty string when no call on this thread has failed.
 *
 * The text belongs to cudyn and stays valid until the next failing cudyn call on this thread;
 * successful calls leave it as it is. Copy it to keep it longer.
 */
const char *cudyn_last_error(void);

/**
 * The name of a status code, such as `"CUDYN_ERROR_LAUNCH"`; `"CUDYN_STATUS_UNKNOWN"` for a
 * number that is no status. The text is static.
 */
const char *cudyn_status_name(int status);

/**
 * A new stream on the calling thread's current device; like `cudaStreamCreate`'s, it
 * synchronizes with the legacy default stream. Destroy it with `cudyn_stream_destroy`.
 *
 * # Safety
 * `stream` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_stream_create(cudyn_stream **stream);

/**
 * Waits until all work in the stream is done.
 */
cudyn_status cudyn_stream_synchronize(const cudyn_stream *stream);

/**
 * The stream's raw handle, a `CUstream` that is also a `cudaStream_t`. It stays valid until
 * the stream is destroyed.
 *
 * # Safety
 * `raw` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_stream_raw(const cudyn_stream *stream, void **raw);

/**
 * Destroys the stream, in the context it was made in, whichever thread calls. Work already in
 * it still completes. Null does nothing; a stream destroyed already is
 * `CUDYN_ERROR_INVALID_ARGUMENT`.
 */
cudyn_status cudyn_stream_destroy(cudyn_stream *stream);

/**
 * The C type of parameter `index` (from 0) of the kernel, as its device code says it: on
 * success `*spelling` is a new string (`"const float*"`, `"int"`, `"32-bit integer"` from
 * PTX), freed with `cudyn_string_free`, or null when only the parameter's size is known (an
 * `extern "C"` kernel from a cubin), which launches check by size only. An index past the last
 * parameter is `CUDYN_ERROR_INVALID_ARGUMENT`.
 *
 * # Safety
 * `spelling` is valid for writing a pointer (null is refused).
 */
cudyn_status cudyn_kernel_param_type(const cudyn_kernel *kernel, size_t index, char **spelling);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* CUDYN_H */
