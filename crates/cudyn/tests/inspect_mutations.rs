//! Hostile input: real images (cubins, PTX, LTO-IR, fatbins plain and compressed, a host object)
//! truncated, bit-flipped and overwritten with huge offsets and sizes, for a few seconds. No
//! input may panic, hang, or make cudyn hold much more memory than the input's size, whether
//! inspected whole or searched for one kernel's layout or every kernel's name.
//! (`fuzz/` has a cargo-fuzz target for longer runs.)

mod fixtures;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes and their peak, so the test can bound what inspection holds.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A small deterministic generator (xorshift64*), so a failure can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that break naive parsers when written at a random offset.
const HOSTILE: [u64; 6] = [
    0,
    u64::MAX,
    u32::MAX as u64,
    0x7fff_ffff,
    0x8000_0000_0000_0000,
    1 << 40,
];

fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 => bytes.truncate(rng.below(bytes.len() + 1)),
            1 if !bytes.is_empty() => {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
            2 if bytes.len() >= 8 => {
                // Favour the headers, where offsets and sizes live.
                let span = if rng.below(2) == 0 {
                    256.min(bytes.len() - 7)
                } else {
                    bytes.len() - 7
                };
                let at = rng.below(span);
                let value = HOSTILE[rng.below(HOSTILE.len())];
                let width = [2, 4, 8][rng.below(3)];
                bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            }
            _ if !bytes.is_empty() => {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next() as u8;
            }
            _ => {}
        }
    }
    bytes
}

#[test]
fn mutated_images_never_panic_hang_or_balloon() {
    let fixtures = fixtures::fixtures();
    let originals: Vec<Vec<u8>> = fixtures
        .all_files()
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    // CUDYN_MUTATION_SECONDS runs longer by hand; CI keeps the suite fast.
    let seconds = std::env::var("CUDYN_MUTATION_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = Duration::from_secs(seconds.unwrap_or(3));
    let slowest_allowed = Duration::from_secs(1);
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let started = Instant::now();
    let mut cases = 0u32;
    while started.elapsed() < budget {
        for original in &originals {
            let input = mutate(&mut rng, original);
            let before = LIVE.load(Ordering::Relaxed);
            PEAK.store(before, Ordering::Relaxed);
            let one = Instant::now();
            // Errors are fine; panics fail the test on their own.
            let _ = cudyn::inspect::inspect(&input).map(|i| i.param_layout("saxpy"));
            // The searches that read only part of an image: one layout, every kernel's name.
            if let Ok(image) = cudyn::Image::new(&input[..]) {
                let _ = image.param_layout("saxpy");
                let _ = image.kernel_list();
            }
            let took = one.elapsed();
            let held = PEAK.load(Ordering::Relaxed).saturating_sub(before);
            // Besides what grows with the input, the zstd decoder may hold a fixed few MiB of
            // tables on a damaged stream (about 8 MiB seen).
            let bound = 64 * input.len() + (16 << 20);
            assert!(took < slowest_allowed, "case {cases} took {took:?}");
            assert!(
                held <= bound,
                "case {cases}: held {held} bytes for {} of input",
                input.len()
            );
            cases += 1;
        }
    }
    eprintln!("{cases} mutated images inspected in {budget:?}");
    assert!(cases > 100, "only {cases} cases in {budget:?}");
}
