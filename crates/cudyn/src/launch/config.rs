//! The launch configuration ([`LaunchConfig`], [`Dim3`]) and its check against the device's
//! limits ([`check_config`]), which runs before every launch.

use crate::device::DeviceLimits;
pub use crate::mismatch::ConfigViolation;
use crate::stream::Stream;

/// Grid or block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent along x.
    pub x: u32,
    /// Extent along y.
    pub y: u32,
    /// Extent along z.
    pub z: u32,
}

impl Dim3 {
    /// The number of elements (threads or blocks) the dimensions span.
    #[inline]
    pub fn volume(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }

    fn axes(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

/// How a kernel is launched: grid and block dimensions, dynamic shared memory, stream, cluster
/// dimensions and whether the launch is cooperative.
///
/// ```
/// use cudyn::{Dim3, LaunchConfig};
///
/// // Enough blocks of 256 threads for a million elements.
/// let config = LaunchConfig::for_elements(1_000_000, 256);
/// assert_eq!((config.grid.x, config.block.x), (3907, 256));
///
/// // A 2D grid with 16 KiB of dynamic shared memory per block, in clusters of two blocks.
/// let config = LaunchConfig::new((64, 64), (16, 16))
///     .shared_mem(16 * 1024)
///     .cluster((2, 1));
/// assert_eq!(config.grid, Dim3 { x: 64, y: 64, z: 1 });
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct LaunchConfig<'s> {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// The stream; `None` is the legacy default stream.
    pub stream: Option<&'s Stream>,
    /// Thread-block cluster dimensions (compute capability 9.0+); must divide the grid.
    pub cluster: Option<Dim3>,
    /// Launch cooperatively: all blocks resident at once, so they may synchronize grid-wide.
    pub cooperative: bool,
}

impl LaunchConfig<'static> {
    /// `grid` blocks of `block` threads, on the default stream, no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            stream: None,
            cluster: None,
            cooperative: false,
        }
    }

    /// A 1-D launch with one thread per element: enough blocks of `block` threads to cover
    /// `elements` (the kernel must ignore threads past the end).
    pub fn for_elements(elements: usize, block: u32) -> Self {
        let block = block.max(1);
        let blocks = elements.div_ceil(block as usize).max(1);
        Self::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }
}

impl<'s> LaunchConfig<'s> {
    /// Sets the dynamic shared memory per block.
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Launches on `stream`.
    pub fn stream<'t>(self, stream: &'t Stream) -> LaunchConfig<'t> {
        LaunchConfig {
            stream: Some(stream),
            ..self
        }
    }

    /// Sets the cluster dimensions.
    pub fn cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// Makes the launch cooperative: all blocks resident at once, so that they may synchronize
    /// grid-wide. The grid must fit on the device at once; [`Kernel::max_cooperative_grid`]
    /// gives the largest that does, and a larger one is refused before the driver with
    /// [`ConfigViolation::CooperativeGridTooLarge`].
    ///
    /// [`Kernel::max_cooperative_grid`]: crate::Kernel::max_cooperative_grid
    pub fn cooperative(mut self, cooperative: bool) -> Self {
        self.cooperative = cooperative;
        self
    }
}

/// Checks a launch configuration against a device's limits. Pure and allocation-free.
pub fn check_config(
    config: &LaunchConfig<'_>,
    limits: &DeviceLimits,
) -> Result<(), ConfigViolation> {
    if within_limits(config, limits) {
        return Ok(());
    }
    first_violation(config, limits)
}

/// Whether a configuration without clusters is within every limit: the launch path's common
/// case, decided without branching on each limit (`&` evaluates them all) and without building
/// an error. Anything else goes to [`first_violation`], which finds and names the problem.
#[inline]
pub(crate) fn within_limits(config: &LaunchConfig<'_>, limits: &DeviceLimits) -> bool {
    // `extent - 1 < max` (wrapping) is `1 <= extent <= max` in one comparison.
    let within = |extent: u32, max: u32| extent.wrapping_sub(1) < max;
    let dims = |dims: Dim3, max: [u32; 3]| {
        within(dims.x, max[0]) & within(dims.y, max[1]) & within(dims.z, max[2])
    };
    let (grid, block) = (config.grid, config.block);
    dims(grid, limits.max_grid)
        & dims(block, limits.max_block)
        & (block.volume() <= u64::from(limits.max_threads_per_block))
        & (config.shared_mem_bytes <= limits.max_shared_per_block_optin)
        & (!config.cooperative | limits.cooperative_launch)
        & config.cluster.is_none()
}

/// The first limit `config` exceeds, in the order users think of them, or `Ok` when there is
/// none.
#[cold]
#[inline(never)]
fn first_violation(
    config: &LaunchConfig<'_>,
    limits: &DeviceLimits,
) -> Result<(), ConfigViolation> {
    // The thread count first: a block of 2048 threads is "too many threads", the limit users
    // know, before it is "x exceeds 1024".
    let threads = config.block.volume();
    if threads > u64::from(limits.max_threads_per_block) {
        return Err(ConfigViolation::BlockTooLarge {
            threads,
            max: limits.max_threads_per_block,
        });
    }
    for (what, dims, max) in [
        ("grid", config.grid, limits.max_grid),
        ("block", config.block, limits.max_block),
    ] {
        if dims.volume() == 0 {
            return Err(ConfigViolation::Empty { what });
        }
        for ((axis, given), max) in ['x', 'y', 'z'].into_iter().zip(dims.axes()).zip(max) {
            if given > max {
                return Err(ConfigViolation::Dimension {
                    what,
                    axis,
                    given,
                    max,
                });
            }
        }
    }
    if config.shared_mem_bytes > limits.max_shared_per_block_optin {
        return Err(ConfigViolation::SharedMemory {
            given: config.shared_mem_bytes,
            max: limits.max_shared_per_block_optin,
        });
    }
    if config.cooperative && !limits.cooperative_launch {
        return Err(ConfigViolation::CooperativeUnsupported);
    }
    if let Some(cluster) = config.cluster {
        if !limits.cluster_launch {
            return Err(ConfigViolation::ClusterUnsupported);
        }
        if cluster.volume() == 0 {
            return Err(ConfigViolation::Empty { what: "cluster" });
        }
        for ((axis, grid), cluster) in ['x', 'y', 'z']
            .into_iter()
            .zip(config.grid.axes())
            .zip(cluster.axes())
        {
            if grid % cluster != 0 {
                return Err(ConfigViolation::ClusterDoesNotDivideGrid {
                    axis,
                    grid,
                    cluster,
                });
            }
        }
    }
    Ok(())
}

/// Checks that a cooperative launch of `grid` fits on the device at once: at most
/// `per_multiprocessor` blocks (the kernel's occupancy for the launch's block size and dynamic
/// shared memory) on each of `multiprocessors` multiprocessors. Pure; the launch asks the driver
/// for the occupancy, only for cooperative launches.
pub fn check_cooperative_grid(
    grid: Dim3,
    per_multiprocessor: u32,
    multiprocessors: u32,
) -> Result<(), ConfigViolation> {
    let blocks = grid.volume();
    let max = u64::from(per_multiprocessor) * u64::from(multiprocessors);
    if blocks <= max {
        return Ok(());
    }
    Err(ConfigViolation::CooperativeGridTooLarge {
        blocks,
        max,
        per_multiprocessor,
        multiprocessors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_check_agrees_with_the_full_one() {
        // Each axis 0, at its limit, just past it, or anywhere below.
        fn dim(rng: &mut fastrand::Rng, max: u32) -> Dim3 {
            let mut pick = || match rng.u8(0..4) {
                0 => 0,
                1 => max,
                2 => max + 1,
                _ => rng.u32(1..=max),
            };
            Dim3 {
                x: pick(),
                y: pick(),
                z: pick(),
            }
        }
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let config = LaunchConfig::new(dim(&mut rng, 70_000), dim(&mut rng, 1024))
                .shared_mem(rng.u32(0..240 * 1024))
                .cooperative(rng.bool());
            let limits = DeviceLimits {
                cooperative_launch: rng.bool(),
                ..H200
            };
            assert_eq!(
                within_limits(&config, &limits),
                first_violation(&config, &limits).is_ok(),
                "{config:?}"
            );
        }
    }

    const H200: DeviceLimits = DeviceLimits::SM_90;

    #[test]
    fn configurations_within_the_limits_pass() {
        assert_eq!(check_config(&LaunchConfig::new(1, 1), &H200), Ok(()));
        let big = LaunchConfig::new((1 << 20, 2, 2), (32, 32, 1))
            .shared_mem(100 * 1024)
            .cluster((2, 1, 1))
            .cooperative(true);
        assert_eq!(check_config(&big, &H200), Ok(()));
    }

    #[test]
    fn configurations_beyond_the_limits_name_the_limit() {
        let cases = [
            (
                LaunchConfig::new(1, 1025),
                ConfigViolation::BlockTooLarge {
                    threads: 1025,
                    max: 1024,
                },
            ),
            (
                LaunchConfig::new(1, (1, 1, 65)),
                ConfigViolation::Dimension {
                    what: "block",
                    axis: 'z',
                    given: 65,
                    max: 64,
                },
            ),
            (
                LaunchConfig::new(1, (64, 32, 1)),
                ConfigViolation::BlockTooLarge {
                    threads: 2048,
                    max: 1024,
                },
            ),
            (
                LaunchConfig::new((1, 70_000), 1),
                ConfigViolation::Dimension {
                    what: "grid",
                    axis: 'y',
                    given: 70_000,
                    max: 65535,
                },
            ),
            (
                LaunchConfig::new(0, 1),
                ConfigViolation::Empty { what: "grid" },
            ),
            (
                LaunchConfig::new(1, 1).shared_mem(228 * 1024),
                ConfigViolation::SharedMemory {
                    given: 228 * 1024,
                    max: 227 * 1024,
                },
            ),
            (
                LaunchConfig::new(6, 1).cluster(4),
                ConfigViolation::ClusterDoesNotDivideGrid {
                    axis: 'x',
                    grid: 6,
                    cluster: 4,
                },
            ),
        ];
        for (config, violation) in cases {
            assert_eq!(check_config(&config, &H200), Err(violation));
        }
        let old = DeviceLimits {
            cooperative_launch: false,
            cluster_launch: false,
            ..H200
        };
        assert_eq!(
            check_config(&LaunchConfig::new(1, 1).cooperative(true), &old),
            Err(ConfigViolation::CooperativeUnsupported)
        );
        assert_eq!(
            check_config(&LaunchConfig::new(2, 1).cluster(2), &old),
            Err(ConfigViolation::ClusterUnsupported)
        );
    }

    #[test]
    fn a_cooperative_grid_fits_up_to_occupancy_times_multiprocessors() {
        let multiprocessors = H200.multiprocessors;
        // 8 blocks of 256 threads per multiprocessor: 1056 on 132 multiprocessors.
        assert_eq!(
            check_cooperative_grid(Dim3::from(1056), 8, multiprocessors),
            Ok(())
        );
        assert_eq!(
            check_cooperative_grid((33, 32, 1).into(), 8, multiprocessors),
            Ok(())
        );
        let violation = check_cooperative_grid(Dim3::from(1057), 8, multiprocessors).unwrap_err();
        assert_eq!(
            violation,
            ConfigViolation::CooperativeGridTooLarge {
                blocks: 1057,
                max: 1056,
                per_multiprocessor: 8,
                multiprocessors,
            }
        );
        let message = violation.to_string();
        for part in [
            "1057 blocks",
            "8 per multiprocessor",
            "132 multiprocessors",
            "launch at most 1056 blocks",
            "Kernel::max_cooperative_grid",
            "fewer threads or less dynamic shared memory per block",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message:?}");
        }
        // Every axis counts, and the product does not overflow.
        assert!(check_cooperative_grid((1057, 1, 1).into(), 8, multiprocessors).is_err());
        assert!(check_cooperative_grid((1, 1, 1057).into(), 8, multiprocessors).is_err());
        let huge = Dim3::from((u32::MAX, 65535, 65535));
        assert!(check_cooperative_grid(huge, u32::MAX, multiprocessors).is_err());
    }

    #[test]
    fn a_block_that_fits_nowhere_is_named_as_such() {
        let violation = check_cooperative_grid(Dim3::from(1), 0, 132).unwrap_err();
        assert_eq!(
            violation,
            ConfigViolation::CooperativeGridTooLarge {
                blocks: 1,
                max: 0,
                per_multiprocessor: 0,
                multiprocessors: 132,
            }
        );
        let message = violation.to_string();
        assert!(message.contains("not even one block"), "{message}");
        assert!(message.contains("fewer threads"), "{message}");
    }

    #[test]
    fn for_elements_covers_every_element() {
        let config = LaunchConfig::for_elements(1000, 256);
        assert_eq!(config.grid, Dim3 { x: 4, y: 1, z: 1 });
        assert_eq!(config.block, Dim3 { x: 256, y: 1, z: 1 });
        assert_eq!(LaunchConfig::for_elements(0, 256).grid.x, 1);
    }
}
