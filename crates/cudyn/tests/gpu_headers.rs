//! Kernels that include CUDA's own headers, compiled by NVRTC with no include flag and run on the
//! GPU, each checked against the CPU: half and bfloat16 arithmetic (`cuda_fp16.h`, `cuda_bf16.h`),
//! `cuda::std::complex` (CCCL's libcu++) and a CUB block reduction. The cooperative-groups kernel
//! of tests/kernels runs in the cooperative-launch tests.
//! Run with `cargo test -p cudyn --test gpu_headers -- --include-ignored` on a machine with a GPU.

mod common;

use common::random_floats;
use cudyn::compile::Program;
use cudyn::{DeviceBuffer, Kernel, LaunchConfig};

/// The kernel `name` of `source`, compiled for the current GPU with CUDA's headers found by
/// cudyn (no `-I`) and loaded.
fn kernel(file: &str, source: &str, name: &str) -> Kernel {
    Program::new(source)
        .name(file)
        .load()
        .unwrap_or_else(|error| panic!("{file}: {error}"))
        .kernel(name)
        .unwrap()
}

/// Where `got` is farther from `expected` than `tolerance(index)` allows: (index, got, expected).
fn outside_tolerance(
    got: &[f32],
    expected: &[f32],
    tolerance: impl Fn(usize) -> f32,
) -> Vec<(usize, f32, f32)> {
    assert_eq!(got.len(), expected.len());
    got.iter()
        .zip(expected)
        .enumerate()
        // A NaN (an element the kernel missed) is never within tolerance.
        .filter(|(index, (g, e))| {
            let error = (*g - *e).abs();
            error.is_nan() || error > tolerance(*index)
        })
        .map(|(index, (g, e))| (index, *g, *e))
        .take(10)
        .collect()
}

#[test]
#[ignore = "gpu: half and bfloat16 a*x+y on 2^20 random elements against the CPU"]
fn half_and_bfloat16_fma_match_the_cpu_within_their_precision() {
    let n = 1usize << 20;
    // Exact in both half and bfloat16, so only x and y are rounded on the way in.
    let a = 1.75f32;
    let x = random_floats(n, 11);
    let y = random_floats(n, 12);
    let exact: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a.mul_add(*x, *y)).collect();

    let axpy = kernel(
        "half_bf16_axpy.cu",
        include_str!("kernels/half_bf16_axpy.cu"),
        "half_bf16_axpy",
    );
    let dx = DeviceBuffer::from_slice(&x).unwrap();
    let dy = DeviceBuffer::from_slice(&y).unwrap();
    let mut out_half = DeviceBuffer::<f32>::alloc(n).unwrap();
    let mut out_bf16 = DeviceBuffer::<f32>::alloc(n).unwrap();
    // NaN everywhere: an element the kernel misses fails every comparison.
    out_half.fill_bytes(0xff).unwrap();
    out_bf16.fill_bytes(0xff).unwrap();
    // SAFETY: half_bf16_axpy(float, const float*, const float*, float*, float*, unsigned long
    // long) gets a float, four buffers of n floats (x and y only read, the two outputs lent
    // mutably) and n; each thread i < n reads x[i], y[i] and writes out_half[i], out_bf16[i].
    // The copies below are on the same stream, after the kernel, and every buffer lives until
    // the end of the test.
    unsafe {
        axpy.launch(
            &LaunchConfig::for_elements(n, 256),
            (a, &dx, &dy, &mut out_half, &mut out_bf16, n as u64),
        )
    }
    .unwrap();

    // x and y rounded to the format (unit roundoff u) and the fused result rounded once: the
    // error is at most u * (|a x| + |y| + |a x + y|) plus what underflows in the last bits.
    for (name, out, unit_roundoff) in [
        ("half", &out_half, 2f32.powi(-11)),
        ("bfloat16", &out_bf16, 2f32.powi(-8)),
    ] {
        let got = out.to_vec().unwrap();
        let bound = |i: usize| {
            unit_roundoff * 1.01 * ((a * x[i]).abs() + y[i].abs() + exact[i].abs()) + 1e-7
        };
        let wrong = outside_tolerance(&got, &exact, bound);
        assert!(wrong.is_empty(), "{name}: (index, got, expected) {wrong:?}");
        // The results really are of the narrow format, not float arithmetic passed through.
        let rounded = got.iter().filter(|v| v.to_bits() & 0x1fff == 0).count();
        assert_eq!(
            rounded, n,
            "{name}: results with more precision than the format has"
        );
    }
}

#[test]
#[ignore = "gpu: cuda::std::complex a*b + conj(a) on 2^20 random pairs against the CPU"]
fn cuda_std_complex_arithmetic_matches_the_cpu() {
    let n = 1usize << 20;
    let pairs = |seed| -> Vec<[f32; 2]> {
        random_floats(2 * n, seed)
            .chunks_exact(2)
            .map(|pair| [pair[0], pair[1]])
            .collect()
    };
    let a = pairs(21);
    let b = pairs(22);

    let multiply = kernel(
        "complex_multiply.cu",
        include_str!("kernels/complex_multiply.cu"),
        "complex_multiply",
    );
    let da = DeviceBuffer::from_slice(&a).unwrap();
    let db = DeviceBuffer::from_slice(&b).unwrap();
    let mut out = DeviceBuffer::<[f32; 2]>::alloc(n).unwrap();
    out.fill_bytes(0xff).unwrap();
    // SAFETY: complex_multiply(const complex<float>*, const complex<float>*, complex<float>*,
    // unsigned long long) gets three buffers of n [f32; 2], which is cuda::std::complex<float>'s
    // layout (real part, then imaginary; the allocations are aligned far beyond its 8 bytes),
    // a and b only read, out lent mutably, and n; thread i < n touches element i only. The copy
    // below follows on the same stream and the buffers live until the end of the test.
    unsafe {
        multiply.launch(
            &LaunchConfig::for_elements(n, 256),
            (&da, &db, &mut out, n as u64),
        )
    }
    .unwrap();

    let got = out.to_vec().unwrap();
    let (mut got_flat, mut expected, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    for ((&[ar, ai], &[br, bi]), &[gr, gi]) in a.iter().zip(&b).zip(&got) {
        got_flat.extend([gr, gi]);
        expected.extend([ar * br - ai * bi + ar, ar * bi + ai * br - ai]);
        // Each part is a sum of three terms rounded in float, perhaps fused differently.
        scale.push((ar * br).abs() + (ai * bi).abs() + ar.abs());
        scale.push((ar * bi).abs() + (ai * br).abs() + ai.abs());
    }
    let wrong = outside_tolerance(&got_flat, &expected, |i| 4.0 * f32::EPSILON * scale[i]);
    assert!(wrong.is_empty(), "(index, got, expected) {wrong:?}");
}

#[test]
#[ignore = "gpu: CUB BlockReduce sums of 1024-int tiles over 10^6 + 3 random ints against the CPU"]
fn cub_block_reduce_sums_each_tile_exactly() {
    // Not a multiple of the 1024 ints a block sums: the last block is partly empty.
    let n = 1_000_003usize;
    let tile = 256 * 4;
    let mut rng = fastrand::Rng::with_seed(31);
    let values: Vec<i32> = (0..n).map(|_| rng.i32(-1_000_000..=1_000_000)).collect();
    let expected: Vec<i64> = values
        .chunks(tile)
        .map(|chunk| chunk.iter().map(|&v| i64::from(v)).sum())
        .collect();
    let blocks = expected.len();

    let block_sum = kernel(
        "cub_block_sum.cu",
        include_str!("kernels/cub_block_sum.cu"),
        "cub_block_sum",
    );
    let input = DeviceBuffer::from_slice(&values).unwrap();
    let mut sums = DeviceBuffer::<i64>::alloc(blocks).unwrap();
    sums.fill_bytes(0x5a).unwrap();
    // SAFETY: cub_block_sum(const int*, long long*, unsigned long long) gets a buffer of n i32
    // (read only, and only below n), a buffer of `blocks` i64 lent mutably, and n; it runs
    // `blocks` = ceil(n / 1024) blocks of the 256 threads it is written for, block b writing
    // block_sums[b] only. Its shared memory is static. The copy below follows on the same
    // stream and the buffers live until the end of the test.
    unsafe {
        block_sum.launch(
            &LaunchConfig::new(u32::try_from(blocks).unwrap(), 256),
            (&input, &mut sums, n as u64),
        )
    }
    .unwrap();
    assert_eq!(sums.to_vec().unwrap(), expected);
}
