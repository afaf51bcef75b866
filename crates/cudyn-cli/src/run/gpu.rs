//! The part of `cudyn run` that needs a GPU: load, upload, launch and time, read back.

use std::time::Duration;

use cudyn::{Device, DeviceBuffer, Event, Kernel, KernelAttribute, LaunchConfig, Library};

use super::arguments::{argument_list, Argument, HostBuffer};
use super::{Failure, Status};

/// GPU 0, which `run` launches on, or why there is none.
pub fn first_device() -> Result<Device, Failure> {
    let no_gpu = |cause: Option<cudyn::Error>| {
        let failure = Failure::new(
            Status::NoGpu,
            "no GPU to launch on: `cudyn run` needs the NVIDIA driver and a GPU (`--check` checks \
             the arguments without one; `cudyn doctor` shows what CUDA is here)",
        );
        match cause {
            Some(cause) => failure.caused_by(cause),
            None => failure,
        }
    };
    match Device::count() {
        Ok(0) => Err(no_gpu(None)),
        Ok(_) => Device::get(0).map_err(|error| no_gpu(Some(error))),
        Err(error) => Err(no_gpu(Some(error))),
    }
}

/// Loads `code` and looks `name` up in it (a C++ name is resolved through the symbols).
pub fn load_kernel(code: &[u8], name: &str) -> Result<Kernel, Failure> {
    let library = Library::load(code)
        .map_err(|error| Failure::from_cuda("cannot load the device code", error))?;
    library
        .kernel(name)
        .map_err(|error| Failure::from_cuda(format!("cannot find kernel `{name}`"), error))
}

/// Lets `kernel` use `bytes` of dynamic shared memory per block on `device` where that is more
/// than a kernel may use by default (48 KiB) and no more than the device allows, as a launcher
/// written in C++ would opt in. Beyond the device's limit the launch's check says so.
pub fn allow_shared_memory(kernel: &Kernel, device: Device, bytes: u32) -> Result<(), Failure> {
    let limits = device
        .limits()
        .map_err(cuda("cannot read the GPU's limits"))?;
    if bytes <= limits.max_shared_per_block || bytes > limits.max_shared_per_block_optin {
        return Ok(());
    }
    let bytes = i32::try_from(bytes).unwrap_or(i32::MAX);
    kernel
        .set_attribute(KernelAttribute::MaxDynamicSharedSizeBytes, bytes, device)
        .map_err(cuda(
            "cannot let the kernel use that much dynamic shared memory",
        ))
}

/// A failure of `what` because of a CUDA error, for `map_err`.
fn cuda(what: &'static str) -> impl Fn(cudyn::Error) -> Failure {
    move |error| Failure::from_cuda(what, error)
}

/// What the launches did: each launch's device time, and every buffer's bytes afterwards (in
/// argument order, `None` for scalars).
#[derive(Debug)]
pub struct Outcome {
    pub times: Vec<Duration>,
    pub after: Vec<Option<Vec<u8>>>,
}

/// Launches `kernel` `repeat` times with `arguments`, each launch timed by device events and
/// each seeing the buffers as the command line gave them.
pub fn launch(
    kernel: &Kernel,
    config: &LaunchConfig<'_>,
    arguments: &[Argument<HostBuffer>],
    repeat: u32,
) -> Result<Outcome, Failure> {
    let mut device: Vec<Argument<DeviceBuffer<u8>>> = arguments
        .iter()
        .map(|argument| argument.try_map(|host| DeviceBuffer::alloc(host.bytes.len())))
        .collect::<Result<_, _>>()
        .map_err(cuda("cannot allocate the buffers"))?;
    let (start, stop) = (Event::new(), Event::new());
    let (start, stop) = (
        start.map_err(cuda("cannot create an event"))?,
        stop.map_err(cuda("cannot create an event"))?,
    );
    let mut times = Vec::with_capacity(repeat as usize);
    for _ in 0..repeat {
        // Restored before every launch, so that a kernel updating a buffer in place gives the
        // same result however many times it runs, and the summary is of one launch.
        for (buffer, host) in device.iter_mut().zip(arguments) {
            if let (Argument::Buffer(buffer), Argument::Buffer(host)) = (buffer, host) {
                buffer
                    .copy_from(&host.bytes)
                    .map_err(cuda("cannot copy a buffer to the GPU"))?;
            }
        }
        let views: Vec<_> = device
            .iter_mut()
            .map(|argument| argument.map_mut(DeviceBuffer::as_slice_mut))
            .collect();
        let list = argument_list(&views);
        start.record(None).map_err(cuda("cannot record an event"))?;
        // SAFETY: the launch contract of cudyn::launch, as far as a launcher can keep it:
        // - types: each scalar has the size of its parameter (the launch checks sizes and
        //   offsets against the kernel's), and each pointer parameter receives the address of a
        //   live allocation of as many elements of the type the command line named;
        // - bounds: the kernel is the user's code, run on the user's word that it stays inside
        //   the buffers given (the help says so): no launcher can check that;
        // - writes: every buffer is lent mutably, since any of them may be written;
        // - lifetime: the buffers live in `device` until this function returns, after the stop
        //   event's synchronization below; nothing else runs on them meanwhile (the copies and
        //   the launch are ordered on the legacy default stream).
        unsafe { kernel.launch(config, &list) }
            .map_err(|error| Failure::from_cuda("the launch failed", error))?;
        stop.record(None).map_err(cuda("cannot record an event"))?;
        stop.synchronize()
            .map_err(cuda("the kernel failed while running"))?;
        times.push(
            stop.elapsed_since(&start)
                .map_err(cuda("cannot read the launch's time"))?,
        );
    }
    let after = device
        .iter()
        .map(|argument| argument.buffer().map(DeviceBuffer::to_vec).transpose())
        .collect::<Result<_, _>>()
        .map_err(cuda("cannot copy a buffer back from the GPU"))?;
    Ok(Outcome { times, after })
}
