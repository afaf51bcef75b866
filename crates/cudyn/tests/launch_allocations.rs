//! The launch path allocates nothing: argument checking, configuration checking and argument
//! packing run under a counting global allocator (this binary's own) and must not allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;

use cudyn::launch::{check_arguments, check_config, MAX_KERNEL_ARGS};
use cudyn::{DeviceBuffer, DeviceLimits, DeviceRepr, KernelArgs, LaunchConfig, Param};

/// Counts, per thread, the allocations made while that thread has counting switched on, so that
/// neither the harness' threads nor tests running in parallel disturb a count.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn note() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
    }
}

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The allocations `work` makes on this thread.
fn allocations_in(work: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|on| on.set(true));
    work();
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Coefficients {
    a: f32,
    b: f32,
    scale: f64,
}
// SAFETY: repr(C), numbers only, any bit pattern valid.
unsafe impl DeviceRepr for Coefficients {}

/// `void k(Coefficients c, const float* x, float* y, unsigned long long n, int flags)`.
const LAYOUT: [Param; 5] = [
    Param {
        offset: 0,
        size: 16,
    },
    Param {
        offset: 16,
        size: 8,
    },
    Param {
        offset: 24,
        size: 8,
    },
    Param {
        offset: 32,
        size: 8,
    },
    Param {
        offset: 40,
        size: 4,
    },
];

const LIMITS: DeviceLimits = DeviceLimits {
    max_threads_per_block: 1024,
    max_block: [1024, 1024, 64],
    max_grid: [i32::MAX as u32, 65535, 65535],
    max_shared_per_block: 48 * 1024,
    max_shared_per_block_optin: 227 * 1024,
    cooperative_launch: true,
    cluster_launch: true,
};

#[test]
fn the_counter_sees_allocations() {
    // Without this, a broken counter would make the test below pass vacuously.
    let counted = allocations_in(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert_eq!(counted, 1);
}

#[test]
fn checking_and_packing_arguments_allocate_nothing() {
    // Empty buffers need no device, so this runs anywhere; their argument code is the same.
    let x = DeviceBuffer::<f32>::alloc(0).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(0).unwrap();
    let coefficients = Coefficients {
        a: 2.0,
        b: 1.0,
        scale: 0.5,
    };
    let config = LaunchConfig::new((4096, 2), 256).shared_mem(1024);
    let mut packed = 0usize;
    let counted = allocations_in(|| {
        for _ in 0..1000 {
            let args = (coefficients, &x, &mut y, 1u64 << 26, 3i32);
            let layouts = std::hint::black_box(
                <(
                    Coefficients,
                    &DeviceBuffer<f32>,
                    &mut DeviceBuffer<f32>,
                    u64,
                    i32,
                )>::LAYOUTS,
            );
            assert!(check_arguments(&LAYOUT, layouts).is_ok());
            assert!(check_config(&config, &LIMITS).is_ok());
            // A rejected launch is rejected without allocating too (the error is built later).
            assert!(check_arguments(&LAYOUT[..4], layouts).is_err());
            let mut pointers: [*mut c_void; MAX_KERNEL_ARGS] =
                [std::ptr::null_mut(); MAX_KERNEL_ARGS];
            args.pack(&mut pointers);
            packed += std::hint::black_box(&pointers)
                .iter()
                .filter(|p| !p.is_null())
                .count();
        }
    });
    assert_eq!(packed, 5000, "every argument was packed");
    assert_eq!(counted, 0, "the launch path allocated {counted} times");
}
