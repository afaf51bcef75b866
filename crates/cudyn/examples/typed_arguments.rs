//! User code that reads well: a kernel of 200 parameters launched from an argument list built
//! without a loop, a struct with padding passed without hand-written padding fields, and a
//! wrong argument type caught by the safe `Kernel::check` before anything runs. The launches
//! are type-checked: these are C++ kernels, whose mangled names spell their parameter types.
//!
//! `cargo run -p cudyn --example typed_arguments` (without a GPU: `-- --arch sm_90`, the
//! compile alone)

mod common;

use std::process::ExitCode;

use cudyn::{ArgList, DeviceBuffer, DeviceRepr, ErrorKind, LaunchConfig, Library, Pack, Program};

/// Parameters of `apply`: C++ pads `kind` with 7 bytes and the end with 4, 24 bytes in all.
const PARAMS: &str = r#"
struct Params { char kind; double scale; int count; };
__global__ void apply(Params p, double *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p.scale * i + p.kind * p.count;
}
"#;

/// The CUDA `Params`, field for field, padding left to the derive: `pack()` zeroes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, DeviceRepr)]
#[cudyn(c_name = "Params", padded)]
struct Params {
    kind: u8,
    scale: f64,
    count: i32,
}

/// Values the 200-parameter kernel sums, one per parameter after `out`.
const VALUES: usize = 199;

/// `__global__ void sum(double *out, float v0, ..., float v198)`, each value weighted by its
/// position.
fn sum_source() -> String {
    let params: Vec<String> = (0..VALUES).map(|i| format!("float v{i}")).collect();
    let terms: Vec<String> = (0..VALUES).map(|i| format!("{i}.0 * v{i}")).collect();
    format!(
        "{PARAMS}\n__global__ void sum(double *out, {}) {{ *out = {}; }}\n",
        params.join(", "),
        terms.join(" + ")
    )
}

fn main() -> ExitCode {
    let source = sum_source();
    let compile = |options: &_| common::compile(options, Program::new(&source), "typed.cu");
    common::run("typed_arguments", compile, |compiled| {
        let library = Library::loader().load_compiled(&compiled)?;
        let (sum, apply) = (library.kernel("sum")?, library.kernel("apply")?);
        let one = LaunchConfig::new(1, 1);

        // 199 floats after the output: collected into the list, no push loop, and the output
        // buffer lent mutably as it is, no reference to a reference.
        let values: Vec<f32> = (0..VALUES).map(|i| (i % 7) as f32 * 0.5).collect();
        let mut total = DeviceBuffer::<f64>::zeroed(1)?;
        // The wrong element type is refused by the safe check, naming both types.
        let doubles: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
        let mut wrong = ArgList::new();
        wrong.push(&mut total).extend(&doubles);
        match sum.check(&one, &wrong) {
            Err(refused) if refused.kind() == ErrorKind::LaunchArguments => {
                println!("refused before the GPU: {refused}");
            }
            other => {
                return Err(format!("f64 values for floats were not refused: {other:?}").into())
            }
        }
        let mut args = ArgList::new();
        args.push(&mut total).extend(&values);
        // SAFETY: sum reads its 199 floats and writes one double to `total`, which holds one;
        // it is read after the kernel (to_vec waits).
        unsafe { sum.launch(&one, &args) }?;
        // The list no longer holds `total` once it is not used.
        let gpu_total = total.to_vec()?;
        let cpu_total: f64 = values
            .iter()
            .enumerate()
            .map(|(i, &v)| i as f64 * f64::from(v))
            .sum();

        let params = Params {
            kind: 3,
            scale: 0.5,
            count: -4,
        };
        let n = 1000;
        let mut out = DeviceBuffer::<f64>::zeroed(n)?;
        // SAFETY: apply writes out[i] for i < n, and the buffer holds n doubles; it is read after
        // the kernel (to_vec waits).
        unsafe {
            apply.launch(
                &LaunchConfig::for_elements(n, 128),
                (params.pack(), &mut out, n as i32),
            )
        }?;
        let cpu: Vec<f64> = (0..n)
            .map(|i| params.scale * i as f64 + f64::from(params.kind) * f64::from(params.count))
            .collect();
        Ok(vec![
            common::compare(
                format!("200 parameters, {VALUES} floats summed"),
                &gpu_total,
                &[cpu_total],
            ),
            common::compare(
                format!(
                    "a {}-byte struct with padding, applied to {n} doubles",
                    size_of::<Params>()
                ),
                &out.to_vec()?,
                &cpu,
            ),
        ])
    })
}
