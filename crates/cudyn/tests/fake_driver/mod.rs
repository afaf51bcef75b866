//! A fake CUDA driver for measuring and testing cudyn's host-side launch and load paths on a
//! machine without a GPU: `fake_cuda.c` beside this file (embedded in the program), compiled at
//! run time by the system's C compiler (`$CC`, else `cc`) into a `libcuda.so.1`, which cudyn is
//! then told to search alone ([`cudyn::set_library_path`]). It has two devices (device 0 with an
//! H200's limits, device 1 with 512 threads per block) and their primary contexts; every entry
//! point answers at once, and counts its calls on the calling thread (so tests running in
//! parallel threads count apart).
//!
//! A kernel is made by [`kernel`]: a parameter layout that the fake `cuKernelGetParamInfo`
//! reports and the fake `cuLaunchKernel` copies the arguments by, as the real driver packs them.
//!
//! Shared by tests/launch_driver_calls.rs, tests/load_driver_calls.rs and cudyn-bench's
//! `bench_launch_host` (through `#[path]`).
//! A process installs it once, before any other cudyn call: the search path is fixed at the
//! driver's first opening.
#![allow(dead_code)]

use std::ffi::{c_char, c_void, CString};
use std::path::Path;
use std::process::Command;

use cudyn::raw::CUkernel;
use cudyn::Kernel;

/// The fake driver's source.
const SOURCE: &str = include_str!("fake_cuda.c");

/// The fake driver, opened by cudyn, with its counters.
#[derive(Debug)]
pub struct FakeDriver {
    counters: libloading::Library,
}

/// `fake_cuda_calls(const char *name)`: the calling thread's count of one entry point.
type CallsFn = unsafe extern "C" fn(*const c_char) -> u64;
/// `fake_cuda_set_cold_caches(int on)`.
type ColdCachesFn = unsafe extern "C" fn(i32);

impl FakeDriver {
    /// Compiles the fake driver and makes it the only driver cudyn finds, opens it through cudyn
    /// (checking that cudyn opened this file) and makes device 0's primary context current on
    /// this thread. Must come before any other cudyn call of the process. The library's file is
    /// deleted once opened: cudyn never opens it again.
    pub fn install() -> Result<FakeDriver, String> {
        let folder = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
        let library = folder.path().join("libcuda.so.1");
        compile(folder.path(), &library)?;
        cudyn::set_library_path([folder.path().to_path_buf()]).map_err(|e| e.to_string())?;
        let opened = &cudyn::sys::driver()
            .map_err(|e| e.to_string())?
            .library
            .path;
        if opened != &library {
            return Err(format!(
                "cudyn opened {} rather than the fake driver",
                opened.display()
            ));
        }
        cudyn::set_device(0).map_err(|e| e.to_string())?;
        // SAFETY: the fake driver's initializers set up nothing; opening the same file again
        // returns the library cudyn opened, whose counters are wanted.
        let counters = unsafe { libloading::Library::new(&library) }
            .map_err(|e| format!("{}: {e}", library.display()))?;
        Ok(FakeDriver { counters })
    }

    /// How many times this thread called the driver's entry point `name` (`u64::MAX` for a name
    /// the fake driver does not have).
    pub fn calls(&self, name: &str) -> u64 {
        let name = CString::new(name).expect("an entry point's name has no NUL");
        // SAFETY: the symbol is defined in fake_cuda.c with this signature.
        unsafe {
            let calls = self
                .counters
                .get::<CallsFn>(b"fake_cuda_calls\0")
                .expect("the fake driver exports fake_cuda_calls");
            calls(name.as_ptr())
        }
    }

    /// Whether every launch leaves the caller's caches cold, as a real launch does: it then
    /// writes 64 KiB of data and runs about 28 KiB of code of its own (a few microseconds).
    pub fn set_cold_caches(&self, on: bool) {
        // SAFETY: the symbol is defined in fake_cuda.c with this signature.
        unsafe {
            let set = self
                .counters
                .get::<ColdCachesFn>(b"fake_cuda_set_cold_caches\0")
                .expect("the fake driver exports fake_cuda_set_cold_caches");
            set(i32::from(on));
        }
    }

    /// How many of this thread's launches handed the driver a kernel's function in the
    /// current context (from `cuKernelGetFunction`) rather than the kernel handle.
    pub fn function_launches(&self) -> u64 {
        // SAFETY: fake_cuda.c defines it taking nothing and returning an unsigned long long.
        unsafe { self.call("fake_cuda_function_launches") }
    }

    /// Destroys the driver's one context that is not a primary one, if it was made, and makes
    /// a new one on device 0 at the same address, as the real driver may after `cuCtxDestroy`
    /// and `cuCtxCreate` (or a primary context reset): the same handle with a new id. The
    /// functions found in the old one can no longer be launched. Nothing is made current.
    pub fn remake_context(&self) -> cudyn::raw::CUcontext {
        // SAFETY: fake_cuda.c defines it taking nothing and returning a CUcontext.
        unsafe { self.call("fake_cuda_remake_context") }
    }

    /// How many times this thread called any of the driver's entry points.
    pub fn total_calls(&self) -> u64 {
        // SAFETY: fake_cuda.c defines it taking nothing and returning an unsigned long long.
        unsafe { self.call("fake_cuda_total_calls") }
    }

    /// Calls the fake driver's export `name`, which takes nothing.
    ///
    /// # Safety
    /// `name` is defined in fake_cuda.c taking no arguments and returning an `R`.
    unsafe fn call<R>(&self, name: &str) -> R {
        let symbol = [name.as_bytes(), b"\0"].concat();
        // SAFETY: the caller's contract.
        unsafe {
            let export = self
                .counters
                .get::<unsafe extern "C" fn() -> R>(&symbol)
                .unwrap_or_else(|_| panic!("the fake driver exports {name}"));
            export()
        }
    }
}

/// Compiles [`SOURCE`], written into `folder`, into the shared library `output`.
fn compile(folder: &Path, output: &Path) -> Result<(), String> {
    let source = folder.join("fake_cuda.c");
    std::fs::write(&source, SOURCE).map_err(|e| format!("{}: {e}", source.display()))?;
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&compiler)
        // The soname lets a library that opens `libcuda.so.1` by name (cudarc) find this one,
        // already loaded.
        .args([
            "-O2",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-Wall",
            "-Werror",
            "-o",
        ])
        .arg(output)
        .arg(&source)
        .status()
        .map_err(|e| format!("running the C compiler `{compiler}` (set CC to another): {e}"))?;
    if !status.success() {
        return Err(format!(
            "`{compiler}` could not compile the fake driver ({status})"
        ));
    }
    Ok(())
}

/// One parameter of a fake kernel, as `struct fake_param` in fake_cuda.c.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeParam {
    /// Byte offset in the parameter buffer.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// What the fake driver's kernel handle points at: `struct fake_kernel` in fake_cuda.c.
#[repr(C)]
#[derive(Debug)]
struct FakeKernelRecord {
    name: *const c_char,
    count: usize,
    params: *const FakeParam,
}

/// A kernel of the fake driver with the parameter layout `params`, as a cudyn [`Kernel`]. The
/// record behind the handle is leaked: a fake kernel lives as long as the process, as a loaded
/// library's kernel may.
pub fn kernel(name: &str, params: &[FakeParam]) -> Kernel {
    let name = CString::new(name).expect("a kernel name has no NUL");
    let params: &'static [FakeParam] = Box::leak(params.to_vec().into_boxed_slice());
    let record = Box::leak(Box::new(FakeKernelRecord {
        name: name.into_raw(),
        count: params.len(),
        params: params.as_ptr(),
    }));
    let raw: CUkernel = (record as *mut FakeKernelRecord).cast();
    // SAFETY: the fake driver takes a pointer to a leaked record as the kernel handle, valid for
    // the life of the process.
    unsafe { Kernel::from_raw(raw) }
}

/// The C layout of parameters of the given `(size, alignment)`s, in order.
pub fn c_params(types: &[(usize, usize)]) -> Vec<FakeParam> {
    let mut end = 0usize;
    types
        .iter()
        .map(|&(size, align)| {
            let offset = end.next_multiple_of(align);
            end = offset + size;
            FakeParam { offset, size }
        })
        .collect()
}

/// An argument pointer for a raw launch.
pub fn param_pointer<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast()
}
