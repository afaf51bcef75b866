//! Cooperative launches on a GPU: a grid-wide reduction with cooperative groups, compiled by
//! NVRTC with CUDA's headers found by default, on the largest grid that fills the device; and
//! grids too large to be resident at once, refused before the driver.
//! Run with `cargo test -p cudyn --test gpu_cooperative -- --include-ignored` on a machine with a
//! GPU.

use cudyn::{
    ConfigViolation, Device, DeviceAttribute, DeviceBuffer, Error, Kernel, LaunchConfig, Program,
};

const GRID_SUM: &str = include_str!("kernels/grid_sum_cooperative.cu");

/// Writes each block's index: a kernel that runs correctly whether or not its blocks are all
/// resident at once, so it may be launched on any grid, cooperatively or not.
const BLOCK_IDS: &str = r#"
extern "C" __global__ void block_ids(unsigned int* out) {
    if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x;
}
"#;

const BLOCK_THREADS: u32 = 256;

fn kernel(source: &str, file: &str, name: &str) -> Kernel {
    Program::new(source)
        .name(file)
        .load()
        .unwrap_or_else(|error| panic!("{file} compiles with CUDA's default headers: {error}"))
        .kernel(name)
        .unwrap()
}

/// Blocks of `BLOCK_THREADS` threads of `kernel` resident per multiprocessor (without dynamic
/// shared memory), and the device's multiprocessors, read from the device itself rather than
/// from cudyn's cached limits.
fn residency(kernel: &Kernel) -> (u32, u32) {
    let count = Device::get(0)
        .and_then(|device| device.attribute(DeviceAttribute::MultiprocessorCount))
        .expect("GPU tests need a GPU: device 0 is not usable");
    let per_multiprocessor = kernel
        .max_active_blocks_per_multiprocessor(BLOCK_THREADS, 0)
        .unwrap();
    (per_multiprocessor, u32::try_from(count).unwrap())
}

/// `len` random floats in [0, 1) from a fixed seed: all positive, so that a relative error of
/// the sum bounds the error of every term's contribution (no cancellation).
fn random_positive_floats(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| rng.f32()).collect()
}

/// The relative error f32 summation may reach when every term passes through `additions`
/// additions: at most `additions` roundings of half an f32 epsilon each, doubled for margin.
fn f32_sum_tolerance(additions: u64) -> f64 {
    additions as f64 * f64::from(f32::EPSILON)
}

fn assert_close(got: f32, expected: f64, tolerance: f64, what: &str) {
    let error = (f64::from(got) - expected).abs() / expected;
    assert!(
        error <= tolerance,
        "{what}: the GPU gives {got}, the CPU {expected} (relative error {error:e} > {tolerance:e})"
    );
}

/// The launch a too-large cooperative grid must get instead of reaching the driver.
fn expect_too_large(
    refused: cudyn::Result<()>,
    blocks: u32,
    per_multiprocessor: u32,
    multiprocessors: u32,
) {
    let max = u64::from(per_multiprocessor) * u64::from(multiprocessors);
    let expected = ConfigViolation::CooperativeGridTooLarge {
        blocks: u64::from(blocks),
        max,
        per_multiprocessor,
        multiprocessors,
    };
    match refused {
        Err(Error::LaunchConfig { violation, .. }) => {
            assert_eq!(violation, expected);
            let message = violation.to_string();
            let at_most = format!("launch at most {max} blocks");
            assert!(message.contains(&at_most), "{message}");
        }
        other => panic!("expected {expected:?} before the driver, got {other:?}"),
    }
}

#[test]
#[ignore = "gpu: a cooperative grid-wide sum of 2^24 random floats on the largest resident grid, \
            against the CPU; one block more is refused before the driver"]
fn a_grid_sum_fills_the_device_and_one_block_more_is_refused() {
    let grid_sum = kernel(GRID_SUM, "grid_sum_cooperative.cu", "grid_sum");
    let (per_multiprocessor, multiprocessors) = residency(&grid_sum);
    let grid = grid_sum.max_cooperative_grid(BLOCK_THREADS, 0).unwrap();
    assert_eq!(grid, per_multiprocessor * multiprocessors);
    assert!(
        grid >= multiprocessors,
        "{grid} blocks leave some of the {multiprocessors} multiprocessors idle"
    );

    let n = 1usize << 24;
    let data = random_positive_floats(n, 14);
    let input = DeviceBuffer::from_slice(&data).unwrap();
    // One partial more than the grid: that last one must stay untouched.
    let mut partial = DeviceBuffer::<f32>::alloc(grid as usize + 1).unwrap();
    let mut out = DeviceBuffer::<f32>::alloc(1).unwrap();
    // NaN everywhere: a partial the kernel misses cannot match the reference.
    partial.fill_bytes(0xff).unwrap();
    out.fill_bytes(0xff).unwrap();

    let config = LaunchConfig::new(grid, BLOCK_THREADS).cooperative(true);
    // SAFETY: grid_sum takes (const float*, float*, float*, unsigned long long), given as a
    // buffer read only, two buffers lent mutably and a u64. It reads in[i] for i < n (input holds
    // n floats), writes partial[blockIdx.x] for blockIdx.x < grid (partial holds grid + 1) and
    // out[0] (out holds 1), and uses 4 KiB of static shared memory, no dynamic. The launch is
    // cooperative, as its grid.sync() needs. The copies below run on the legacy default stream,
    // after the kernel, and every buffer lives until the end of the test.
    unsafe { grid_sum.launch(&config, (&input, &mut partial, &mut out, n as u64)) }.unwrap();
    let partials = partial.to_vec().unwrap();
    let sum = out.to_vec().unwrap()[0];

    // Thread r of the grid adds elements r, r + threads, r + 2 * threads, ...; block b holds
    // threads b * BLOCK_THREADS up to the next block.
    let threads = grid as usize * BLOCK_THREADS as usize;
    let mut expected_partials = vec![0f64; grid as usize];
    for (i, &value) in data.iter().enumerate() {
        expected_partials[(i % threads) / BLOCK_THREADS as usize] += f64::from(value);
    }
    let per_thread = n.div_ceil(threads) as u64;
    let tree = u64::from(BLOCK_THREADS.ilog2());
    let partial_tolerance = f32_sum_tolerance(per_thread + tree);
    for (block, (&got, &expected)) in partials.iter().zip(&expected_partials).enumerate() {
        assert_close(
            got,
            expected,
            partial_tolerance,
            &format!("partial {block}"),
        );
    }
    assert!(
        partials[grid as usize].is_nan(),
        "the kernel wrote partial[{grid}], past its grid of {grid} blocks"
    );
    let expected_sum: f64 = data.iter().copied().map(f64::from).sum();
    let sum_tolerance = f32_sum_tolerance(per_thread + tree + u64::from(grid));
    assert_close(sum, expected_sum, sum_tolerance, "the sum");

    // One block more cannot be resident at once: refused, and nothing runs.
    out.fill_bytes(0x5a).unwrap();
    let too_large = LaunchConfig::new(grid + 1, BLOCK_THREADS).cooperative(true);
    // SAFETY: refused before the driver (asserted below); were it to run, grid + 1 blocks would
    // write partial[0..=grid], within its grid + 1 floats, and everything else is as above.
    let refused =
        unsafe { grid_sum.launch(&too_large, (&input, &mut partial, &mut out, n as u64)) };
    expect_too_large(refused, grid + 1, per_multiprocessor, multiprocessors);

    // Dynamic shared memory counts: with 32 KiB per block fewer blocks fit, and a grid that
    // fits without it is refused with it.
    let shared = 32 * 1024;
    let per_multiprocessor_shared = grid_sum
        .max_active_blocks_per_multiprocessor(BLOCK_THREADS, shared)
        .unwrap();
    let grid_shared = grid_sum
        .max_cooperative_grid(BLOCK_THREADS, shared)
        .unwrap();
    assert!(
        grid_shared < grid,
        "{grid_shared} blocks with {shared} bytes of shared memory, {grid} without"
    );
    let too_large_shared = LaunchConfig::new(grid_shared + 1, BLOCK_THREADS)
        .shared_mem(shared)
        .cooperative(true);
    // SAFETY: refused before the driver (asserted below); were it to run, grid_shared + 1 <=
    // grid blocks would stay within the buffers as above, and the kernel uses no dynamic shared
    // memory.
    let refused = unsafe {
        grid_sum.launch(
            &too_large_shared,
            (&input, &mut partial, &mut out, n as u64),
        )
    };
    expect_too_large(
        refused,
        grid_shared + 1,
        per_multiprocessor_shared,
        multiprocessors,
    );

    cudyn::synchronize().unwrap();
    let untouched = out.to_vec().unwrap()[0];
    assert_eq!(untouched.to_bits(), 0x5a5a_5a5a, "a refused launch ran");
    let partials_after = partial.to_vec().unwrap();
    assert!(
        partials_after
            .iter()
            .zip(&partials)
            .all(|(after, before)| after.to_bits() == before.to_bits()),
        "a refused launch wrote the partials"
    );
}

#[test]
#[ignore = "gpu: the same too-large grid is refused cooperatively and runs without the flag"]
fn only_cooperative_launches_are_held_to_a_resident_grid() {
    let block_ids = kernel(BLOCK_IDS, "block_ids.cu", "block_ids");
    let (per_multiprocessor, multiprocessors) = residency(&block_ids);
    let grid = block_ids.max_cooperative_grid(BLOCK_THREADS, 0).unwrap() + 1;
    let mut ids = DeviceBuffer::<u32>::alloc(grid as usize).unwrap();
    // u32::MAX everywhere: no block index, so a block that does not run leaves a mismatch.
    ids.fill_bytes(0xff).unwrap();

    let config = LaunchConfig::new(grid, BLOCK_THREADS);
    // SAFETY: block_ids takes an unsigned int*, given as a buffer lent mutably; it writes
    // out[blockIdx.x] for blockIdx.x < grid, and ids holds grid entries. It needs no grid-wide
    // synchronization, so any launch of it is sound. The copy below runs on the legacy default
    // stream, after the kernels, and ids lives until the end of the test.
    let cooperative = unsafe { block_ids.launch(&config.cooperative(true), (&mut ids,)) };
    expect_too_large(cooperative, grid, per_multiprocessor, multiprocessors);
    cudyn::synchronize().unwrap();
    assert!(
        ids.to_vec().unwrap().iter().all(|&id| id == u32::MAX),
        "the refused cooperative launch ran"
    );

    // SAFETY: as above.
    unsafe { block_ids.launch(&config, (&mut ids,)) }.unwrap();
    let ids = ids.to_vec().unwrap();
    let expected: Vec<u32> = (0..grid).collect();
    assert_eq!(
        ids, expected,
        "every block of the non-cooperative launch ran"
    );
}
