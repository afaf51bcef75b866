//! Device variables of a loaded library: a `__constant__` table written from the host before the
//! launch, a `__device__` counter and a `__managed__` sum the kernel updates, read back after it.
//!
//! `cargo run -p cudyn --example globals` (without a GPU: `-- --arch sm_90`, the compile alone)

mod common;

use std::process::ExitCode;

use cudyn::{DeviceBuffer, LaunchConfig, Library, Program};

const GLOBALS: &str = r#"
__constant__ int weights[4];
__device__ unsigned int visited;
__managed__ unsigned long long weighted_sum;
extern "C" __global__ void weigh(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = weights[i % 4] * i;
        atomicAdd(&visited, 1u);
        atomicAdd(&weighted_sum, (unsigned long long)out[i]);
    }
}
"#;

fn main() -> ExitCode {
    let compile = |options: &_| common::compile(options, Program::new(GLOBALS), "globals.cu");
    common::run("globals", compile, |compiled| {
        let library = Library::loader().load_compiled(&compiled)?;
        let weigh = library.kernel("weigh")?;
        let weights = library.global::<[i32; 4]>("weights")?;
        let visited = library.global::<u32>("visited")?;
        let weighted_sum = library.managed::<u64>("weighted_sum")?;
        let table = [3, 1, 4, 1];
        weights.write(&table)?;
        visited.write(&0)?;
        weighted_sum.write(&0)?;

        let n = 10_000;
        let mut out = DeviceBuffer::<i32>::zeroed(n)?;
        // SAFETY: weigh writes out[i] for i < n, and the buffer holds n ints; the variables it
        // updates belong to its library, and everything is read after synchronize.
        unsafe { weigh.launch(&LaunchConfig::for_elements(n, 256), (&mut out, n as i32)) }?;
        cudyn::synchronize()?;

        let cpu: Vec<i32> = (0..n).map(|i| table[i % 4] * i as i32).collect();
        let cpu_sum: u64 = cpu.iter().map(|&v| v as u64).sum();
        Ok(vec![
            common::compare(
                format!("{n} values weighted by a __constant__ table"),
                &out.to_vec()?,
                &cpu,
            ),
            common::compare(
                "the __device__ count of threads",
                &[visited.read()?],
                &[n as u32],
            ),
            common::compare("the __managed__ sum", &[weighted_sum.read()?], &[cpu_sum]),
        ])
    })
}
