//! The first example of "Dynamic Loading in the CUDA Runtime" (NVIDIA): `helloWorld` loaded from
//! a fatbin file and launched through its kernel handle.
//!
//! `cargo run -p cudyn --example hello_world [-- device.fatbin]`. With no file, the fatbin is
//! made at run time, so that no nvcc is needed: NVRTC compiles the kernel (`hello_world.cu`) for
//! this GPU (or for `--arch`) and nvFatbin wraps the cubin, as `cudyn compile hello_world.cu
//! --emit fatbin --arch sm_90 -o device.fatbin` does. Each thread greets (device `printf`) and
//! records its visit, which is compared with what the CPU expects. Without a GPU, `-- --arch
//! sm_90` makes the fatbin (or checks the one given) and stops there.

mod common;

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use cudyn::compile::FatbinBuilder;
use cudyn::{DeviceBuffer, Image, LaunchConfig, Library, Program};

/// The kernel, kept in its own file so that it can also be compiled on the command line.
const DEVICE_CU: &str = include_str!("hello_world.cu");

const THREADS: u32 = 4;

fn main() -> ExitCode {
    common::run(
        "hello_world",
        |options| {
            let scratch = tempfile::tempdir()?;
            let fatbin = match options.rest.first() {
                Some(given) => PathBuf::from(given),
                None => {
                    let path = scratch.path().join("device.fatbin");
                    std::fs::write(&path, fatbin_of_helloworld(options)?)?;
                    path
                }
            };
            // Checked as a load checks it, without a GPU.
            let image = Image::from_file(&fatbin)?;
            image.validate()?;
            let made = match options.rest.first() {
                Some(_) => fatbin.display().to_string(),
                None => "helloWorld, compiled by NVRTC and wrapped by nvFatbin,".to_owned(),
            };
            let what = format!(
                "{made} is a {} of {} bytes that passes the check every load makes",
                image.kind(),
                image.bytes().len()
            );
            Ok(((scratch, fatbin), what))
        },
        |(_scratch, fatbin)| {
            let hello = Library::from_file(&fatbin)?.kernel("helloWorld")?;
            let mut visits = DeviceBuffer::<i32>::zeroed(THREADS as usize)?;
            // SAFETY: helloWorld writes visits[threadIdx.x] for each of its THREADS threads, and
            // the buffer holds THREADS ints; it is read only after the kernel (synchronize
            // below).
            unsafe { hello.launch(&LaunchConfig::new(1, THREADS), (&mut visits,)) }?;
            cudyn::synchronize()?;

            let expected: Vec<i32> = (1..=THREADS as i32).collect();
            Ok(vec![common::compare(
                format!("{THREADS} GPU threads said hello from {}", fatbin.display()),
                &visits.to_vec()?,
                &expected,
            )])
        },
    )
}

/// A fatbin holding `helloWorld` as SASS for the architecture `options` name (else the GPU's):
/// NVRTC's cubin wrapped by nvFatbin.
fn fatbin_of_helloworld(options: &common::Options) -> Result<Vec<u8>, Box<dyn Error>> {
    let (compiled, _) = common::compile(options, Program::new(DEVICE_CU), "device.cu")?;
    let mut fatbin = FatbinBuilder::new()?;
    fatbin.add_cubin(compiled.code(), compiled.arch(), "device.cu")?;
    Ok(fatbin.finish()?)
}
