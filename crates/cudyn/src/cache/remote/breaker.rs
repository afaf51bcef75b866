//! The circuit breaker of the remote tier: after repeated failures the remote is left alone for
//! a while, so that a Redis that is down or slow costs a program a few short timeouts, not one
//! per compile.

use std::time::{Duration, Instant};

/// Consecutive failures, and when the remote may be tried again after too many.
#[derive(Debug)]
pub(crate) struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

impl Breaker {
    pub(crate) const fn new() -> Breaker {
        Breaker {
            failures: 0,
            open_until: None,
        }
    }

    /// Whether the remote may be asked at `now`: the breaker is closed, or its cool-off is over
    /// (then one more failure opens it again at once).
    pub(crate) fn allows(&self, now: Instant) -> bool {
        self.open_until.is_none_or(|until| now >= until)
    }

    /// A call that answered: the failures are forgotten.
    pub(crate) fn succeeded(&mut self) {
        self.failures = 0;
        self.open_until = None;
    }

    /// A call that failed at `now`: the `threshold`th failure in a row opens the breaker for
    /// `cool_off`, and so does any failure after a cool-off.
    pub(crate) fn failed(&mut self, now: Instant, threshold: u32, cool_off: Duration) {
        self.failures = self.failures.saturating_add(1);
        if self.failures >= threshold.max(1) {
            self.open_until = Some(now + cool_off);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_opens_after_the_threshold_and_closes_after_the_cool_off() {
        let (start, cool_off) = (Instant::now(), Duration::from_secs(30));
        let mut breaker = Breaker::new();
        breaker.failed(start, 3, cool_off);
        breaker.failed(start, 3, cool_off);
        assert!(breaker.allows(start), "two failures of three");
        breaker.failed(start, 3, cool_off);
        assert!(!breaker.allows(start + Duration::from_secs(29)));
        let later = start + cool_off;
        assert!(breaker.allows(later), "the cool-off is over");
        breaker.failed(later, 3, cool_off);
        assert!(
            !breaker.allows(later),
            "one failure after a cool-off opens it again"
        );
        breaker.succeeded();
        assert!(breaker.allows(later));
        breaker.failed(later, 3, cool_off);
        assert!(breaker.allows(later), "a success forgot the failures");
    }
}
