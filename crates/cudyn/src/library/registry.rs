//! Loading identical device code once: a process-wide table from what was loaded (a hash of the
//! image and of everything that changes the loaded result) to the library that load made.
//!
//! The table holds only weak references, so it never keeps a library loaded: the library is
//! unloaded when its last user (a [`Library`](super::Library), a [`Kernel`](crate::Kernel), a
//! [`Global`](super::Global), a handle held through cudyn's C API) is dropped, exactly as without
//! sharing. A load that races with that last drop cannot be handed the dying library: upgrading a
//! weak reference fails atomically once the last strong one is gone, and the load then loads
//! afresh.
//!
//! Loads of the same key that start together may each load; the first to finish is published and
//! the others use it, dropping (unloading) their own copy outside the table's lock.
//!
//! The table only finds; whether a load may join what it found is the loader's decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::{Backend, JitOptions, LibraryOptions};

/// What identifies a load: a blake3 hash of the image bytes and of every option that can change
/// what the driver makes of them.
pub(crate) type Key = [u8; 32];

/// Everything that goes into a [`Key`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyParts<'a> {
    pub(crate) image: &'a [u8],
    pub(crate) jit: &'a JitOptions,
    pub(crate) options: &'a LibraryOptions,
    pub(crate) backend: Backend,
    /// Name expressions and their lowered names: kept by the library, so loads that differ in
    /// them are different libraries.
    pub(crate) names: &'a [(String, String)],
}

impl KeyParts<'_> {
    /// The key. Every field is written with its length or in a fixed width, so that two
    /// different sets of parts never produce the same byte stream.
    pub(crate) fn key(&self) -> Key {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"cudyn library registry 1\0");
        let bytes = |hasher: &mut blake3::Hasher, bytes: &[u8]| {
            hasher.update(&(bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        let number = |hasher: &mut blake3::Hasher, value: Option<u64>| {
            // One byte says whether the option is set, so that unset differs from any value.
            hasher.update(&[u8::from(value.is_some())]);
            hasher.update(&value.unwrap_or(0).to_le_bytes());
        };
        bytes(&mut hasher, self.image);
        // Destructured so that a new option cannot be forgotten here: it fails to compile.
        let JitOptions {
            optimization_level,
            max_registers,
            debug_info,
            line_info,
            verbose_log,
            log_capacity,
        } = *self.jit;
        number(&mut hasher, optimization_level.map(u64::from));
        number(&mut hasher, max_registers.map(u64::from));
        number(&mut hasher, Some(log_capacity as u64));
        let LibraryOptions { preserve_binary } = *self.options;
        let backend = match self.backend {
            Backend::Runtime => 0,
            Backend::Driver => 1,
        };
        hasher.update(&[
            u8::from(debug_info),
            u8::from(line_info),
            u8::from(verbose_log),
            u8::from(preserve_binary),
            backend,
        ]);
        hasher.update(&(self.names.len() as u64).to_le_bytes());
        for (expression, lowered) in self.names {
            bytes(&mut hasher, expression.as_bytes());
            bytes(&mut hasher, lowered.as_bytes());
        }
        *hasher.finalize().as_bytes()
    }
}

/// Weak references to loaded values by key. `T` is the library's shared state; it calls
/// [`Registry::forget`] when it is dropped.
#[derive(Debug)]
pub(crate) struct Registry<T> {
    entries: Mutex<Option<HashMap<Key, Weak<T>>>>,
}

impl<T> Registry<T> {
    pub(crate) const fn new() -> Self {
        Registry {
            entries: Mutex::new(None),
        }
    }

    /// The table. Nothing panics while holding the lock, so a poisoned lock still holds a
    /// consistent table.
    fn lock(&self) -> MutexGuard<'_, Option<HashMap<Key, Weak<T>>>> {
        self.entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The value loaded under `key`, if one is alive; a new user of it.
    pub(crate) fn alive(&self, key: &Key) -> Option<Arc<T>> {
        self.lock().as_ref()?.get(key)?.upgrade()
    }

    /// Publishes `fresh`, just loaded under `key`, in place of a dead entry or of `replacing`
    /// (a live value the caller found and may not share). When another live value is there (a
    /// load that finished first), that value is returned instead, and the caller chooses which
    /// to use. Whatever it drops, it drops after this returns, outside the lock (dropping a value
    /// unloads it, which calls [`Registry::forget`]).
    pub(crate) fn publish(
        &self,
        key: Key,
        fresh: &Arc<T>,
        replacing: Option<&Arc<T>>,
    ) -> Option<Arc<T>> {
        let mut entries = self.lock();
        let entries = entries.get_or_insert_with(HashMap::new);
        let existing = entries
            .get(&key)
            .and_then(Weak::upgrade)
            .filter(|existing| !replacing.is_some_and(|replaced| Arc::ptr_eq(existing, replaced)));
        if existing.is_none() {
            // The value replaced, dead or not, will see in its `forget` that the entry is not its
            // own.
            entries.insert(key, Arc::downgrade(fresh));
        }
        existing
    }

    /// Removes the entry of `key` if it still refers to `value`: called when `value` is dropped.
    /// An entry that a later load put in its place is left alone, and so is the entry of a
    /// value that was never published (a load that lost the race to publish and kept its own).
    pub(crate) fn forget(&self, key: &Key, value: *const T) {
        let mut entries = self.lock();
        let Some(table) = entries.as_mut() else {
            return;
        };
        if table
            .get(key)
            .is_some_and(|entry| std::ptr::eq(entry.as_ptr(), value))
        {
            table.remove(key);
        }
    }

    /// How many keys the table holds, alive or dying.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().as_ref().map_or(0, HashMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    /// A stand-in for a loaded library: counts its loads and unloads and, like the library's
    /// state, forgets its entry when dropped.
    #[derive(Debug)]
    struct FakeLibrary {
        key: Key,
        registry: &'static Registry<FakeLibrary>,
        counts: &'static Counts,
        /// Runs in `drop` after the last user is gone and before the entry is forgotten.
        before_forget: Option<fn(Key)>,
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
    }

    impl FakeLibrary {
        /// A fresh "load" of `key`, not yet published.
        fn load(
            key: Key,
            registry: &'static Registry<FakeLibrary>,
            counts: &'static Counts,
        ) -> Arc<FakeLibrary> {
            counts.loads.fetch_add(1, Ordering::SeqCst);
            Arc::new(FakeLibrary {
                key,
                registry,
                counts,
                before_forget: None,
            })
        }
    }

    impl Drop for FakeLibrary {
        fn drop(&mut self) {
            if let Some(race) = self.before_forget {
                race(self.key);
            }
            self.registry.forget(&self.key, self);
            self.counts.unloads.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The library's load path in miniature: a live entry, else a fresh load, published.
    fn load(
        registry: &'static Registry<FakeLibrary>,
        counts: &'static Counts,
        key: Key,
    ) -> Arc<FakeLibrary> {
        if let Some(alive) = registry.alive(&key) {
            return alive;
        }
        let fresh = FakeLibrary::load(key, registry, counts);
        registry.publish(key, &fresh, None).unwrap_or(fresh)
    }

    #[test]
    fn users_share_one_load_which_is_unloaded_after_the_last_drop() {
        static REGISTRY: Registry<FakeLibrary> = Registry::new();
        static COUNTS: Counts = Counts::new();
        let first = load(&REGISTRY, &COUNTS, [1; 32]);
        let second = load(&REGISTRY, &COUNTS, [1; 32]);
        let other = load(&REGISTRY, &COUNTS, [2; 32]);
        assert!(Arc::ptr_eq(&first, &second));
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(COUNTS.loads.load(Ordering::SeqCst), 2);
        assert_eq!(REGISTRY.len(), 2);
        drop(first);
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), 0, "still used");
        drop(second);
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), 1);
        assert_eq!(REGISTRY.len(), 1, "the unloaded entry is forgotten");
        assert!(REGISTRY.alive(&[1; 32]).is_none());
        // A new load after the last drop loads again.
        let again = load(&REGISTRY, &COUNTS, [1; 32]);
        assert_eq!(COUNTS.loads.load(Ordering::SeqCst), 3);
        drop((again, other));
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), 3);
        assert_eq!(REGISTRY.len(), 0);
    }

    #[test]
    fn a_dying_value_does_not_forget_the_entry_that_replaced_it() {
        static REGISTRY: Registry<FakeLibrary> = Registry::new();
        static COUNTS: Counts = Counts::new();
        static REPLACEMENT: Mutex<Option<Arc<FakeLibrary>>> = Mutex::new(None);
        let key = [3; 32];
        // The moment of the race: the last user is gone, so the old value is being dropped, but
        // its drop has not reached `forget` yet; another thread loads the same key then.
        fn load_while_dying(key: Key) {
            assert!(
                REGISTRY.alive(&key).is_none(),
                "a dying value is never handed out"
            );
            *REPLACEMENT.lock().unwrap() = Some(load(&REGISTRY, &COUNTS, key));
        }
        let old = Arc::new(FakeLibrary {
            key,
            registry: &REGISTRY,
            counts: &COUNTS,
            before_forget: Some(load_while_dying),
        });
        assert!(REGISTRY.publish(key, &old, None).is_none());
        drop(old);
        let new = REPLACEMENT
            .lock()
            .unwrap()
            .take()
            .expect("loaded during the drop");
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), 1);
        let alive = REGISTRY
            .alive(&key)
            .expect("the replacement's entry survives");
        assert!(Arc::ptr_eq(&alive, &new));
        drop((alive, new));
        assert_eq!(REGISTRY.len(), 0);
    }

    #[test]
    fn a_load_that_loses_the_race_to_publish_uses_the_winner_and_unloads_its_own() {
        static REGISTRY: Registry<FakeLibrary> = Registry::new();
        static COUNTS: Counts = Counts::new();
        let key = [4; 32];
        let fresh = |counts| FakeLibrary::load(key, &REGISTRY, counts);
        let winner = fresh(&COUNTS);
        assert!(REGISTRY.publish(key, &winner, None).is_none());
        let loser = fresh(&COUNTS);
        let used = REGISTRY
            .publish(key, &loser, None)
            .expect("the winner is alive");
        assert!(Arc::ptr_eq(&used, &winner));
        drop(loser);
        assert_eq!(
            COUNTS.unloads.load(Ordering::SeqCst),
            1,
            "the loser is unloaded"
        );
        assert!(
            Arc::ptr_eq(&REGISTRY.alive(&key).unwrap(), &winner),
            "and the winner's entry stays"
        );
        drop((used, winner));
        assert_eq!(REGISTRY.len(), 0);
    }

    #[test]
    fn a_value_found_unshareable_is_replaced_only_while_it_is_still_the_entry() {
        static REGISTRY: Registry<FakeLibrary> = Registry::new();
        static COUNTS: Counts = Counts::new();
        let key = [6; 32];
        let fresh = || FakeLibrary::load(key, &REGISTRY, &COUNTS);
        let found = fresh();
        assert!(REGISTRY.publish(key, &found, None).is_none());
        // A load that may not share `found` publishes its own in its place...
        let replacement = fresh();
        assert!(REGISTRY.publish(key, &replacement, Some(&found)).is_none());
        assert!(Arc::ptr_eq(&REGISTRY.alive(&key).unwrap(), &replacement));
        // ...but not in place of what another load put there meanwhile.
        let late = fresh();
        let first = REGISTRY
            .publish(key, &late, Some(&found))
            .expect("live entry");
        assert!(Arc::ptr_eq(&first, &replacement));
        // The replaced value still works for its users and, dropped, forgets nothing.
        drop((found, late, first));
        assert!(Arc::ptr_eq(&REGISTRY.alive(&key).unwrap(), &replacement));
        drop(replacement);
        assert_eq!(REGISTRY.len(), 0);
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn threads_racing_loads_and_drops_share_while_alive_and_unload_every_load() {
        static REGISTRY: Registry<FakeLibrary> = Registry::new();
        static COUNTS: Counts = Counts::new();
        const THREADS: usize = 8;
        const ROUNDS: usize = 2_000;
        let key = [5; 32];
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    // All threads hold a handle at once: one load serves them all.
                    let held = load(&REGISTRY, &COUNTS, key);
                    barrier.wait();
                    assert!(Arc::ptr_eq(&held, &load(&REGISTRY, &COUNTS, key)));
                    barrier.wait();
                    drop(held);
                    // Then loads and last drops race; whoever holds a handle sees it shared.
                    for _ in 0..ROUNDS {
                        let first = load(&REGISTRY, &COUNTS, key);
                        let second = load(&REGISTRY, &COUNTS, key);
                        assert!(Arc::ptr_eq(&first, &second));
                    }
                });
            }
        });
        let loads = COUNTS.loads.load(Ordering::SeqCst);
        assert!(loads >= 1);
        assert_eq!(COUNTS.unloads.load(Ordering::SeqCst), loads);
        assert_eq!(REGISTRY.len(), 0);
    }

    fn parts<'a>(image: &'a [u8], jit: &'a JitOptions) -> KeyParts<'a> {
        const OPTIONS: LibraryOptions = LibraryOptions {
            preserve_binary: false,
        };
        KeyParts {
            image,
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
    }
}
