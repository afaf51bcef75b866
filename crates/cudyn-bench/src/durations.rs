//! The median of timed samples, shared by the benchmark programs in `src/bin` (through
//! `#[path]`: they are separate crates).

use std::time::Duration;

/// The median of `samples` (the upper one of an even count). Every benchmark takes at least one
/// sample before it asks.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}
