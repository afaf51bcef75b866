//! The order two measured paths run in within a round, shared by the benchmark programs (those
//! in `src/bin` through `#[path]`: they are separate crates). Whatever runs first in a round
//! follows the work before it, which can slow it (a load right after an eager module load and
//! unload takes about 1 µs longer), so neither path may always be first.

/// Runs `first` and `second`, `first` before `second` in even rounds and after it in odd ones;
/// their results in the order given, or the first error.
pub fn in_turn<A, B, E>(
    round: usize,
    first: impl FnOnce() -> Result<A, E>,
    second: impl FnOnce() -> Result<B, E>,
) -> Result<(A, B), E> {
    if round.is_multiple_of(2) {
        let first = first()?;
        Ok((first, second()?))
    } else {
        let second = second()?;
        Ok((first()?, second))
    }
}
