// cudyn for C++: a header-only wrapper over the C API of cudyn.h (C++17).
//
// Every handle is an RAII class (move-only, released in its destructor); every failure throws
// cudyn::Error, which carries the status and cudyn's full message. Kernel::launch takes the
// arguments as they are (numbers, trivially copyable structs, Buffers for pointer parameters)
// and passes their sizes, so cudyn checks the count and the size of every argument against the
// kernel's parameters before anything is launched.
//
//     auto saxpy = cudyn::Library::compile(source).kernel("saxpy");
//     auto x = cudyn::Buffer::from(host_x);
//     saxpy.launch(cudyn::LaunchConfig::for_elements(n, 256), 2.0f, x, y, out, n);
//     auto result = out.to_vector<float>();
#ifndef CUDYN_HPP
#define CUDYN_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudyn.h"

namespace cudyn {

// A failed cudyn call: status() says the kind, what() cudyn's message.
class Error : public std::runtime_error {
public:
    Error(cudyn_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}

    cudyn_status status() const noexcept { return status_; }

    // The status' name, such as "CUDYN_ERROR_LAUNCH".
    const char *status_name() const noexcept { return cudyn_status_name(status_); }

private:
    cudyn_status status_;
};

namespace detail {

inline void check(cudyn_status status) {
    if (status != CUDYN_SUCCESS) throw Error(status, cudyn_last_error());
}

// A string cudyn allocated, copied and freed.
inline std::string take_string(char *text) {
    std::string copy(text);
    cudyn_string_free(text);
    return copy;
}

// Owns one handle and releases it with Release: move-only.
template <class Handle, cudyn_status (*Release)(Handle *)>
class Owned {
public:
    Owned() noexcept = default;
    explicit Owned(Handle *handle) noexcept : handle_(handle) {}
    Owned(Owned &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Owned &operator=(Owned &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    Owned(const Owned &) = delete;
    Owned &operator=(const Owned &) = delete;
    ~Owned() { reset(); }

    Handle *get() const noexcept { return handle_; }

private:
    void reset() noexcept {
        // A handle this class owns is live: releasing it cannot fail for its argument.
        if (handle_ != nullptr) Release(handle_);
        handle_ = nullptr;
    }

    Handle *handle_ = nullptr;
};

}  // namespace detail

// The version of cudyn, such as "0.1.0".
inline std::string version() { return cudyn_version(); }

// What CUDA cudyn finds here: libraries, versions, GPUs, warnings.
inline std::string toolchain_report() {
    char *report = nullptr;
    detail::check(cudyn_toolchain_report(&report));
    return detail::take_string(report);
}

// The number of GPUs; throws Error with CUDYN_ERROR_NO_GPU without a driver.
inline std::size_t device_count() {
    std::size_t count = 0;
    detail::check(cudyn_device_count(&count));
    return count;
}

// Makes GPU `ordinal` the calling thread's current device.
inline void set_device(std::size_t ordinal) { detail::check(cudyn_set_device(ordinal)); }

// Waits for all work on the calling thread's current device.
inline void synchronize() { detail::check(cudyn_synchronize()); }

// A stream on the current device.
class Stream {
public:
    static Stream create() {
        cudyn_stream *stream = nullptr;
        detail::check(cudyn_stream_create(&stream));
        return Stream(stream);
    }

    void synchronize() const { detail::check(cudyn_stream_synchronize(get())); }

    // The CUstream, which is also a cudaStream_t.
    void *raw() const {
        void *raw = nullptr;
        detail::check(cudyn_stream_raw(get(), &raw));
        return raw;
    }

    const cudyn_stream *get() const noexcept { return owned_.get(); }

private:
    explicit Stream(cudyn_stream *stream) : owned_(stream) {}
    detail::Owned<cudyn_stream, cudyn_stream_destroy> owned_;
};

// Bytes of device memory on the current device. Pass a Buffer to Kernel::launch for a pointer
// parameter: the kernel receives its device address.
class Buffer {
public:
    static Buffer alloc(std::size_t bytes) {
        cudyn_buffer *buffer = nullptr;
        detail::check(cudyn_buffer_alloc(bytes, &buffer));
        return Buffer(buffer);
    }

    // A copy of `data` in device memory.
    template <class T>
    static Buffer from(const std::vector<T> &data) {
        static_assert(std::is_trivially_copyable<T>::value, "device data is copied byte for byte");
        Buffer buffer = alloc(data.size() * sizeof(T));
        buffer.copy_from_host(data.data(), data.size() * sizeof(T));
        return buffer;
    }

    // The contents as `size() / sizeof(T)` values of T.
    template <class T>
    std::vector<T> to_vector() const {
        static_assert(std::is_trivially_copyable<T>::value, "device data is copied byte for byte");
        std::vector<T> data(size() / sizeof(T));
        copy_to_host(data.data(), data.size() * sizeof(T));
        return data;
    }

    void copy_from_host(const void *source, std::size_t bytes, std::size_t offset = 0) {
        detail::check(cudyn_buffer_copy_from_host(owned_.get(), offset, source, bytes));
    }

    void copy_to_host(void *destination, std::size_t bytes, std::size_t offset = 0) const {
        detail::check(cudyn_buffer_copy_to_host(owned_.get(), offset, destination, bytes));
    }

    // Sets every byte to `value`.
    void fill(std::uint8_t value) { detail::check(cudyn_buffer_fill(owned_.get(), 0, value, size())); }

    std::uint64_t address() const {
        std::uint64_t address = 0;
        detail::check(cudyn_buffer_address(owned_.get(), &address));
        return address;
    }

    std::size_t size() const {
        std::size_t bytes = 0;
        detail::check(cudyn_buffer_size(owned_.get(), &bytes));
        return bytes;
    }

private:
    explicit Buffer(cudyn_buffer *buffer) : owned_(buffer) {}
    detail::Owned<cudyn_buffer, cudyn_buffer_free> owned_;
};

// Grid and block, shared memory, stream.
class LaunchConfig {
public:
    LaunchConfig(cudyn_dim3 grid, cudyn_dim3 block) : config_{grid, block, 0, nullptr} {}
    LaunchConfig(std::uint32_t grid, std::uint32_t block) : LaunchConfig({grid, 1, 1}, {block, 1, 1}) {}

    // Enough blocks of `block` threads for `elements` threads.
    static LaunchConfig for_elements(std::size_t elements, std::uint32_t block) {
        return LaunchConfig(static_cast<std::uint32_t>((elements + block - 1) / block), block);
    }

    LaunchConfig &shared_mem(std::uint32_t bytes) {
        config_.shared_mem_bytes = bytes;
        return *this;
    }

    // Launches into `stream`, which must outlive the launch call.
    LaunchConfig &stream(const Stream &stream) {
        config_.stream = stream.get();
        return *this;
    }

    const cudyn_launch_config *get() const noexcept { return &config_; }

private:
    cudyn_launch_config config_;
};

namespace detail {

// What the kernel receives for one argument: the value itself, or a buffer's device address.
template <class T>
T kernel_value(const T &value) {
    static_assert(std::is_trivially_copyable<T>::value,
                  "a kernel argument is a number, a trivially copyable struct or a Buffer");
    return value;
}

inline std::uint64_t kernel_value(const Buffer &buffer) { return buffer.address(); }

}  // namespace detail

// A kernel handle. One from a Library keeps the library loaded; one from Kernel::from_raw
// borrows a foreign handle, which cudyn never unloads.
class Kernel {
public:
    // Wraps a cudaKernel_t or CUkernel made elsewhere (cudaGetKernel, another library); it must
    // stay loaded while this Kernel lives.
    static Kernel from_raw(void *raw) {
        cudyn_kernel *kernel = nullptr;
        detail::check(cudyn_kernel_from_raw(raw, &kernel));
        return Kernel(kernel);
    }

    std::string name() const {
        char *name = nullptr;
        detail::check(cudyn_kernel_name(get(), &name));
        return detail::take_string(name);
    }

    // Offset and size of every parameter, in order.
    std::vector<cudyn_param_layout> params() const {
        std::size_t count = 0;
        detail::check(cudyn_kernel_param_count(get(), &count));
        std::vector<cudyn_param_layout> params(count);
        for (std::size_t i = 0; i < count; i++) detail::check(cudyn_kernel_param(get(), i, &params[i]));
        return params;
    }

    // The CUkernel, which is also a cudaKernel_t, for other libraries and runtimes.
    void *raw() const {
        void *raw = nullptr;
        detail::check(cudyn_kernel_raw(get(), &raw));
        return raw;
    }

    // Launches with `args`, each checked in count and size against the kernel's parameters
    // (Error with CUDYN_ERROR_LAUNCH when one differs: nothing is launched). The contract of
    // cudyn_launch applies: pointer parameters get Buffers of the right element type, large
    // enough for what the kernel accesses, alive until the kernel completes.
    template <class... Args>
    void launch(const LaunchConfig &config, const Args &...args) const {
        auto values = std::make_tuple(detail::kernel_value(args)...);
        std::apply(
            [&](auto &...value) {
                // One extra entry so that a kernel without parameters gets no empty array.
                void *pointers[] = {static_cast<void *>(&value)..., nullptr};
                std::size_t sizes[] = {sizeof(value)..., 0};
                detail::check(cudyn_launch(get(), config.get(), pointers, sizeof...(Args), sizes));
            },
            values);
    }

    const cudyn_kernel *get() const noexcept { return owned_.get(); }

private:
    friend class Library;
    explicit Kernel(cudyn_kernel *kernel) : owned_(kernel) {}
    detail::Owned<cudyn_kernel, cudyn_kernel_release> owned_;
};

// How Library::compile compiles: every field empty is its default.
struct CompileOptions {
    std::string name;                           // "program.cu" when empty
    std::string arch;                           // the current GPU's when empty ("sm_90")
    std::vector<std::string> options;           // NVRTC options, as they are
    std::vector<std::string> name_expressions;  // "saxpy<float>": usable as kernel names
};

// Device code loaded by cudyn, released when this and every Kernel from it are gone (then
// unloaded, or kept for a later identical load within cudyn's retention limits).
class Library {
public:
    static Library load_file(const std::string &path,
                             const cudyn_load_options &options = cudyn_load_options_default()) {
        cudyn_library *library = nullptr;
        detail::check(cudyn_library_load_file(path.c_str(), &options, &library));
        return Library(library);
    }

    static Library load_data(const void *image, std::size_t size,
                             const cudyn_load_options &options = cudyn_load_options_default()) {
        cudyn_library *library = nullptr;
        detail::check(cudyn_library_load_data(image, size, &options, &library));
        return Library(library);
    }

    // Compiles CUDA C++ with NVRTC and loads the result.
    static Library compile(const std::string &source, const CompileOptions &compile = {},
                           const cudyn_load_options &options = cudyn_load_options_default()) {
        auto c_strings = [](const std::vector<std::string> &texts) {
            std::vector<const char *> pointers;
            for (const auto &text : texts) pointers.push_back(text.c_str());
            return pointers;
        };
        std::vector<const char *> nvrtc_options = c_strings(compile.options);
        std::vector<const char *> expressions = c_strings(compile.name_expressions);
        cudyn_compile_options c_options{};
        c_options.name = compile.name.empty() ? nullptr : compile.name.c_str();
        c_options.arch = compile.arch.empty() ? nullptr : compile.arch.c_str();
        c_options.options = nvrtc_options.data();
        c_options.option_count = nvrtc_options.size();
        c_options.name_expressions = expressions.data();
        c_options.name_expression_count = expressions.size();
        cudyn_library *library = nullptr;
        detail::check(cudyn_library_compile(source.c_str(), &c_options, &options, &library));
        return Library(library);
    }

    // The kernel of that name: its symbol, a name expression, or its C++ name.
    Kernel kernel(const std::string &name) const {
        cudyn_kernel *kernel = nullptr;
        detail::check(cudyn_library_kernel(owned_.get(), name.c_str(), &kernel));
        return Kernel(kernel);
    }

    // The CUlibrary, which is also a cudaLibrary_t.
    void *raw() const {
        void *raw = nullptr;
        detail::check(cudyn_library_raw(owned_.get(), &raw));
        return raw;
    }

private:
    explicit Library(cudyn_library *library) : owned_(library) {}
    detail::Owned<cudyn_library, cudyn_library_unload> owned_;
};

}  // namespace cudyn

#endif  // CUDYN_HPP
