//! The launch path allocates nothing up to 32 arguments: building the arguments (a tuple or an
//! `ArgList`), checking them and the configuration, and packing the argument pointers run under
//! a counting global allocator (this binary's own) and must not allocate.

use cudyn::launch::{check_arguments, check_config, INLINE_ARGS};
use cudyn::{
    ArgList, DeviceBuffer, DeviceLimits, DeviceRepr, KernelArgs, LaunchConfig, ParamLayout,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

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
const LAYOUT: [ParamLayout; 5] = [
    ParamLayout {
        offset: 0,
        size: 16,
    },
    ParamLayout {
        offset: 16,
        size: 8,
    },
    ParamLayout {
        offset: 24,
        size: 8,
    },
    ParamLayout {
        offset: 32,
        size: 8,
    },
    ParamLayout {
        offset: 40,
        size: 4,
    },
];

/// `void k(char c0, double d0, int i0, float* p0, char c1, ...)`: 8 groups of those 4
/// parameters, 32 in all, each group 32 bytes.
fn layout_of_32() -> Vec<ParamLayout> {
    (0..32)
        .map(|index| {
            let (offset, size) = [(0, 1), (8, 8), (16, 4), (24, 8)][index % 4];
            ParamLayout {
                offset: 32 * (index / 4) + offset,
                size,
            }
        })
        .collect()
}

const LIMITS: DeviceLimits = DeviceLimits::SM_90;

#[test]
fn the_counter_sees_allocations() {
    // Without this, a broken counter would make the test below pass vacuously.
    let counted = allocations_in(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert_eq!(counted, 1);
}

/// Checks `args` and `config` as a launch does, packs the argument pointers, and returns how
/// many were packed (all non-null), or `None` when the check refused the arguments.
fn check_and_pack(
    params: &[ParamLayout],
    config: &LaunchConfig<'_>,
    args: impl KernelArgs,
) -> Option<usize> {
    check_arguments(params, args.layouts()).ok()?;
    check_config(config, &LIMITS).ok()?;
    let count = args.layouts().len();
    args.with_pointers(|pointers| {
        // SAFETY: `with_pointers` hands over one pointer per argument.
        let pointers = unsafe { std::slice::from_raw_parts(pointers, count) };
        std::hint::black_box(pointers)
            .iter()
            .filter(|p| !p.is_null())
            .count()
    })
    .into()
}

#[test]
fn checking_and_packing_a_tuple_of_5_allocates_nothing() {
    // Empty buffers need no device, so this runs anywhere; their argument code is the same.
    let x = DeviceBuffer::<f32>::alloc(0).unwrap();
    let mut y = DeviceBuffer::<f32>::alloc(0).unwrap();
    let coefficients = Coefficients {
        a: 2.0,
        b: 1.0,
        scale: 0.5,
    };
    let config = LaunchConfig::new((4096, 2), 256).shared_mem(1024);
    let mut packed = 0;
    let counted = allocations_in(|| {
        for _ in 0..1000 {
            let args = (coefficients, &x, &mut y, 1u64 << 26, 3i32);
            packed += check_and_pack(&LAYOUT, &config, &args).unwrap();
            // A rejected launch is rejected without allocating too (the error is built later).
            assert_eq!(check_and_pack(&LAYOUT[..4], &config, &args), None);
        }
    });
    assert_eq!(packed, 5000, "every argument was packed");
    assert_eq!(counted, 0, "the launch path allocated {counted} times");
}

#[test]
fn checking_and_packing_32_arguments_as_a_tuple_or_a_list_allocates_nothing() {
    let p = DeviceBuffer::<f32>::alloc(0).unwrap();
    let layout = layout_of_32();
    let config = LaunchConfig::new(1, 32);
    let (mut tuples, mut lists) = (0, 0);
    let counted = allocations_in(|| {
        for round in 0..1000 {
            let (c, d, i) = (round as i8, f64::from(round), round);
            #[rustfmt::skip]
            let tuple = (
                c, d, i, &p, c, d, i, &p, c, d, i, &p, c, d, i, &p,
                c, d, i, &p, c, d, i, &p, c, d, i, &p, c, d, i, &p,
            );
            tuples += check_and_pack(&layout, &config, tuple).unwrap();
            // The macro borrows its arguments for the statement, as in a launch call.
            #[rustfmt::skip]
            let packed = check_and_pack(&layout, &config, cudyn::args![
                c, d, i, &p, c, d, i, &p, c, d, i, &p, c, d, i, &p,
                c, d, i, &p, c, d, i, &p, c, d, i, &p, c, d, i, &p,
            ]);
            lists += packed.unwrap();
            // The same, pushed one by one.
            let (c, d, i, p) = (c, d, i, &p);
            let mut list = ArgList::new();
            for _ in 0..8 {
                list.push(&c).push(&d).push(&i).push(p);
            }
            lists += check_and_pack(&layout, &config, &list).unwrap();
            // One argument too many is refused, still without allocating.
            assert_eq!(check_and_pack(&layout[..31], &config, &list), None);
        }
    });
    assert_eq!(
        (tuples, lists),
        (32_000, 64_000),
        "every argument was packed"
    );
    assert_eq!(counted, 0, "the launch path allocated {counted} times");
}

#[test]
fn a_list_beyond_its_inline_storage_moves_to_the_heap_once() {
    // The boundary is real: one argument past the inline storage allocates, once per list.
    let values = [0u64; INLINE_ARGS + 1];
    let counted = allocations_in(|| {
        let mut list = ArgList::new();
        for value in &values {
            list.push(value);
        }
        assert_eq!(list.len(), INLINE_ARGS + 1);
    });
    assert_eq!(
        counted, 3,
        "the layouts, the argument types and the pointers each move once"
    );
}
