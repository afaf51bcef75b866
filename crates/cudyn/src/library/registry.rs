//! Loading identical device code once: a process-wide table from what was loaded (a hash of the
//! image and of everything that changes the loaded result) to the users of the library that load
//! made, and the libraries released recently, kept loaded within a [`Retention`].
//!
//! The table refers to the users of a live library weakly, so it never keeps one in use: when
//! the last user (a [`Library`](super::Library), a [`Kernel`](crate::Kernel), a
//! [`Global`](super::Global), a handle held through cudyn's C API) is dropped, the library is
//! retained when it may be (code without device variables, within the limits) and unloaded
//! otherwise. A load that races with that last drop cannot be handed the dying users: upgrading
//! a weak reference fails atomically once the last strong one is gone; the load then takes the
//! library back from the retained ones if it got there first, or loads afresh, and the dying
//! library, seeing a live one under its key, is unloaded rather than retained.
//!
//! Loads of the same key that start together may each load; the first to finish is published and
//! the others use it, dropping (unloading) their own copy outside the table's lock.
//!
//! The table only finds; whether a load may join what it found is the loader's decision.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::retention::{Retained, Retention};
use super::{Backend, JitOptions, LibraryOptions};
use crate::digest::Digest;

/// What identifies a load: a blake3 hash of the image bytes and of every option that can change
/// what the driver makes of them.
pub(crate) type Key = Digest;

/// Everything that goes into a [`Key`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyParts<'a> {
    /// The image's bytes, by their digest.
    pub(crate) image: Digest,
    pub(crate) jit: &'a JitOptions,
    pub(crate) options: &'a LibraryOptions,
    pub(crate) backend: Backend,
    /// Name expressions and their lowered names: kept by the library, so loads that differ in
    /// them are different libraries.
    pub(crate) names: &'a [(String, String)],
}

impl KeyParts<'_> {
    /// The key. Every field is written with its length or in a fixed width, so that two
    /// different sets of parts never produce the same byte stream. The fixed-width fields are
    /// laid out in one buffer and hashed in one call: a process's first load computes this key,
    /// and less code run for the first time is less time.
    ///
    /// A load with every option at its default, no name expressions and the runtime's library
    /// API is keyed by the image's digest alone: no hash to compute (the digest of code from
    /// the compile cache is known already). It cannot meet another load's key: that is the
    /// blake3 hash of bytes starting with a tag no device code starts with (the loader takes
    /// nothing else), and blake3 hashes of different bytes differ.
    pub(crate) fn key(&self) -> Key {
        const TAG: &[u8] = b"cudyn library registry 3\0";
        let plain = *self.jit == JitOptions::default()
            && *self.options == LibraryOptions::default()
            && self.backend == Backend::Runtime
            && self.names.is_empty();
        if plain {
            return self.image;
        }
        // The tag, the image's digest, three optional numbers (a set flag and the value each),
        // five flags and the count of names.
        let mut fixed = [0u8; TAG.len() + 32 + 3 * 9 + 5 + 8];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            fixed[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(TAG);
        put(self.image.as_bytes());
        // Destructured so that a new option cannot be forgotten here: it fails to compile.
        let JitOptions {
            optimization_level,
            max_registers,
            debug_info,
            line_info,
            verbose_log,
            log_capacity,
        } = *self.jit;
        for value in [
            optimization_level.map(u64::from),
            max_registers.map(u64::from),
            Some(log_capacity as u64),
        ] {
            // One byte says whether the option is set, so that unset differs from any value.
            put(&[u8::from(value.is_some())]);
            put(&value.unwrap_or(0).to_le_bytes());
        }
        let LibraryOptions { preserve_binary } = *self.options;
        let backend = match self.backend {
            Backend::Runtime => 0,
            Backend::Driver => 1,
        };
        put(&[
            u8::from(debug_info),
            u8::from(line_info),
            u8::from(verbose_log),
            u8::from(preserve_binary),
            backend,
        ]);
        put(&(self.names.len() as u64).to_le_bytes());
        let mut hasher = blake3::Hasher::new();
        hasher.update(&fixed);
        for (expression, lowered) in self.names {
            for text in [expression, lowered] {
                hasher.update(&(text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
        }
        Digest(*hasher.finalize().as_bytes())
    }
}

/// The loads shared by key: weak references to the users of each live value, and the values
/// whose users are all gone but which are kept loaded for a later identical load (see
/// [`Retained`]). `T` is the loaded value (a library's state); dropping it unloads it.
#[derive(Debug)]
pub(crate) struct Registry<T: 'static> {
    state: Mutex<State<T>>,
}

#[derive(Debug)]
struct State<T: 'static> {
    /// Ordered rather than hashed: a hash map's random seed would cost a process's first load
    /// a system call for randomness, and keys are hashes already.
    live: BTreeMap<Key, Weak<Users<T>>>,
    retained: Retained<T>,
}

/// What [`Registry::publish`] did with a fresh value.
#[derive(Debug)]
pub(crate) enum Published<T: 'static> {
    /// Its users, now found under its key.
    Fresh(Arc<Users<T>>),
    /// Another load's live users were there first; the fresh users are in no table.
    Raced {
        first: Arc<Users<T>>,
        fresh: Arc<Users<T>>,
    },
}

#[cfg(test)]
impl<T: std::fmt::Debug> Published<T> {
    fn fresh(self) -> Arc<Users<T>> {
        match self {
            Published::Fresh(fresh) => fresh,
            raced => panic!("published as {raced:?}"),
        }
    }

    fn raced(self) -> (Arc<Users<T>>, Arc<Users<T>>) {
        match self {
            Published::Raced { first, fresh } => (first, fresh),
            Published::Fresh(fresh) => panic!("published, no load was first: {fresh:?}"),
        }
    }
}

/// Every user of one loaded value: each handle holds the `Arc`. When the last handle is dropped,
/// a shared value is retained or dropped (unloaded); an unshared one is dropped.
#[derive(Debug)]
pub(crate) struct Users<T: 'static> {
    held: Held<T>,
}

/// How [`Users`] hold their value.
#[derive(Debug)]
enum Held<T: 'static> {
    /// A value no other load shares, in the users' own allocation: a load with
    /// `Sharing::Never` allocates once, not twice, and its value is dropped with its users.
    Own(T),
    /// A value published in a registry, which takes it back (to retain it) after the last user.
    Shared { value: Arc<T>, shared: Shared<T> },
}

#[cfg(test)]
thread_local! {
    /// Runs in `Users::drop` after the last user is gone and before the registry hears of it,
    /// on the thread that set it: where the tests put a race.
    static BEFORE_RELEASE: std::cell::Cell<Option<fn(Key)>> = const { std::cell::Cell::new(None) };
}

/// How a value is shared: the registry and key it was published under, and its size when the
/// registry may retain it after its last user.
#[derive(Debug)]
struct Shared<T: 'static> {
    registry: &'static Registry<T>,
    key: Key,
    retain: Option<usize>,
}

impl<T> std::ops::Deref for Users<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match &self.held {
            Held::Own(value) => value,
            Held::Shared { value, .. } => value,
        }
    }
}

impl<T> Users<T> {
    /// The users of a value no other load shares.
    pub(crate) fn own(value: T) -> Arc<Users<T>> {
        Arc::new(Users {
            held: Held::Own(value),
        })
    }

    fn shared(value: Arc<T>, shared: Shared<T>) -> Arc<Users<T>> {
        Arc::new(Users {
            held: Held::Shared { value, shared },
        })
    }
}

impl<T> Drop for Users<T> {
    fn drop(&mut self) {
        // An unshared value is dropped (unloaded) with its users' fields.
        let Held::Shared { value, shared } = &self.held else {
            return;
        };
        #[cfg(test)]
        if let Some(race) = BEFORE_RELEASE.take() {
            race(shared.key);
        }
        let users: *const Users<T> = self;
        let dropped = shared
            .registry
            .release(&shared.key, users, Arc::clone(value), shared.retain);
        // Dropping a value unloads it: outside the registry's lock.
        drop(dropped);
    }
}

impl<T> Registry<T> {
    /// A registry that retains released values within the limits of the environment
    /// ([`Retention::from_environment`]), read when first needed.
    pub(crate) const fn new() -> Self {
        Self::with_limit(None)
    }

    /// A registry that retains within `limit` (`None`: the environment's, when first needed).
    pub(crate) const fn with_limit(limit: Option<Retention>) -> Self {
        Registry {
            state: Mutex::new(State {
                live: BTreeMap::new(),
                retained: Retained::new(limit),
            }),
        }
    }

    /// The table. Nothing panics while holding the lock, so a poisoned lock still holds a
    /// consistent table.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The users of the value loaded under `key`: a live one, or a retained one, which becomes
    /// live again (a new user of it).
    pub(crate) fn find(&'static self, key: &Key) -> Option<Arc<Users<T>>> {
        let mut state = self.lock();
        let State { live, retained } = &mut *state;
        if let Some(users) = live.get(key).and_then(Weak::upgrade) {
            return Some(users);
        }
        let (value, bytes) = retained.take(key)?;
        let users = Users::shared(
            value,
            Shared {
                registry: self,
                key: *key,
                retain: Some(bytes),
            },
        );
        live.insert(*key, Arc::downgrade(&users));
        Some(users)
    }

    /// The users of `value`, just loaded under `key`, published in place of a dead entry or of
    /// `replacing` (live users the caller found and may not join). `retain` is the value's size
    /// when it may be retained after its last user, `None` when it may not (code that defines
    /// variables). When another live value is there (a load that finished first), its users are
    /// returned with the fresh ones, and the caller chooses which to use. Whatever it drops, it
    /// drops after this returns, outside the lock.
    pub(crate) fn publish(
        &'static self,
        key: Key,
        value: T,
        retain: Option<usize>,
        replacing: Option<&Arc<Users<T>>>,
    ) -> Published<T> {
        let fresh = Users::shared(
            Arc::new(value),
            Shared {
                registry: self,
                key,
                retain,
            },
        );
        let mut state = self.lock();
        let existing = state
            .live
            .get(&key)
            .and_then(Weak::upgrade)
            .filter(|existing| !replacing.is_some_and(|replaced| Arc::ptr_eq(existing, replaced)));
        match existing {
            Some(first) => Published::Raced { first, fresh },
            None => {
                // The users replaced, dead or not, will see in their `release` that the entry is
                // not theirs.
                state.live.insert(key, Arc::downgrade(&fresh));
                Published::Fresh(fresh)
            }
        }
    }

    /// Called when the last user of `value` (loaded under `key`) is gone: removes the entry of
    /// `key` if it still refers to `users`, and retains `value` when `retain` allows and no
    /// other live value took the key meanwhile. Returns what is to be dropped (unloaded) once the
    /// lock is released: `value` when not retained, and what retaining it evicted.
    fn release(
        &self,
        key: &Key,
        users: *const Users<T>,
        value: Arc<T>,
        retain: Option<usize>,
    ) -> Vec<Arc<T>> {
        let mut state = self.lock();
        let State { live, retained } = &mut *state;
        let entry = live.get(key);
        let replaced = entry.is_some_and(|entry| !std::ptr::eq(entry.as_ptr(), users));
        if !replaced {
            live.remove(key);
        }
        match retain {
            // A later load of the same code loaded it afresh and uses that: keeping this copy
            // would only hold memory.
            Some(bytes) if !replaced => retained.keep(*key, value, bytes),
            _ => vec![value],
        }
    }

    /// The limits of retention.
    pub(crate) fn limit(&self) -> Retention {
        self.lock().retained.limit()
    }

    /// Sets the limits of retention, dropping (after the lock) the retained values beyond them;
    /// the previous limits.
    pub(crate) fn set_limit(&self, limit: Retention) -> Retention {
        let (previous, evicted) = {
            let mut state = self.lock();
            let previous = state.retained.limit();
            (previous, state.retained.set_limit(limit))
        };
        drop(evicted);
        previous
    }

    /// Drops every retained value (after the lock); how many there were.
    pub(crate) fn release_retained(&self) -> usize {
        let released = self.lock().retained.take_all();
        let count = released.len();
        drop(released);
        count
    }

    /// How many keys the table holds, alive or dying, and how many values it retains.
    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        let state = self.lock();
        (state.live.len(), state.retained.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    /// A stand-in for a loaded library: counts its loads and, when dropped, its unloads.
    #[derive(Debug)]
    struct FakeLibrary {
        counts: &'static Counts,
    }

    #[derive(Debug)]
    struct Counts {
        loads: AtomicUsize,
        unloads: AtomicUsize,
    }

    impl Counts {
        const fn new() -> Counts {
            Counts {
                loads: AtomicUsize::new(0),
                unloads: AtomicUsize::new(0),
            }
        }

        fn loads(&self) -> usize {
            self.loads.load(Ordering::SeqCst)
        }

        fn unloads(&self) -> usize {
            self.unloads.load(Ordering::SeqCst)
        }
    }

    impl FakeLibrary {
        /// A fresh "load", not yet published.
        fn load(counts: &'static Counts) -> FakeLibrary {
            counts.loads.fetch_add(1, Ordering::SeqCst);
            FakeLibrary { counts }
        }
    }

    impl Drop for FakeLibrary {
        fn drop(&mut self) {
            self.counts.unloads.fetch_add(1, Ordering::SeqCst);
        }
    }

    type Fake = Arc<Users<FakeLibrary>>;

    /// The size every fake library says it has, for retention.
    const FAKE_BYTES: usize = 1000;

    /// The library's load path in miniature: a live or retained entry, else a fresh load,
    /// published, retainable.
    fn load(registry: &'static Registry<FakeLibrary>, counts: &'static Counts, key: Key) -> Fake {
        if let Some(found) = registry.find(&key) {
            return found;
        }
        match registry.publish(key, FakeLibrary::load(counts), Some(FAKE_BYTES), None) {
            Published::Fresh(fresh) => fresh,
            Published::Raced { first, .. } => first,
        }
    }

    #[test]
    fn users_share_one_load_which_is_unloaded_after_the_last_drop() {
        static REGISTRY: Registry<FakeLibrary> = Registry::with_limit(Some(Retention::OFF));
        static COUNTS: Counts = Counts::new();
        let first = load(&REGISTRY, &COUNTS, Digest([1; 32]));
        let second = load(&REGISTRY, &COUNTS, Digest([1; 32]));
        let other = load(&REGISTRY, &COUNTS, Digest([2; 32]));
        assert!(Arc::ptr_eq(&first, &second));
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(COUNTS.loads(), 2);
        assert_eq!(REGISTRY.len(), (2, 0));
        drop(first);
        assert_eq!(COUNTS.unloads(), 0, "still used");
        drop(second);
        assert_eq!(COUNTS.unloads(), 1);
        assert_eq!(REGISTRY.len(), (1, 0), "the unloaded entry is forgotten");
        assert!(REGISTRY.find(&Digest([1; 32])).is_none());
        // A new load after the last drop loads again.
        let again = load(&REGISTRY, &COUNTS, Digest([1; 32]));
        assert_eq!(COUNTS.loads(), 3);
        drop((again, other));
        assert_eq!(COUNTS.unloads(), 3);
        assert_eq!(REGISTRY.len(), (0, 0));
    }

    #[test]
    fn a_released_library_is_retained_and_taken_back_by_the_next_identical_load() {
        static REGISTRY: Registry<FakeLibrary> =
            Registry::with_limit(Some(Retention::new(2, 1 << 20)));
        static COUNTS: Counts = Counts::new();
        let first = load(&REGISTRY, &COUNTS, Digest([1; 32]));
        let value: *const FakeLibrary = &**first;
        drop(first);
        assert_eq!(COUNTS.unloads(), 0, "kept loaded after its last user");
        assert_eq!(REGISTRY.len(), (0, 1));
        let again = load(&REGISTRY, &COUNTS, Digest([1; 32]));
        assert!(
            std::ptr::eq(&**again, value),
            "the same library, taken back"
        );
        assert_eq!(COUNTS.loads(), 1);
        assert_eq!(REGISTRY.len(), (1, 0), "live again, no longer retained");
        // While live it is shared as any live library.
        assert!(Arc::ptr_eq(
            &again,
            &load(&REGISTRY, &COUNTS, Digest([1; 32]))
        ));
        drop(again);
        // Two more released: the limit of 2 evicts the least recently released, the first.
        for key in [Digest([2; 32]), Digest([3; 32])] {
            drop(load(&REGISTRY, &COUNTS, key));
        }
        assert_eq!((COUNTS.loads(), COUNTS.unloads()), (3, 1));
        assert!(
            REGISTRY.find(&Digest([1; 32])).is_none(),
            "evicted and unloaded"
        );
        // Released now: unloaded, and the next load loads afresh.
        assert_eq!(REGISTRY.release_retained(), 2);
        assert_eq!(COUNTS.unloads(), 3);
        assert_eq!(REGISTRY.len(), (0, 0));
        drop(load(&REGISTRY, &COUNTS, Digest([2; 32])));
        assert_eq!(COUNTS.loads(), 4);
        // Turning retention off unloads what is kept.
        assert_eq!(
            REGISTRY.set_limit(Retention::OFF),
            Retention::new(2, 1 << 20)
        );
        assert_eq!((COUNTS.unloads(), REGISTRY.len()), (4, (0, 0)));
        drop(load(&REGISTRY, &COUNTS, Digest([2; 32])));
        assert_eq!((COUNTS.loads(), COUNTS.unloads()), (5, 5));
    }

    #[test]
    fn libraries_that_may_not_be_retained_and_unshared_ones_are_unloaded_with_their_last_user() {
        static REGISTRY: Registry<FakeLibrary> = Registry::with_limit(Some(Retention::DEFAULT));
        static COUNTS: Counts = Counts::new();
        // Shared, but not retainable (code with variables).
        let shared = REGISTRY
            .publish(Digest([1; 32]), FakeLibrary::load(&COUNTS), None, None)
            .fresh();
        assert!(Arc::ptr_eq(
            &REGISTRY.find(&Digest([1; 32])).unwrap(),
            &shared
        ));
        drop(shared);
        assert_eq!(COUNTS.unloads(), 1);
        // Not shared at all (Sharing::Never).
        drop(Users::own(FakeLibrary::load(&COUNTS)));
        assert_eq!(COUNTS.unloads(), 2);
        assert_eq!(REGISTRY.len(), (0, 0));
        // Larger than the byte budget.
        let large = REGISTRY
            .publish(
                Digest([2; 32]),
                FakeLibrary::load(&COUNTS),
                Some(65 << 20),
                None,
            )
            .fresh();
        drop(large);
        assert_eq!((COUNTS.unloads(), REGISTRY.len()), (3, (0, 0)));
    }

    #[test]
    fn a_dying_value_does_not_forget_the_entry_that_replaced_it() {
        static REGISTRY: Registry<FakeLibrary> = Registry::with_limit(Some(Retention::DEFAULT));
        static COUNTS: Counts = Counts::new();
        static REPLACEMENT: Mutex<Option<Fake>> = Mutex::new(None);
        let key = Digest([3; 32]);
        // The moment of the race: the last user is gone, so the old value is being released,
        // but the registry has not heard of it yet; another thread loads the same key then.
        fn load_while_dying(key: Key) {
            assert!(
                REGISTRY.find(&key).is_none(),
                "a dying value is never handed out"
            );
            *REPLACEMENT.lock().unwrap() = Some(load(&REGISTRY, &COUNTS, key));
        }
        let old = load(&REGISTRY, &COUNTS, key);
        BEFORE_RELEASE.set(Some(load_while_dying));
        drop(old);
        let new = REPLACEMENT
            .lock()
            .unwrap()
            .take()
            .expect("loaded during the drop");
        // The old one is unloaded rather than retained: a live copy took its key.
        assert_eq!(COUNTS.unloads(), 1);
        let alive = REGISTRY
            .find(&key)
            .expect("the replacement's entry survives");
        assert!(Arc::ptr_eq(&alive, &new));
        drop((alive, new));
        assert_eq!(REGISTRY.len(), (0, 1), "the replacement is retained");
        assert_eq!(REGISTRY.release_retained(), 1);
        assert_eq!(COUNTS.unloads(), 2);
    }

    #[test]
    fn a_load_that_loses_the_race_to_publish_uses_the_winner_and_unloads_its_own() {
        static REGISTRY: Registry<FakeLibrary> = Registry::with_limit(Some(Retention::DEFAULT));
        static COUNTS: Counts = Counts::new();
        let key = Digest([4; 32]);
        let winner = REGISTRY
            .publish(key, FakeLibrary::load(&COUNTS), Some(FAKE_BYTES), None)
            .fresh();
        let (used, loser) = REGISTRY
            .publish(key, FakeLibrary::load(&COUNTS), Some(FAKE_BYTES), None)
            .raced();
        assert!(Arc::ptr_eq(&used, &winner));
        drop(loser);
        assert_eq!(COUNTS.unloads(), 1, "the loser is unloaded, not retained");
        assert!(
            Arc::ptr_eq(&REGISTRY.find(&key).unwrap(), &winner),
            "and the winner's entry stays"
        );
        drop((used, winner));
        assert_eq!(REGISTRY.len(), (0, 1));
    }

    #[test]
    fn a_value_found_unshareable_is_replaced_only_while_it_is_still_the_entry() {
        static REGISTRY: Registry<FakeLibrary> = Registry::with_limit(Some(Retention::OFF));
        static COUNTS: Counts = Counts::new();
        let key = Digest([6; 32]);
        let publish =
            |replacing| REGISTRY.publish(key, FakeLibrary::load(&COUNTS), None, replacing);
        let found = publish(None).fresh();
        // A load that may not share `found` publishes its own in its place...
        let replacement = publish(Some(&found)).fresh();
        assert!(Arc::ptr_eq(&REGISTRY.find(&key).unwrap(), &replacement));
        // ...but not in place of what another load put there meanwhile.
        let (first, late) = publish(Some(&found)).raced();
        assert!(Arc::ptr_eq(&first, &replacement));
        // The replaced value still works for its users and, dropped, forgets nothing.
        drop((found, late, first));
        assert!(Arc::ptr_eq(&REGISTRY.find(&key).unwrap(), &replacement));
        drop(replacement);
        assert_eq!(REGISTRY.len(), (0, 0));
        assert_eq!(COUNTS.unloads(), 3);
    }

    #[test]
    fn threads_racing_loads_and_drops_share_while_alive_and_unload_every_load() {
        static REGISTRY: Registry<FakeLibrary> =
            Registry::with_limit(Some(Retention::new(1, 1 << 20)));
        static COUNTS: Counts = Counts::new();
        const THREADS: usize = 8;
        const ROUNDS: usize = 2_000;
        let key = Digest([5; 32]);
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let barrier = &barrier;
                scope.spawn(move || {
                    // All threads hold a handle at once: one load serves them all.
                    let held = load(&REGISTRY, &COUNTS, key);
                    barrier.wait();
                    assert!(Arc::ptr_eq(&held, &load(&REGISTRY, &COUNTS, key)));
                    barrier.wait();
                    drop(held);
                    // Then loads, last drops, retention and its release race; whoever holds a
                    // handle sees it shared.
                    for round in 0..ROUNDS {
                        let first = load(&REGISTRY, &COUNTS, key);
                        let second = load(&REGISTRY, &COUNTS, key);
                        assert!(Arc::ptr_eq(&first, &second));
                        if (round + thread) % 97 == 0 {
                            REGISTRY.release_retained();
                        }
                    }
                });
            }
        });
        REGISTRY.release_retained();
        let loads = COUNTS.loads();
        assert!(loads >= 1);
        assert!(
            loads < THREADS * ROUNDS,
            "retention spares most reloads: {loads} loads"
        );
        assert_eq!(COUNTS.unloads(), loads);
        assert_eq!(REGISTRY.len(), (0, 0));
    }

    fn parts<'a>(image: &[u8], jit: &'a JitOptions) -> KeyParts<'a> {
        const OPTIONS: LibraryOptions = LibraryOptions {
            preserve_binary: false,
        };
        KeyParts {
            image: crate::image::digest(image),
            jit,
            options: &OPTIONS,
            backend: Backend::Runtime,
            names: &[],
        }
    }

    #[test]
    fn every_part_that_changes_the_loaded_result_changes_the_key() {
        let jit = JitOptions::default();
        let base = parts(b"image", &jit);
        assert_eq!(base.key(), parts(b"image", &JitOptions::default()).key());
        let mut keys = vec![base.key(), parts(b"imagf", &jit).key()];
        let jits = [
            JitOptions {
                optimization_level: Some(0),
                ..JitOptions::default()
            },
            JitOptions {
                max_registers: Some(0),
                ..JitOptions::default()
            },
            JitOptions {
                debug_info: true,
                ..JitOptions::default()
            },
            JitOptions {
                line_info: true,
                ..JitOptions::default()
            },
            JitOptions {
                verbose_log: true,
                ..JitOptions::default()
            },
            JitOptions {
                log_capacity: 1,
                ..JitOptions::default()
            },
        ];
        keys.extend(jits.iter().map(|jit| parts(b"image", jit).key()));
        let preserved = LibraryOptions {
            preserve_binary: true,
        };
        keys.push(
            KeyParts {
                options: &preserved,
                ..base
            }
            .key(),
        );
        keys.push(
            KeyParts {
                backend: Backend::Driver,
                ..base
            }
            .key(),
        );
        let names = [("axpy<float>".to_owned(), "_Z4axpyIfEvT_".to_owned())];
        keys.push(
            KeyParts {
                names: &names,
                ..base
            }
            .key(),
        );
        // Moving bytes between fields must not give the same stream.
        let shifted = [("axpy<float>_Z4".to_owned(), "axpyIfEvT_".to_owned())];
        keys.push(
            KeyParts {
                names: &shifted,
                ..base
            }
            .key(),
        );
        let distinct: std::collections::HashSet<Key> = keys.iter().copied().collect();
        assert_eq!(distinct.len(), keys.len(), "{keys:?}");
        // A plain load is keyed by the image's digest; every other key is a hash of more.
        assert_eq!(base.key(), crate::image::digest(b"image"));
        assert!(keys[2..].iter().all(|key| *key != base.image));
    }
}
