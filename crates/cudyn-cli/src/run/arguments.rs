//! From `--arg`s to a launch's [`ArgList`]: scalars read as their type, buffers filled on the
//! host, then bound to device memory. No step but the upload needs a GPU, so the argument list a
//! launch would pass can be built and checked against a kernel's parameters offline.

use cudyn::{ArgList, DeviceSliceMut, KernelArgs, ParamLayout};

use super::spec::{ArgSpec, Contents, ElemType};
use super::values::{self, ScalarBits};
use super::{Failure, Status};

/// One kernel argument: a scalar, or a buffer held as `B` (host bytes, device memory, a view).
#[derive(Debug)]
pub enum Argument<B> {
    Scalar(ScalarBits),
    Buffer(B),
}

impl<B> Argument<B> {
    /// The same argument with its buffer made by `make` (scalars are kept).
    pub fn try_map<C, E>(&self, make: impl FnOnce(&B) -> Result<C, E>) -> Result<Argument<C>, E> {
        Ok(match self {
            Argument::Scalar(bits) => Argument::Scalar(*bits),
            Argument::Buffer(buffer) => Argument::Buffer(make(buffer)?),
        })
    }

    /// The same argument with its buffer mapped by `view`, borrowed mutably.
    pub fn map_mut<'b, C>(&'b mut self, view: impl FnOnce(&'b mut B) -> C) -> Argument<C> {
        match self {
            Argument::Scalar(bits) => Argument::Scalar(*bits),
            Argument::Buffer(buffer) => Argument::Buffer(view(buffer)),
        }
    }

    /// The buffer, if this argument is one.
    pub fn buffer(&self) -> Option<&B> {
        match self {
            Argument::Scalar(_) => None,
            Argument::Buffer(buffer) => Some(buffer),
        }
    }
}

/// A buffer's contents before the launch, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostBuffer {
    pub ty: ElemType,
    pub bytes: Vec<u8>,
}

/// The host buffers among `arguments`, with their positions.
pub fn host_buffers(
    arguments: &[Argument<HostBuffer>],
) -> impl Iterator<Item = (usize, &HostBuffer)> {
    arguments
        .iter()
        .enumerate()
        .filter_map(|(index, argument)| Some((index, argument.buffer()?)))
}

/// Reads every argument: scalars to their bits, buffers to their bytes (generated, or read from
/// their files).
pub fn prepare(
    specs: &[ArgSpec],
    limit: crate::input::Limit,
) -> Result<Vec<Argument<HostBuffer>>, Failure> {
    specs
        .iter()
        .enumerate()
        .map(|(index, spec)| match spec {
            ArgSpec::Scalar { ty, value } => values::scalar(*ty, value)
                .map(Argument::Scalar)
                .map_err(|error| Failure::new(Status::Usage, format!("argument {index}: {error}"))),
            ArgSpec::Buffer { ty, contents } => buffer_bytes(*ty, contents, index, limit)
                .map(|bytes| Argument::Buffer(HostBuffer { ty: *ty, bytes })),
        })
        .collect()
}

fn buffer_bytes(
    ty: ElemType,
    contents: &Contents,
    index: usize,
    limit: crate::input::Limit,
) -> Result<Vec<u8>, Failure> {
    let path = match contents {
        Contents::Generated { count, fill } => {
            return values::generate(ty, *count, fill, index).map_err(|error| {
                Failure::new(Status::Usage, format!("argument {index}: {error}"))
            });
        }
        Contents::File(path) => path,
    };
    let bytes = crate::input::data(path, limit).map_err(|error| {
        Failure::new(Status::Failure, format!("argument {index}: {error}")).caused_by(error)
    })?;
    let size = values::element_size(ty);
    if bytes.len() % size != 0 {
        return Err(Failure::new(
            Status::Usage,
            format!(
                "argument {index}: {} holds {} bytes, which is not a whole number of {ty} \
                 elements ({size} bytes each)",
                path.display(),
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// The argument list of a launch: each scalar by value, each buffer as its device address. The
/// views are mutable because `run` cannot know which buffers the kernel writes, and every
/// argument is checked by size only: its Rust type (bits, bytes) is not what it means, which
/// only the command line's text said.
pub fn argument_list<'a>(arguments: &'a [Argument<DeviceSliceMut<'_, u8>>]) -> ArgList<'a> {
    let mut list = ArgList::new();
    for argument in arguments {
        match argument {
            Argument::Scalar(ScalarBits::B1(bits)) => list.push_sized(bits),
            Argument::Scalar(ScalarBits::B2(bits)) => list.push_sized(bits),
            Argument::Scalar(ScalarBits::B4(bits)) => list.push_sized(bits),
            Argument::Scalar(ScalarBits::B8(bits)) => list.push_sized(bits),
            Argument::Buffer(view) => list.push_sized(view),
        };
    }
    list
}

/// Checks the arguments against a kernel's parameters as the launch will, offline: their
/// argument list is built over empty device buffers (which need no GPU and have the same
/// layout: one device address each).
pub fn check_offline(
    kernel: &str,
    params: &[ParamLayout],
    arguments: &[Argument<HostBuffer>],
) -> Result<(), Failure> {
    let mut empty: Vec<Argument<cudyn::DeviceBuffer<u8>>> = arguments
        .iter()
        .map(|argument| argument.try_map(|_| cudyn::DeviceBuffer::alloc(0)))
        .collect::<Result<_, _>>()
        .map_err(|error| {
            Failure::new(Status::Failure, "cannot describe a buffer").caused_by(error)
        })?;
    let views: Vec<_> = empty
        .iter_mut()
        .map(|argument| argument.map_mut(|buffer| buffer.as_slice_mut()))
        .collect();
    let list = argument_list(&views);
    cudyn::launch::check_arguments(params, list.layouts()).map_err(|mismatch| {
        Failure::new(
            Status::Mismatch,
            format!(
                "kernel `{kernel}`: {mismatch}\n{}",
                describe(params, list.layouts(), arguments)
            ),
        )
    })
}

/// Parameters and arguments side by side, for a mismatch.
fn describe(
    params: &[ParamLayout],
    given: &[ParamLayout],
    arguments: &[Argument<HostBuffer>],
) -> String {
    let layout = |layout: Option<&ParamLayout>| {
        layout.map_or_else(
            || "-".to_owned(),
            |layout| format!("{} bytes at {}", layout.size, layout.offset),
        )
    };
    let mut lines = vec!["  #  parameter          argument".to_owned()];
    for index in 0..params.len().max(given.len()) {
        let what = match arguments.get(index) {
            Some(Argument::Scalar(_)) => " (scalar)",
            Some(Argument::Buffer(_)) => " (buffer address)",
            None => "",
        };
        lines.push(format!(
            "  {index:<2} {:<18} {}{what}",
            layout(params.get(index)),
            layout(given.get(index))
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use cudyn::compile::{Arch, Program};
    use cudyn::Image;

    use super::*;

    const LIMIT: crate::input::Limit = crate::input::Limit { bytes: 1 << 30 };

    /// The SAXPY of "Dynamic Loading in the CUDA Runtime" (NVIDIA), compiled by NVRTC, and its
    /// parameter layout read offline from the cubin.
    fn saxpy_params() -> Vec<ParamLayout> {
        let source = r#"
            extern "C" __global__
            void saxpy(float a, float *x, float *y, float *out, size_t n)
            {
              size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
              if (tid < n) out[tid] = a * x[tid] + y[tid];
            }
        "#;
        let cubin = Program::new(source)
            .arch(Arch::new(9, 0))
            .compile()
            .expect("NVRTC compiles SAXPY (activate the CUDA wheels' venv)");
        Image::new(cubin.code())
            .and_then(|image| image.param_layout("saxpy"))
            .unwrap()
    }

    fn prepared(specs: &[&str]) -> Vec<Argument<HostBuffer>> {
        let specs: Vec<ArgSpec> = specs.iter().map(|s| s.parse().unwrap()).collect();
        prepare(&specs, LIMIT).unwrap()
    }

    #[test]
    fn the_argument_list_matches_an_nvrtc_kernel_offline() {
        let params = saxpy_params();
        assert_eq!(params.len(), 5);
        let arguments = prepared(&[
            "f32:2.5",
            "buf:f32:1024=random",
            "buf:f32:1024=1",
            "buf:f32:1024=0",
            "u64:1024",
        ]);
        check_offline("saxpy", &params, &arguments).unwrap();

        let mut empty: Vec<_> = arguments
            .iter()
            .map(|a| a.try_map(|_| cudyn::DeviceBuffer::<u8>::alloc(0)))
            .collect::<Result<_, _>>()
            .unwrap();
        let views: Vec<_> = empty
            .iter_mut()
            .map(|a| a.map_mut(|b| b.as_slice_mut()))
            .collect();
        let list = argument_list(&views);
        assert_eq!(list.layouts(), params);
        // The kernel receives the scalars' bits and each buffer's address (0 when empty).
        let received = list.with_pointers(|pointers| {
            // SAFETY: five pointers into `views` and `arguments`, alive here; argument 0 is
            // 4 bytes, the others 8.
            unsafe {
                [
                    u64::from(*(*pointers).cast::<u32>()),
                    *(*pointers.add(1)).cast::<u64>(),
                    *(*pointers.add(4)).cast::<u64>(),
                ]
            }
        });
        assert_eq!(received, [u64::from(2.5f32.to_bits()), 0, 1024]);
    }

    #[test]
    fn mismatches_name_the_parameter_and_show_both_layouts() {
        let params = saxpy_params();
        let mismatch = |specs: &[&str]| {
            let error = check_offline("saxpy", &params, &prepared(specs)).unwrap_err();
            assert_eq!(error.status, Status::Mismatch);
            error.to_string()
        };
        let count = mismatch(&["f32:2.5", "buf:f32:4", "buf:f32:4", "buf:f32:4"]);
        assert!(
            count.contains("the kernel takes 5 parameters but 4 arguments were given"),
            "{count}"
        );
        assert!(count.contains("4  8 bytes at 32"), "{count}");
        // A double where the float goes: 8 bytes for 4.
        let size = mismatch(&["f64:2.5", "buf:f32:4", "buf:f32:4", "buf:f32:4", "u64:4"]);
        assert!(size.contains("parameter 0 is 4 bytes"), "{size}");
        // A 32-bit count where size_t goes.
        let size = mismatch(&["f32:2.5", "buf:f32:4", "buf:f32:4", "buf:f32:4", "u32:4"]);
        assert!(size.contains("parameter 4 is 8 bytes"), "{size}");
        assert!(
            size.contains("(scalar)") && size.contains("(buffer address)"),
            "{size}"
        );
    }

    #[test]
    fn more_arguments_than_a_tuple_holds() {
        // 40 floats and a buffer: beyond the 32 that a tuple or the inline list holds.
        let params: Vec<ParamLayout> = (0..40)
            .map(|i| ParamLayout {
                offset: 4 * i,
                size: 4,
            })
            .chain([ParamLayout {
                offset: 160,
                size: 8,
            }])
            .collect();
        let mut specs = vec!["f32:1"; 40];
        specs.push("buf:f64:1");
        check_offline("sum", &params, &prepared(&specs)).unwrap();
    }

    #[test]
    fn file_buffers_hold_whole_elements() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("input.bin");
        std::fs::write(&path, [0u8; 6]).unwrap();
        let spec =
            |ty: &str| -> ArgSpec { format!("buf:{ty}:@{}", path.display()).parse().unwrap() };
        let arguments = prepare(&[spec("u16")], LIMIT).unwrap();
        assert_eq!(
            arguments[0].buffer(),
            Some(&HostBuffer {
                ty: ElemType::U16,
                bytes: vec![0; 6]
            })
        );
        let error = prepare(&[spec("f32")], LIMIT).unwrap_err();
        assert_eq!(error.status, Status::Usage);
        assert!(error
            .to_string()
            .contains("holds 6 bytes, which is not a whole number of f32"));
        let missing: ArgSpec = "buf:f32:@/nonexistent/x.bin".parse().unwrap();
        let error = prepare(&[missing], LIMIT).unwrap_err();
        assert_eq!(error.status, Status::Failure);
        assert!(
            std::error::Error::source(&error).is_some(),
            "the OS error is kept"
        );
    }
}
