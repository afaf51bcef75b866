//! Kernels with many parameters of mixed types, compiled by NVRTC: 21 (launched as a tuple and as
//! an argument list) and 200 (as an argument list). Without a GPU, the lists' layouts equal the
//! layouts NVRTC gave the kernels; on a GPU, checked launches deliver every value (each kernel
//! copies every parameter it receives to its output) and wrong lists are refused.
//! Run the GPU tests with `cargo test -p cudyn --test many_params -- --include-ignored`.

use cudyn::compile::{Arch, Output};
use cudyn::launch::check_arguments;
use cudyn::{
    ArgList, ArgumentMismatch, DeviceBuffer, DeviceSlice, Error, Image, Kernel, KernelArg,
    KernelArgs, LaunchConfig, Library, ParamLayout, Program,
};

/// The device types of the parameters before the output, in a repeating cycle: every size and
/// alignment from 1 to 8 bytes, and pointers.
const CYCLE: [&str; 5] = ["int", "float", "double", "char", "const int*"];

/// `extern "C" __global__ void NAME(int p0, float p1, ..., double* out)` with `count`
/// parameters in all: it writes parameter `i` (for a pointer, the int it points to) to `out[i]`.
fn kernel_source(name: &str, count: usize) -> String {
    let params: Vec<String> = (0..count - 1)
        .map(|i| format!("{} p{i}", CYCLE[i % CYCLE.len()]))
        .collect();
    let body: String = (0..count - 1)
        .map(|i| {
            let read = if i % CYCLE.len() == 4 {
                format!("p{i}[0]")
            } else {
                format!("p{i}")
            };
            format!("    out[{i}] = (double){read};\n")
        })
        .collect();
    format!(
        "extern \"C\" __global__ void {name}({}, double* out) {{\n{body}}}\n",
        params.join(", ")
    )
}

/// The values passed to the parameters before the output, one per parameter index; a pointer
/// parameter's target is the int at the same index of `targets`.
struct Values {
    ints: Vec<i32>,
    floats: Vec<f32>,
    doubles: Vec<f64>,
    chars: Vec<i8>,
    targets: Vec<i32>,
}

impl Values {
    fn new(count: usize) -> Values {
        let range = 0..count as i32;
        Values {
            ints: range.clone().map(|i| -37 * i + 5).collect(),
            // Quarters and eighths: exact in float and double.
            floats: range.clone().map(|i| i as f32 + 0.25).collect(),
            doubles: range.clone().map(|i| f64::from(i) * 1.5 - 0.125).collect(),
            // Non-negative, whatever the signedness of the device's char.
            chars: range.clone().map(|i| (i % 100 + 1) as i8).collect(),
            targets: range.map(|i| 11 * i + 3).collect(),
        }
    }

    /// What the kernel writes to `out[i]` for parameter `i`.
    fn expected(&self, i: usize) -> f64 {
        match i % CYCLE.len() {
            0 => f64::from(self.ints[i]),
            1 => f64::from(self.floats[i]),
            2 => self.doubles[i],
            3 => f64::from(self.chars[i]),
            _ => f64::from(self.targets[i]),
        }
    }

    /// The arguments for parameters `0..count` of a kernel from [`kernel_source`], in order, with
    /// `pointers[i]` for pointer parameter `i`.
    fn push<'a, P: KernelArg>(&'a self, list: &mut ArgList<'a>, pointers: &'a [P], count: usize) {
        for (i, pointer) in pointers[..count].iter().enumerate() {
            match i % CYCLE.len() {
                0 => list.push(&self.ints[i]),
                1 => list.push(&self.floats[i]),
                2 => list.push(&self.doubles[i]),
                3 => list.push(&self.chars[i]),
                _ => list.push(pointer),
            };
        }
    }
}

/// One-element views of `targets`, one per parameter index: every pointer differs.
fn views(targets: &DeviceBuffer<i32>) -> Vec<DeviceSlice<'_, i32>> {
    (0..targets.len())
        .map(|i| targets.slice(i..i + 1).unwrap())
        .collect()
}

#[test]
fn lists_of_21_and_200_mixed_arguments_have_the_layouts_nvrtc_gives_the_kernels() {
    for count in [21, 200] {
        let name = format!("many{count}");
        let compiled = Program::new(kernel_source(&name, count))
            .arch(Arch::new(9, 0))
            .output(Output::Cubin)
            .compile()
            .expect("NVRTC compiles (run scripts/cuda-wheels and activate its venv)");
        let params: Vec<ParamLayout> = Image::new(compiled.code())
            .unwrap()
            .param_layout(&name)
            .unwrap();
        assert_eq!(params.len(), count);
        // The kernel's parameter buffer stays within the 4 KiB every driver accepts.
        assert!(params[count - 1].end() <= 4096, "{params:?}");

        // Empty buffers need no device; as arguments they are device addresses like any other.
        let empty = DeviceBuffer::<i32>::alloc(0).unwrap();
        let mut out = DeviceBuffer::<f64>::alloc(0).unwrap();
        let pointers = vec![&empty; count];
        let values = Values::new(count - 1);
        let mut list = ArgList::new();
        values.push(&mut list, &pointers, count - 1);
        list.push(&mut out);
        assert_eq!(check_arguments(&params, list.layouts()), Ok(()), "{name}");
    }
}

/// Both kernels, compiled by NVRTC for this GPU and loaded.
fn kernels() -> (Kernel, Kernel) {
    let source = kernel_source("many21", 21) + &kernel_source("many200", 200);
    let library: Library = Program::new(source).load().unwrap();
    (
        library.kernel("many21").unwrap(),
        library.kernel("many200").unwrap(),
    )
}

/// An output buffer of `len` NaNs (all bits set): a slot the kernel misses cannot match.
fn poisoned(len: usize) -> DeviceBuffer<f64> {
    let mut out = DeviceBuffer::<f64>::alloc(len).unwrap();
    out.fill_bytes(0xff).unwrap();
    out
}

fn assert_copied(out: &DeviceBuffer<f64>, values: &Values) {
    cudyn::synchronize().unwrap();
    let got = out.to_vec().unwrap();
    let wrong: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].to_bits() != values.expected(i).to_bits())
        .collect();
    assert!(
        wrong.is_empty(),
        "parameters {wrong:?} arrived wrong: {got:?}"
    );
}

#[test]
#[ignore = "gpu: a 21-parameter kernel launched checked, as a tuple and as an argument list"]
fn a_21_parameter_kernel_launched_as_a_tuple_and_as_a_list_receives_every_value() {
    let (many21, _) = kernels();
    assert_eq!(many21.params().unwrap().len(), 21);
    let values = Values::new(20);
    let targets = DeviceBuffer::from_slice(&values.targets).unwrap();
    let views = views(&targets);
    let (v, f, d, c) = (&values.ints, &values.floats, &values.doubles, &values.chars);
    let config = LaunchConfig::new(1, 1);

    let mut out = poisoned(20);
    // SAFETY: many21 reads one int through each pointer parameter, each a one-element view of
    // `targets`, and writes out[0..20], which holds 20 doubles; the synchronization in
    // `assert_copied` waits for it before `out` is read.
    unsafe {
        many21.launch(
            &config,
            (
                v[0], f[1], d[2], c[3], views[4], v[5], f[6], d[7], c[8], views[9], v[10], f[11],
                d[12], c[13], views[14], v[15], f[16], d[17], c[18], views[19], &mut out,
            ),
        )
    }
    .unwrap();
    assert_copied(&out, &values);

    let mut out = poisoned(20);
    let mut list = ArgList::new();
    values.push(&mut list, &views, 20);
    list.push(&mut out);
    // SAFETY: as above.
    unsafe { many21.launch(&config, &list) }.unwrap();
    drop(list);
    assert_copied(&out, &values);
}

#[test]
#[ignore = "gpu: a 200-parameter kernel launched checked through an argument list"]
fn a_200_parameter_kernel_receives_every_value_and_wrong_lists_are_refused() {
    let (_, many200) = kernels();
    let params = many200.params().unwrap();
    assert_eq!(params.len(), 200);
    let buffer_bytes = params.last().unwrap().end();
    assert!(buffer_bytes <= 4096, "{buffer_bytes} bytes fit any driver");
    let values = Values::new(199);
    let targets = DeviceBuffer::from_slice(&values.targets).unwrap();
    let views = views(&targets);
    let config = LaunchConfig::new(1, 1);
    let mut out = poisoned(199);

    // One argument short: the output is missing.
    let mut short = ArgList::new();
    values.push(&mut short, &views, 199);
    // SAFETY: refused by the count check before the driver (asserted), so nothing runs.
    let refused = unsafe { many200.launch(&config, &short) };
    match refused {
        Err(Error::LaunchArguments {
            kernel,
            mismatch:
                ArgumentMismatch::Count {
                    expected: 200,
                    given: 199,
                },
        }) => assert_eq!(kernel, "many200"),
        other => panic!("expected a count mismatch, got {other:?}"),
    }

    // An int where parameter 3 is a char.
    let mut wrong_size = ArgList::new();
    values.push(&mut wrong_size, &views, 3);
    for i in 3..199 {
        wrong_size.push(&values.ints[i]);
    }
    wrong_size.push(&mut out);
    // SAFETY: refused by the size check before the driver (asserted), so nothing runs.
    let refused = unsafe { many200.launch(&config, &wrong_size) };
    assert!(
        matches!(
            refused,
            Err(Error::LaunchArguments {
                mismatch: ArgumentMismatch::Size {
                    index: 3,
                    expected: 1,
                    given: 4
                },
                ..
            })
        ),
        "{refused:?}"
    );
    drop(wrong_size);
    cudyn::synchronize().unwrap();
    assert!(
        out.to_vec()
            .unwrap()
            .iter()
            .all(|v| v.to_bits() == u64::MAX),
        "a refused launch ran"
    );
    let mut list = ArgList::new();
    values.push(&mut list, &views, 199);
    list.push(&mut out);
    assert_eq!(list.len(), 200);
    // SAFETY: many200 reads one int through each pointer parameter, each a one-element view of
    // `targets`, and writes out[0..199], which holds 199 doubles; the synchronization in
    // `assert_copied` waits for it before `out` is read.
    unsafe { many200.launch(&config, &list) }.unwrap();
    drop(list);
    assert_copied(&out, &values);
}
