//! Keeping recently released libraries loaded: when the last user of a shared library is
//! dropped, cudyn keeps it loaded in a short list, least recently released first out, so that
//! loading the same code again (the same source compiled again, the same file loaded again)
//! takes it back at once instead of loading it afresh.
//!
//! What is kept: only libraries that later loads would share. Code without device variables
//! (`__device__`, `__constant__`, `__managed__`) loaded with [`Sharing::Auto`] or
//! [`Sharing::Always`], whose kept library holds no state a later load could observe and costs
//! about its image's size; and code with variables loaded with [`Sharing::Always`], whose loads
//! share the variables anyway, counted with its uninitialized variables when their size is known
//! (a cubin's, not PTX's). Never a load with [`Sharing::Never`]. How many: at most
//! [`Retention::DEFAULT`] (16 libraries and 64 MiB) unless the environment or [`set_retained`]
//! says otherwise; [`release_retained`] unloads them now.
//!
//! [`Sharing::Auto`]: super::Sharing::Auto
//! [`Sharing::Always`]: super::Sharing::Always
//! [`Sharing::Never`]: super::Sharing::Never

use std::collections::VecDeque;
use std::sync::Arc;

use super::registry::Key;
use super::SHARED;

/// How many released libraries cudyn keeps loaded for a later identical load: at most
/// [`libraries`](Retention::libraries) of them and [`bytes`](Retention::bytes) of their images
/// (with their uninitialized variables) together, whichever is reached first; the least recently
/// released is unloaded first. A library larger alone than the byte budget is not kept.
///
/// ```
/// use cudyn::library::{set_retained, Retention};
/// // Keep up to 64 libraries within 256 MiB of images...
/// set_retained(Retention::new(64, 256 << 20));
/// // ...or none: each library is unloaded with its last user.
/// set_retained(0);
/// assert_eq!(cudyn::library::retention().libraries(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Retention {
    libraries: usize,
    bytes: usize,
}

impl Retention {
    /// 16 libraries and 64 MiB of images: what a process keeps unless told otherwise.
    pub const DEFAULT: Retention = Retention::new(16, 64 << 20);

    /// Nothing kept: every library is unloaded when its last user is dropped.
    pub const OFF: Retention = Retention::new(0, 0);

    /// Up to `libraries` libraries whose images add up to at most `bytes`.
    pub const fn new(libraries: usize, bytes: usize) -> Retention {
        Retention { libraries, bytes }
    }

    /// The most libraries kept.
    pub const fn libraries(self) -> usize {
        self.libraries
    }

    /// The most bytes of images kept, all libraries together.
    pub const fn bytes(self) -> usize {
        self.bytes
    }

    /// Whether anything is kept at all.
    fn keeps_any(self) -> bool {
        self.libraries > 0 && self.bytes > 0
    }

    /// The limits set by [`RETAIN_LIBRARIES_ENV`] and [`RETAIN_MIB_ENV`], each falling back to
    /// [`Retention::DEFAULT`]'s when unset or not a number (a warning printed then: the value
    /// was meant to say something).
    pub(crate) fn from_environment() -> Retention {
        let read = |name: &str| {
            let value = std::env::var_os(name)?;
            let text = value
                .to_str()
                .filter(|text| text.trim().parse::<usize>().is_ok());
            if text.is_none() {
                crate::warn::warning!(
                    "cudyn: warning: {name}={} is not a whole number; the default is kept",
                    value.to_string_lossy()
                );
            }
            text.map(str::to_owned)
        };
        Retention::from_values(
            read(RETAIN_LIBRARIES_ENV).as_deref(),
            read(RETAIN_MIB_ENV).as_deref(),
        )
    }

    fn from_values(libraries: Option<&str>, mib: Option<&str>) -> Retention {
        let number = |value: Option<&str>| value.and_then(|value| value.trim().parse().ok());
        Retention {
            libraries: number(libraries).unwrap_or(Retention::DEFAULT.libraries),
            bytes: number(mib).map_or(Retention::DEFAULT.bytes, |mib: usize| {
                mib.saturating_mul(1 << 20)
            }),
        }
    }
}

impl Default for Retention {
    fn default() -> Retention {
        Retention::DEFAULT
    }
}

impl From<usize> for Retention {
    /// Up to `libraries` libraries within the default byte budget; 0 keeps none.
    fn from(libraries: usize) -> Retention {
        Retention::new(libraries, Retention::DEFAULT.bytes)
    }
}

/// The most libraries kept, when [`set_retained`] was not called: a number (0 keeps none).
pub const RETAIN_LIBRARIES_ENV: &str = "CUDYN_RETAIN_LIBRARIES";

/// The most MiB of images kept, when [`set_retained`] was not called: a number.
pub const RETAIN_MIB_ENV: &str = "CUDYN_RETAIN_MIB";

/// Sets how many released libraries this process keeps loaded (see [`Retention`]); `0` (or
/// [`Retention::OFF`]) turns keeping off, so that every library is unloaded with its last user.
/// Libraries kept beyond the new limits are unloaded now. Returns the previous limits.
///
/// It replaces the limits of the environment ([`RETAIN_LIBRARIES_ENV`], [`RETAIN_MIB_ENV`]).
pub fn set_retained(limit: impl Into<Retention>) -> Retention {
    SHARED.set_limit(limit.into())
}

/// The limits in force: those of [`set_retained`], else of the environment, else
/// [`Retention::DEFAULT`].
pub fn retention() -> Retention {
    SHARED.limit()
}

/// Unloads every released library kept for a later load, now; returns how many there were.
/// Libraries still in use are not touched. Later releases are kept again, within the limits.
pub fn release_retained() -> usize {
    SHARED.release_retained()
}

/// Released values by key, least recently released first, within a [`Retention`].
#[derive(Debug)]
pub(crate) struct Retained<T> {
    /// `None` until first needed, then the environment's limits.
    limit: Option<Retention>,
    entries: VecDeque<RetainedEntry<T>>,
    bytes: usize,
}

#[derive(Debug)]
struct RetainedEntry<T> {
    key: Key,
    value: Arc<T>,
    bytes: usize,
}

impl<T> Retained<T> {
    pub(crate) const fn new(limit: Option<Retention>) -> Self {
        Retained {
            limit,
            entries: VecDeque::new(),
            bytes: 0,
        }
    }

    pub(crate) fn limit(&mut self) -> Retention {
        *self.limit.get_or_insert_with(Retention::from_environment)
    }

    /// Takes back the value retained under `key`, with its size.
    pub(crate) fn take(&mut self, key: &Key) -> Option<(Arc<T>, usize)> {
        let index = self.entries.iter().position(|entry| entry.key == *key)?;
        let entry = self.entries.remove(index)?;
        self.bytes -= entry.bytes;
        Some((entry.value, entry.bytes))
    }

    /// Retains `value`, of `bytes`, under `key`, as the most recently released. Returns the
    /// values to drop: those evicted to stay within the limits (and `value` itself when it
    /// alone exceeds them), and one retained under the same key before.
    pub(crate) fn keep(&mut self, key: Key, value: Arc<T>, bytes: usize) -> Vec<Arc<T>> {
        let limit = self.limit();
        if !limit.keeps_any() || bytes > limit.bytes {
            return vec![value];
        }
        let mut dropped: Vec<Arc<T>> = self.take(&key).map(|(old, _)| old).into_iter().collect();
        self.entries.push_back(RetainedEntry { key, value, bytes });
        self.bytes += bytes;
        dropped.extend(self.evict_beyond(limit));
        dropped
    }

    /// Sets the limits; returns the values evicted to stay within them.
    pub(crate) fn set_limit(&mut self, limit: Retention) -> Vec<Arc<T>> {
        self.limit = Some(limit);
        self.evict_beyond(limit)
    }

    /// Removes every value.
    pub(crate) fn take_all(&mut self) -> Vec<Arc<T>> {
        self.bytes = 0;
        self.entries.drain(..).map(|entry| entry.value).collect()
    }

    /// Evicts the least recently released values until the rest are within `limit`.
    fn evict_beyond(&mut self, limit: Retention) -> Vec<Arc<T>> {
        let mut evicted = Vec::new();
        while self.entries.len() > limit.libraries || self.bytes > limit.bytes {
            let Some(oldest) = self.entries.pop_front() else {
                break;
            };
            self.bytes -= oldest.bytes;
            evicted.push(oldest.value);
        }
        evicted
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The keys retained, least recently released first.
    #[cfg(test)]
    fn keys(&self) -> Vec<Key> {
        self.entries.iter().map(|entry| entry.key).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Key {
        crate::Digest([n; 32])
    }

    fn keep(retained: &mut Retained<u8>, n: u8, bytes: usize) -> Vec<u8> {
        retained
            .keep(key(n), Arc::new(n), bytes)
            .into_iter()
            .map(|value| *value)
            .collect()
    }

    #[test]
    fn the_least_recently_released_is_evicted_first_when_the_count_is_reached() {
        let mut retained = Retained::new(Some(Retention::new(3, 1000)));
        for n in 1..=3 {
            assert_eq!(keep(&mut retained, n, 10), []);
        }
        assert_eq!(keep(&mut retained, 4, 10), [1]);
        // Taking one back and releasing it again makes it the most recent.
        let (two, bytes) = retained.take(&key(2)).unwrap();
        assert_eq!((*two, bytes), (2, 10));
        assert_eq!(keep(&mut retained, 2, 10), []);
        assert_eq!(retained.keys(), [key(3), key(4), key(2)]);
        assert_eq!(keep(&mut retained, 5, 10), [3]);
        assert_eq!(retained.keys(), [key(4), key(2), key(5)]);
        assert!(retained.take(&key(3)).is_none(), "an evicted value is gone");
    }

    #[test]
    fn the_byte_budget_evicts_as_many_as_needed_and_never_keeps_an_image_larger_than_it() {
        let mut retained = Retained::new(Some(Retention::new(16, 100)));
        assert_eq!(keep(&mut retained, 1, 40), []);
        assert_eq!(keep(&mut retained, 2, 40), []);
        assert_eq!(keep(&mut retained, 3, 20), []);
        // 100 bytes exactly fit; 30 more evict the oldest.
        assert_eq!(keep(&mut retained, 4, 30), [1]);
        assert_eq!(retained.bytes, 90);
        // 60 more evict as many as needed: the oldest alone would leave 110.
        assert_eq!(keep(&mut retained, 5, 60), [2, 3]);
        assert_eq!(retained.keys(), [key(4), key(5)]);
        // Larger than the whole budget: dropped at once, and nothing else is evicted for it.
        assert_eq!(keep(&mut retained, 6, 101), [6]);
        assert_eq!(retained.keys(), [key(4), key(5)]);
        assert_eq!(retained.bytes, 90);
    }

    #[test]
    fn a_second_release_under_one_key_replaces_the_first() {
        let mut retained = Retained::new(Some(Retention::DEFAULT));
        assert_eq!(keep(&mut retained, 1, 10), []);
        let dropped = retained.keep(key(1), Arc::new(9), 10);
        assert_eq!(dropped.iter().map(|v| **v).collect::<Vec<_>>(), [1]);
        assert_eq!(retained.len(), 1);
        assert_eq!(retained.bytes, 10);
        assert_eq!(*retained.take(&key(1)).unwrap().0, 9);
    }

    #[test]
    fn off_keeps_nothing_and_lowering_the_limit_evicts_the_oldest() {
        let mut retained = Retained::new(Some(Retention::OFF));
        assert_eq!(keep(&mut retained, 1, 1), [1]);
        assert_eq!(retained.len(), 0);
        assert!(retained.set_limit(Retention::new(4, 1000)).is_empty());
        for n in 1..=4 {
            assert_eq!(keep(&mut retained, n, 10), []);
        }
        let evicted: Vec<u8> = retained
            .set_limit(Retention::new(2, 1000))
            .into_iter()
            .map(|value| *value)
            .collect();
        assert_eq!(evicted, [1, 2]);
        let all: Vec<u8> = retained.take_all().into_iter().map(|v| *v).collect();
        assert_eq!(all, [3, 4]);
        assert_eq!((retained.len(), retained.bytes), (0, 0));
        // A zero byte budget keeps nothing either.
        retained.set_limit(Retention::new(4, 0));
        assert_eq!(keep(&mut retained, 7, 0), [7]);
    }

    #[test]
    fn the_environment_sets_each_limit_and_anything_else_keeps_the_default() {
        assert_eq!(Retention::from_values(None, None), Retention::DEFAULT);
        assert_eq!(
            Retention::from_values(Some("0"), None),
            Retention::new(0, Retention::DEFAULT.bytes())
        );
        assert_eq!(
            Retention::from_values(Some(" 64 "), Some("256")),
            Retention::new(64, 256 << 20)
        );
        assert_eq!(
            Retention::from_values(Some("many"), Some("-1")),
            Retention::DEFAULT
        );
        assert_eq!(Retention::from(0), Retention::new(0, 64 << 20));
        assert!(!Retention::from(0).keeps_any());
    }
}
