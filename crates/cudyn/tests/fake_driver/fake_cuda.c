/* A fake CUDA driver (libcuda.so.1) for measuring and testing cudyn's host-side launch path
 * without a GPU: two devices, device 0 with an H200's limits and device 1 a smaller one (512
 * threads per block), a primary context each, and the entry points cudyn calls from opening
 * the driver to a launch, each answering at once with plausible outputs. Nothing runs on any
 * device.
 *
 * A kernel handle is the address of a `struct fake_kernel` the caller built (see mod.rs beside
 * this file, which wraps it with cudyn's `Kernel::from_raw`): its parameter layout is what
 * cuKernelGetParamInfo reports, and cuLaunchKernel copies that many argument bytes into a
 * parameter buffer, as the real driver does, so that a launch reads every argument. A module
 * (for cudarc, which loads modules) is loaded from the text of such an address in hexadecimal,
 * and its one function is that kernel, whatever name is asked for. A library (the library API)
 * loads from any image, which it does not read (cudyn checked it before the call), and every
 * kernel looked up in it is one fake kernel without parameters.
 *
 * Every context has an id (cuCtxGetId), and cuKernelGetFunction gives a kernel's function in
 * the current context: a copy of the kernel, bound to the context's id.
 * fake_cuda_remake_context() destroys the driver's one context besides the primary ones and
 * makes a new one on device 0 at the same address, as the real driver may (a context created
 * after another was destroyed, or a primary context reset): the same handle with a new id. A
 * launch refuses a function bound to an id that is gone, as the real driver's is unloaded.
 * fake_cuda_function_launches() counts the calling thread's launches of a function rather than
 * a kernel handle.
 *
 * Every entry point counts its calls on the calling thread; fake_cuda_calls(name) reads one
 * count and fake_cuda_total_calls() all of them, which lets a test assert exactly which driver
 * calls a launch makes.
 *
 * fake_cuda_set_cold_caches(1) makes every launch leave the caller's caches cold, as a real
 * launch does (a few microseconds of the driver's own code and data): it writes 64 KiB of data
 * and runs about 28 KiB of straight-line code, more than a core's L1 data and instruction
 * caches hold. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct fake_context *CUcontext;
typedef void *CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
};

struct fake_param {
    size_t offset;
    size_t size;
};

struct fake_kernel {
    const char *name;
    size_t count;
    const struct fake_param *params;
};

struct fake_context {
    CUdevice device;
    unsigned long long id;
};

/* The calls counted, one slot each; the names are the exported symbols. */
#define FAKE_CALLS(X)                                                                           \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)   \
    X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)           \
    X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2)   \
    X(cuCtxPopCurrent_v2) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuMemAlloc_v2)               \
    X(cuMemFree_v2) X(cuMemsetD8_v2) X(cuKernelGetName) X(cuKernelGetParamInfo)                \
    X(cuKernelGetAttribute) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchKernel)    \
    X(cuLaunchKernelEx) X(cuDevicePrimaryCtxRelease_v2) X(cuModuleLoadData)                    \
    X(cuModuleGetFunction) X(cuModuleUnload) X(cuStreamSynchronize) X(cuStreamWaitEvent)        \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventDestroy_v2)              \
    X(cuLibraryLoadData) X(cuLibraryGetKernel) X(cuLibraryUnload) X(cuCtxGetId)                 \
    X(cuKernelGetFunction)

#define FAKE_SLOT(name) SLOT_##name,
enum { FAKE_CALLS(FAKE_SLOT) SLOT_COUNT };
#define FAKE_NAME(name) #name,
static const char *const call_names[SLOT_COUNT] = {FAKE_CALLS(FAKE_NAME)};

/* Per thread, so that counting costs a plain increment (no locked instruction) and a test
 * reads what its own thread called. */
static __thread unsigned long long calls[SLOT_COUNT];
#define COUNT(name) (calls[SLOT_##name] += 1)

#define DEVICES 2
/* The most threads per block of each device. */
static const int max_threads[DEVICES] = {1024, 512};

static int initialized;
static struct fake_context primary[DEVICES] = {{0, 1}, {1, 2}};
/* The id the next context (or a reset primary context) gets: ids are never reused. */
static unsigned long long next_context_id = DEVICES + 1;
/* The thread's current context, a thread-local as in the real driver. */
static __thread CUcontext current;
static unsigned long long next_allocation = 0x7f0000000000ull;
/* Where cuLaunchKernel packs the arguments (4 KiB, the classic parameter limit, is plenty). */
static __thread unsigned char parameter_buffer[4096];

static int cold_caches;
static unsigned char scratch[64 * 1024];
static unsigned long long code_walk_result;

/* 2048 dependent steps, each of distinct code: the compiler can merge none of them. */
#define STEP(n) x = (x ^ (x >> 13)) * 0x9E3779B97F4A7C15ull + (n);
#define STEP4(n) STEP(n) STEP(n + 1) STEP(n + 2) STEP(n + 3)
#define STEP16(n) STEP4(n) STEP4(n + 4) STEP4(n + 8) STEP4(n + 12)
#define STEP64(n) STEP16(n) STEP16(n + 16) STEP16(n + 32) STEP16(n + 48)
#define STEP256(n) STEP64(n) STEP64(n + 64) STEP64(n + 128) STEP64(n + 192)
#define STEP1024(n) STEP256(n) STEP256(n + 256) STEP256(n + 512) STEP256(n + 768)

static __attribute__((noinline)) unsigned long long code_walk(unsigned long long x) {
    STEP1024(0) STEP1024(1024)
    return x;
}

static void leave_caches_cold(void) {
    if (!__atomic_load_n(&cold_caches, __ATOMIC_RELAXED)) {
        return;
    }
    for (size_t line = 0; line < sizeof scratch; line += 64) {
        unsigned char value = __atomic_load_n(&scratch[line], __ATOMIC_RELAXED);
        __atomic_store_n(&scratch[line], value + 1, __ATOMIC_RELAXED);
    }
    unsigned long long walked = code_walk(__atomic_load_n(&code_walk_result, __ATOMIC_RELAXED));
    __atomic_store_n(&code_walk_result, walked, __ATOMIC_RELAXED);
}

void fake_cuda_set_cold_caches(int on) {
    __atomic_store_n(&cold_caches, on, __ATOMIC_RELAXED);
}

unsigned long long fake_cuda_calls(const char *name) {
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        if (strcmp(call_names[slot], name) == 0) {
            return calls[slot];
        }
    }
    return (unsigned long long)-1;
}

unsigned long long fake_cuda_total_calls(void) {
    unsigned long long total = 0;
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        total += calls[slot];
    }
    return total;
}

CUresult cuInit(unsigned int flags) {
    COUNT(cuInit);
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    initialized = 1;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    COUNT(cuDriverGetVersion);
    *version = 13000;
    return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult status, const char **name) {
    COUNT(cuGetErrorName);
    switch (status) {
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; return CUDA_SUCCESS;
    default: *name = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuGetErrorString(CUresult status, const char **message) {
    COUNT(cuGetErrorString);
    *message = status == CUDA_SUCCESS ? "no error" : "an error of the fake CUDA driver";
    return CUDA_SUCCESS;
}

#define REQUIRE_INIT()                                                                          \
    do {                                                                                        \
        if (!initialized) {                                                                     \
            return CUDA_ERROR_NOT_INITIALIZED;                                                  \
        }                                                                                       \
    } while (0)

#define REQUIRE_CONTEXT()                                                                       \
    do {                                                                                        \
        REQUIRE_INIT();                                                                         \
        if (current == NULL) {                                                                  \
            return CUDA_ERROR_INVALID_CONTEXT;                                                  \
        }                                                                                       \
    } while (0)

#define REQUIRE_DEVICE(device)                                                                  \
    do {                                                                                        \
        if ((device) < 0 || (device) >= DEVICES) {                                              \
            return CUDA_ERROR_INVALID_DEVICE;                                                   \
        }                                                                                       \
    } while (0)

CUresult cuDeviceGetCount(int *count) {
    COUNT(cuDeviceGetCount);
    REQUIRE_INIT();
    *count = DEVICES;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    COUNT(cuDeviceGet);
    REQUIRE_INIT();
    REQUIRE_DEVICE(ordinal);
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    COUNT(cuDeviceGetName);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    if (length <= 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    strncpy(name, device == 0 ? "Fake H200" : "Fake small GPU", (size_t)length - 1);
    name[length - 1] = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    COUNT(cuDeviceGetAttribute);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    switch (attribute) {
    case 1: *value = max_threads[device]; break;    /* max threads per block */
    case 2: case 3: *value = max_threads[device]; break; /* max block x, y */
    case 4: *value = 64; break;                     /* max block z */
    case 5: *value = 2147483647; break;             /* max grid x */
    case 6: case 7: *value = 65535; break;          /* max grid y, z */
    case 8: *value = 48 * 1024; break;              /* shared memory per block */
    case 16: *value = 132; break;                   /* multiprocessors */
    case 75: *value = 9; break;                     /* compute capability */
    case 76: *value = 0; break;
    case 95: *value = 1; break;                     /* cooperative launch */
    case 97: *value = 227 * 1024; break;            /* shared memory per block, opt-in */
    case 120: *value = 1; break;                    /* cluster launch */
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    COUNT(cuDeviceTotalMem_v2);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    *bytes = (size_t)141 << 30;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    COUNT(cuDevicePrimaryCtxRetain);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    *context = &primary[device];
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *context) {
    COUNT(cuCtxGetCurrent);
    REQUIRE_INIT();
    *context = current;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    COUNT(cuCtxSetCurrent);
    REQUIRE_INIT();
    current = context;
    return CUDA_SUCCESS;
}

/* One level of pushing is all cudyn's calls in another context need. */
static __thread CUcontext pushed;

CUresult cuCtxPushCurrent_v2(CUcontext context) {
    COUNT(cuCtxPushCurrent_v2);
    REQUIRE_INIT();
    pushed = current;
    current = context;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *context) {
    COUNT(cuCtxPopCurrent_v2);
    REQUIRE_CONTEXT();
    if (context != NULL) {
        *context = current;
    }
    current = pushed;
    pushed = NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext context, unsigned long long *id) {
    COUNT(cuCtxGetId);
    REQUIRE_INIT();
    if (context == NULL) {
        context = current;
    }
    if (context == NULL || id == NULL) {
        return context == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_VALUE;
    }
    *id = __atomic_load_n(&context->id, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* The one context that is not a primary one: made (again) by fake_cuda_remake_context. */
static struct fake_context remade = {0, 0};

CUcontext fake_cuda_remake_context(void) {
    unsigned long long id = __atomic_fetch_add(&next_context_id, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&remade.id, id, __ATOMIC_RELAXED);
    return &remade;
}

CUresult cuCtxGetDevice(CUdevice *device) {
    COUNT(cuCtxGetDevice);
    REQUIRE_CONTEXT();
    *device = current->device;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    COUNT(cuCtxSynchronize);
    REQUIRE_CONTEXT();
    return CUDA_SUCCESS;
}

/* Addresses that are never dereferenced: there is no device memory. */
CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
    COUNT(cuMemAlloc_v2);
    REQUIRE_CONTEXT();
    *pointer = next_allocation;
    next_allocation += (bytes + 255) & ~(size_t)255;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(unsigned long long pointer) {
    COUNT(cuMemFree_v2);
    REQUIRE_CONTEXT();
    return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(unsigned long long pointer, unsigned char value, size_t bytes) {
    COUNT(cuMemsetD8_v2);
    REQUIRE_CONTEXT();
    (void)value;
    (void)bytes;
    return pointer == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    COUNT(cuDevicePrimaryCtxRelease_v2);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(const struct fake_kernel **module, const char *image) {
    COUNT(cuModuleLoadData);
    REQUIRE_CONTEXT();
    char *end = NULL;
    unsigned long long address = strtoull(image, &end, 16);
    if (address == 0 || end == image) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *module = (const struct fake_kernel *)(uintptr_t)address;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(const struct fake_kernel **function, const struct fake_kernel *module,
                             const char *name) {
    COUNT(cuModuleGetFunction);
    REQUIRE_CONTEXT();
    if (module == NULL || name == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *function = module;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(const struct fake_kernel *module) {
    COUNT(cuModuleUnload);
    REQUIRE_INIT();
    return module == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

/* Allocated per load only to give every library an address of its own. */
struct fake_library {
    char unused;
};

static struct fake_kernel library_kernel = {"library_kernel", 0, NULL};

CUresult cuLibraryLoadData(struct fake_library **library, const void *code, void *jit_options,
                           void **jit_values, unsigned int jit_count, void *library_options,
                           void **library_values, unsigned int library_count) {
    COUNT(cuLibraryLoadData);
    REQUIRE_INIT();
    (void)jit_options, (void)jit_values, (void)library_options, (void)library_values;
    if (library == NULL || code == NULL || jit_count > 32 || library_count > 8) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *library = calloc(1, sizeof **library);
    return *library == NULL ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(const struct fake_kernel **kernel, struct fake_library *library,
                            const char *name) {
    COUNT(cuLibraryGetKernel);
    REQUIRE_INIT();
    if (kernel == NULL || library == NULL || name == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *kernel = &library_kernel;
    return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(struct fake_library *library) {
    COUNT(cuLibraryUnload);
    REQUIRE_INIT();
    if (library == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    free(library);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
    COUNT(cuStreamSynchronize);
    REQUIRE_CONTEXT();
    (void)stream;
    return CUDA_SUCCESS;
}

/* Events record nothing: there is no work to wait for. */
static char event_storage;

CUresult cuEventCreate(void **event, unsigned int flags) {
    COUNT(cuEventCreate);
    REQUIRE_CONTEXT();
    (void)flags;
    *event = &event_storage;
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(void *event, CUstream stream) {
    COUNT(cuEventRecord);
    REQUIRE_CONTEXT();
    (void)stream;
    return event == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuEventSynchronize(void *event) {
    COUNT(cuEventSynchronize);
    REQUIRE_INIT();
    return event == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(void *event) {
    COUNT(cuEventDestroy_v2);
    REQUIRE_INIT();
    return event == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, void *event, unsigned int flags) {
    COUNT(cuStreamWaitEvent);
    REQUIRE_CONTEXT();
    (void)stream;
    return event == NULL || flags != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, const struct fake_kernel *kernel) {
    COUNT(cuKernelGetName);
    REQUIRE_INIT();
    if (kernel == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *name = kernel->name;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetParamInfo(const struct fake_kernel *kernel, size_t index, size_t *offset,
                              size_t *size) {
    COUNT(cuKernelGetParamInfo);
    REQUIRE_INIT();
    if (kernel == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (index >= kernel->count) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *offset = kernel->params[index].offset;
    *size = kernel->params[index].size;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetAttribute(int *value, int attribute, const struct fake_kernel *kernel,
                              CUdevice device) {
    COUNT(cuKernelGetAttribute);
    REQUIRE_INIT();
    REQUIRE_DEVICE(device);
    if (kernel == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    switch (attribute) {
    case 0: *value = max_threads[device]; break; /* max threads per block */
    case 8: *value = 48 * 1024; break; /* max dynamic shared memory */
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const struct fake_kernel *kernel,
                                                     int block_threads, size_t shared_mem_bytes) {
    COUNT(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    REQUIRE_CONTEXT();
    (void)shared_mem_bytes;
    if (kernel == NULL || block_threads <= 0) {
        return kernel == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    }
    *blocks = 2048 / block_threads;
    return CUDA_SUCCESS;
}

/* What both launch calls do: check the handle and the context, and copy every argument into
 * the parameter buffer at its offset. */
/* The functions handed out, each a copy of its kernel bound to one context id; a kernel and
 * a context id have one function, found again by a later call. */
#define FUNCTIONS 64
static struct fake_function {
    struct fake_kernel copy;
    const struct fake_kernel *kernel;
    unsigned long long context_id;
} functions[FUNCTIONS];
static int function_count;
static int functions_lock;
static __thread unsigned long long function_launches;

unsigned long long fake_cuda_function_launches(void) {
    return function_launches;
}

CUresult cuKernelGetFunction(const struct fake_kernel **function,
                             const struct fake_kernel *kernel) {
    COUNT(cuKernelGetFunction);
    REQUIRE_CONTEXT();
    if (function == NULL || kernel == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    unsigned long long id = __atomic_load_n(&current->id, __ATOMIC_RELAXED);
    while (__atomic_exchange_n(&functions_lock, 1, __ATOMIC_ACQUIRE)) {
    }
    int found = 0;
    while (found < function_count &&
           (functions[found].kernel != kernel || functions[found].context_id != id)) {
        found++;
    }
    CUresult status = CUDA_SUCCESS;
    if (found == FUNCTIONS) {
        status = CUDA_ERROR_INVALID_VALUE;
    } else {
        if (found == function_count) {
            functions[found] = (struct fake_function){*kernel, kernel, id};
            function_count++;
        }
        *function = &functions[found].copy;
    }
    __atomic_store_n(&functions_lock, 0, __ATOMIC_RELEASE);
    return status;
}

static CUresult launch(const struct fake_kernel *kernel, void **params, void **extra) {
    REQUIRE_CONTEXT();
    if (kernel == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    uintptr_t address = (uintptr_t)kernel;
    if (address >= (uintptr_t)functions && address < (uintptr_t)(functions + FUNCTIONS)) {
        const struct fake_function *function = (const struct fake_function *)kernel;
        /* A function runs only in the context it was found in, and not after its reset. */
        if (function->context_id != __atomic_load_n(&current->id, __ATOMIC_RELAXED)) {
            return CUDA_ERROR_INVALID_HANDLE;
        }
        function_launches++;
    }
    if (extra != NULL || (kernel->count > 0 && params == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t index = 0; index < kernel->count; index++) {
        const struct fake_param *param = &kernel->params[index];
        if (param->offset + param->size > sizeof parameter_buffer) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        memcpy(parameter_buffer + param->offset, params[index], param->size);
    }
    leave_caches_cold();
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(const struct fake_kernel *kernel, unsigned int grid_x, unsigned int grid_y,
                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                        unsigned int block_z, unsigned int shared_mem_bytes, CUstream stream,
                        void **params, void **extra) {
    COUNT(cuLaunchKernel);
    (void)stream;
    REQUIRE_CONTEXT();
    if (grid_x == 0 || grid_y == 0 || grid_z == 0 || block_x == 0 || block_y == 0 ||
        block_z == 0 ||
        (unsigned long long)block_x * block_y * block_z > (unsigned)max_threads[current->device] ||
        shared_mem_bytes > 227 * 1024) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return launch(kernel, params, extra);
}

struct launch_config {
    unsigned int grid[3];
    unsigned int block[3];
    unsigned int shared_mem_bytes;
    CUstream stream;
    void *attrs;
    unsigned int attr_count;
};

CUresult cuLaunchKernelEx(const struct launch_config *config, const struct fake_kernel *kernel,
                          void **params, void **extra) {
    COUNT(cuLaunchKernelEx);
    if (config == NULL || (config->attr_count > 0 && config->attrs == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return launch(kernel, params, extra);
}
