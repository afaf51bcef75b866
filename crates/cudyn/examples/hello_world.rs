//! The first example of "Dynamic Loading in the CUDA Runtime" (NVIDIA): `helloWorld` loaded from
//! a fatbin file and launched through its kernel handle.
//!
//! `cargo run -p cudyn --example hello_world [-- device.fatbin]`. With no file, the fatbin is
//! made at run time, so that no nvcc is needed: NVRTC compiles the kernel (`hello_world.cu`) for
//! this GPU and nvFatbin wraps the cubin, as `cudyn compile hello_world.cu --emit fatbin -o
//! device.fatbin` does. Each thread greets (device `printf`) and records its visit, which is
//! compared with what the CPU expects.

mod common;

use std::error::Error;
use std::ffi::{c_char, CString};
use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::sys::Api;
use cudyn::{DeviceBuffer, LaunchConfig, Library, Program};

/// The kernel, kept in its own file so that it can also be compiled on the command line.
const DEVICE_CU: &str = include_str!("hello_world.cu");

const THREADS: u32 = 4;

fn main() -> ExitCode {
    common::run("hello_world", || {
        let scratch = tempfile::tempdir()?;
        let fatbin = match std::env::args_os().nth(1) {
            Some(given) => PathBuf::from(given),
            None => {
                let path = scratch.path().join("device.fatbin");
                std::fs::write(&path, fatbin_of_helloworld()?)?;
                path
            }
        };

        let hello = Library::from_file(&fatbin)?.kernel("helloWorld")?;
        let mut visits = DeviceBuffer::<i32>::zeroed(THREADS as usize)?;
        // SAFETY: helloWorld writes visits[threadIdx.x] for each of its THREADS threads, and the
        // buffer holds THREADS ints; it is read only after the kernel (synchronize below).
        unsafe { hello.launch(&LaunchConfig::new(1, THREADS), (&mut visits,)) }?;
        cudyn::synchronize()?;

        let expected: Vec<i32> = (1..=THREADS as i32).collect();
        Ok(vec![common::compare(
            format!("{THREADS} GPU threads said hello from {}", fatbin.display()),
            &visits.to_vec()?,
            &expected,
        )])
    })
}

/// A fatbin holding `helloWorld` as SASS for this GPU: NVRTC's cubin wrapped by nvFatbin.
fn fatbin_of_helloworld() -> Result<Vec<u8>, Box<dyn Error>> {
    let compiled = Program::new(DEVICE_CU).name("device.cu").compile()?;
    let nvfatbin = cudyn::sys::nvfatbin()?;
    let api = &nvfatbin.api;
    let entry = |name: &'static str| nvfatbin.missing(name);
    let create = api.nvFatbinCreate.ok_or_else(|| entry("nvFatbinCreate"))?;
    let add_cubin = api
        .nvFatbinAddCubin
        .ok_or_else(|| entry("nvFatbinAddCubin"))?;
    let size_of = api.nvFatbinSize.ok_or_else(|| entry("nvFatbinSize"))?;
    let get = api.nvFatbinGet.ok_or_else(|| entry("nvFatbinGet"))?;
    let destroy = api
        .nvFatbinDestroy
        .ok_or_else(|| entry("nvFatbinDestroy"))?;

    let arch = CString::new(compiled.arch().number().to_string())?;
    let identifier = CString::new("device.cu")?;
    let mut handle = std::ptr::null_mut();
    // SAFETY: no options (a null array of length 0); the handle is written on success.
    nvfatbin.check("nvFatbinCreate", unsafe {
        create(&mut handle, std::ptr::null_mut::<*const c_char>(), 0)
    })?;
    let built = || -> cudyn::Result<Vec<u8>> {
        let cubin = compiled.code();
        // SAFETY: the cubin's bytes and the two C strings live across the call, which copies them.
        nvfatbin.check("nvFatbinAddCubin", unsafe {
            add_cubin(
                handle,
                cubin.as_ptr().cast(),
                cubin.len(),
                arch.as_ptr(),
                identifier.as_ptr(),
            )
        })?;
        let mut size = 0;
        // SAFETY: writes one size_t.
        nvfatbin.check("nvFatbinSize", unsafe { size_of(handle, &mut size) })?;
        let mut fatbin = vec![0u8; size];
        // SAFETY: the buffer holds the `size` bytes nvFatbinSize asked for.
        nvfatbin.check("nvFatbinGet", unsafe {
            get(handle, fatbin.as_mut_ptr().cast())
        })?;
        Ok(fatbin)
    };
    let fatbin = built();
    // SAFETY: the handle was created above and is not used after this.
    nvfatbin.check("nvFatbinDestroy", unsafe { destroy(&mut handle) })?;
    Ok(fatbin?)
}
