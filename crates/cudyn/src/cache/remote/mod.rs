//! The compile cache's remote tier: entries shared by every host of a fleet through Redis,
//! behind the memory and disk tiers. docs/FLEET.md says how to run it.
//!
//! - **Order**: memory, then disk, then Redis. A value found in Redis is checked, then written
//!   to the local disk cache, so that the next start on that host is local; a miss compiles and
//!   publishes the result. A hit costs one round trip, the value's `GETRANGE`; the write to disk
//!   and the hit's record in the folder's tally are done off the caller's path, by a thread of
//!   the cache's own which the cache's drop and the process's exit wait for (within a bound: a
//!   process killed first costs its next start a remote hit, not a disk hit).
//! - **One compile per key across hosts**: a host that misses takes a lease on the key in Redis
//!   (`SET NX PX`) and compiles; hosts missing the same key meanwhile poll for the entry, within
//!   a bound ([`RemoteConfig::wait`]). The lease expires ([`RemoteConfig::lease`]), so a host
//!   that dies holding it delays the others only until then; a waiter that gives up compiles
//!   itself.
//! - **Trust**: every value is sealed with a keyed blake3 MAC over the entry and the cache key it
//!   is stored under, with a key read from a file ([`REMOTE_KEY_FILE_ENV`]) and never sent to
//!   Redis. A value whose MAC is wrong is counted and ignored; one whose MAC is right is still
//!   decoded with bounded reads and its code checked as every image is before a load. Values are
//!   read with `GETRANGE` up to [`MAX_ENTRY_BYTES`]: a longer one is refused unread. Without a
//!   key there is no remote tier.
//! - **Failure is never fatal**: connect and operation timeouts are short, a failed call falls
//!   back to the local tiers and NVRTC, and after repeated failures in a row the remote is left
//!   alone for a while ([`RemoteConfig::breaker`], a circuit breaker). Nothing is
//!   connected until the first miss of the local tiers, so a start that hits locally never
//!   waits on the remote.
//!
//! Only NVRTC's results go through the remote tier; links stay local.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;

use super::entry::Entry;
use super::key::Key;
use crate::error::{Error, Result};

mod breaker;
pub(crate) mod seal;
pub(crate) mod tally;

use breaker::Breaker;
pub(crate) use seal::Expected;
use seal::{MacKey, Refusal};
use tally::Event;

/// The environment variable naming the Redis of the remote tier: `redis://host:port/db`.
pub const REMOTE_ENV: &str = "CUDYN_CACHE_REMOTE";
/// The environment variable naming the file of the remote tier's MAC key.
pub const REMOTE_KEY_FILE_ENV: &str = "CUDYN_CACHE_REMOTE_KEY_FILE";

/// The largest value read from or written to Redis: 64 MiB, above any NVRTC result cudyn has
/// met by far.
pub const MAX_ENTRY_BYTES: usize = 64 << 20;

/// How long an entry stays in Redis after it was written (Redis may evict it sooner under its
/// memory policy).
const ENTRY_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// The first pause between polls of a waiter, doubled up to [`LONGEST_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(5);
const LONGEST_POLL: Duration = Duration::from_millis(50);

/// Deletes a lease only if it is still the caller's (it may have expired and been taken).
const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// How to reach the remote tier and how long to wait for it. See the [module documentation](self).
#[derive(Clone)]
pub struct RemoteConfig {
    url: String,
    mac: MacKey,
    connect_timeout: Duration,
    op_timeout: Duration,
    lease: Duration,
    wait: Duration,
    failures: u32,
    cool_off: Duration,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &shown_url(&self.url))
            .field("connect_timeout", &self.connect_timeout)
            .field("op_timeout", &self.op_timeout)
            .field("lease", &self.lease)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl RemoteConfig {
    /// The remote at `url` (`redis://host:port/db`), its values sealed with the key in
    /// `key_file` (at least 32 bytes of secret, readable by its owner and group only); refused
    /// ([`Error::CacheRemoteRefused`]) when the URL does not parse or the key cannot be read.
    pub fn new(url: &str, key_file: impl AsRef<Path>) -> Result<RemoteConfig> {
        let key_file = key_file.as_ref();
        let refused = |reason: String| Error::CacheRemoteRefused {
            url: shown_url(url),
            reason,
        };
        redis::Client::open(url)
            .map_err(|error| refused(format!("the URL is not one: {error}")))?;
        let mac = MacKey::from_file(key_file).map_err(|why| {
            refused(format!(
                "its key file {} is not usable: {why}",
                key_file.display()
            ))
        })?;
        Ok(RemoteConfig {
            url: url.to_owned(),
            mac,
            connect_timeout: Duration::from_millis(250),
            op_timeout: Duration::from_secs(1),
            lease: Duration::from_secs(60),
            wait: Duration::from_secs(60),
            failures: 3,
            cool_off: Duration::from_secs(30),
        })
    }

    /// The remote named by `CUDYN_CACHE_REMOTE` with the key named by
    /// `CUDYN_CACHE_REMOTE_KEY_FILE`; `None` when the first is unset or empty, refused when the
    /// second is missing (values without a MAC would let any host that can write to Redis run
    /// code on every other) or unusable.
    pub fn from_environment() -> Result<Option<RemoteConfig>> {
        let Some(url) = std::env::var(REMOTE_ENV).ok().filter(|url| !url.is_empty()) else {
            return Ok(None);
        };
        let Some(key_file) = std::env::var_os(REMOTE_KEY_FILE_ENV).filter(|file| !file.is_empty())
        else {
            return Err(Error::CacheRemoteRefused {
                url: shown_url(&url),
                reason: format!(
                    "{REMOTE_KEY_FILE_ENV} names no key file; without a key, any host that can \
                     write to Redis could plant code every other host runs. Give every host the \
                     same secret file (`openssl rand -hex 32 > key; chmod 600 key`) and name it \
                     in {REMOTE_KEY_FILE_ENV}"
                ),
            });
        };
        RemoteConfig::new(&url, PathBuf::from(key_file)).map(Some)
    }

    crate::builder::setters! {
        /// The longest wait for a connection (default 250 ms).
        connect_timeout(timeout: Duration);
        /// The longest wait for one reply (default 1 s).
        op_timeout(timeout: Duration);
        /// How long a host's lease on a key lasts while it compiles (default 60 s): the longest
        /// a host that dies holding one delays the others.
        lease(lease: Duration);
        /// How long a host waits for another's compile of the same key before compiling itself
        /// (default 60 s).
        wait(wait: Duration);
    }

    /// Failures in a row after which the remote is left alone (default 3), and for how long
    /// (default 30 s).
    pub fn breaker(mut self, failures: u32, cool_off: Duration) -> Self {
        self.failures = failures;
        self.cool_off = cool_off;
        self
    }

    /// The URL, with any password replaced by `***`.
    pub fn url(&self) -> String {
        shown_url(&self.url)
    }
}

/// `url` with any password replaced, for messages and listings.
fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) if credentials.contains(':') => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

/// What the remote tier did in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RemoteStats {
    /// The remote, its password hidden.
    pub url: String,
    /// Entries found in Redis, checked and used.
    pub hits: u64,
    /// Lookups Redis had no entry for.
    pub misses: u64,
    /// Lookups that waited for another host's compile of the same key.
    pub waits: u64,
    /// Entries published.
    pub published: u64,
    /// Calls that failed (no connection, a timeout, an answer that is not Redis's).
    pub errors: u64,
    /// Calls not made because the remote was being left alone after failures.
    pub skipped: u64,
    /// Values refused for their MAC: written with another key, damaged or forged.
    pub refused_mac: u64,
    /// Values with the right MAC refused for their contents: not the entry of their key, or
    /// code that fails its check, or too large.
    pub refused_invalid: u64,
}

/// The remote tier: a Redis, the key sealing its values, one connection (made on first use,
/// dropped after a failure) and the breaker.
pub struct Remote {
    config: RemoteConfig,
    client: redis::Client,
    /// The prefix of every name this remote uses in Redis: `cudyn:<key id>:`.
    namespace: String,
    /// Whose a lease is: unique per process.
    owner: String,
    connection: Mutex<Option<redis::Connection>>,
    breaker: Mutex<Breaker>,
    /// This process's count of each [`Event`].
    counters: [AtomicU64; 8],
    /// The cache folder whose tally the events are added to too.
    tally: Option<PathBuf>,
    /// Events counted but not yet added to the tally: a hit's is added with the write of its
    /// entry, off the caller's path ([`Remote::flush_tally`]).
    untallied: [AtomicU64; 8],
    /// The keys of the latest hits, until the cache stores their entries (see
    /// [`Remote::take_fetched`]).
    fetched: Mutex<VecDeque<Key>>,
}

/// The most hits [`Remote::take_fetched`] remembers: more are stored as any other entry.
const FETCHED_KEPT: usize = 64;

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("config", &self.config)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// What the remote tier holds for a key.
#[derive(Debug)]
pub(crate) enum Found {
    /// Its entry, checked (see [`seal::accept`]), without toolchain or inputs.
    Hit(Box<Entry>),
    /// Nothing usable: compile, and [`Remote::publish`] the result. The lease, when this host
    /// took it, is released when dropped, after the publish.
    Miss(Option<Lease>),
}

/// This host's lease on a key: others wait for its compile. Released when dropped.
#[derive(Debug)]
pub(crate) struct Lease {
    remote: Arc<Remote>,
    name: String,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut release = redis::cmd("EVAL");
        release
            .arg(RELEASE)
            .arg(1)
            .arg(&self.name)
            .arg(&self.remote.owner);
        let _ = self
            .remote
            .call::<Value>(|connection| release.query(connection));
    }
}

impl Drop for Remote {
    /// The events not yet in the tally are added to it.
    fn drop(&mut self) {
        self.flush_tally();
    }
}

/// A reply of `SET ... NX`: whether the key was set.
fn was_set(reply: &Value) -> bool {
    matches!(reply, Value::Okay)
}

impl Remote {
    /// The remote tier `config` describes. Connects nothing yet.
    pub fn new(config: RemoteConfig) -> Result<Remote> {
        let client = redis::Client::open(config.url.as_str()).map_err(|error| {
            Error::CacheRemoteRefused {
                url: config.url(),
                reason: format!("the URL is not one: {error}"),
            }
        })?;
        let namespace = format!("cudyn:{}:", config.mac.id());
        let mut owner = [0u8; 16];
        owner[..8].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        owner[8..].copy_from_slice(&(now.as_nanos() as u64).to_le_bytes());
        Ok(Remote {
            config,
            client,
            namespace,
            owner: crate::digest::hex(&owner),
            connection: Mutex::new(None),
            breaker: Mutex::new(Breaker::new()),
            counters: Default::default(),
            tally: None,
            untallied: Default::default(),
            fetched: Mutex::new(VecDeque::new()),
        })
    }

    /// The same, adding what it does to the tally of the cache folder `dir` too (see
    /// [`Cache::remote_totals`](super::Cache::remote_totals)).
    pub(crate) fn tallied_in(mut self, dir: &Path) -> Remote {
        self.tally = Some(dir.to_owned());
        self
    }

    fn count(&self, event: Event) {
        self.counters[event as usize].fetch_add(1, Ordering::Relaxed);
        if self.tally.is_none() {
            return;
        }
        self.untallied[event as usize].fetch_add(1, Ordering::Relaxed);
        // A hit is the fast path: its record waits for the write of its entry. Every other
        // event comes with a compile or a timeout, beside which a file's append is nothing.
        if event != Event::Hit {
            self.flush_tally();
        }
    }

    /// Adds the events counted since the last call to the folder's tally, in one append.
    pub(crate) fn flush_tally(&self) {
        let Some(dir) = &self.tally else {
            return;
        };
        let counts: Vec<(Event, u64)> = tally::EVENTS
            .into_iter()
            .filter_map(|event| {
                let count = self.untallied[event as usize].swap(0, Ordering::Relaxed);
                (count > 0).then_some((event, count))
            })
            .collect();
        if !counts.is_empty() {
            tally::add(dir, &counts);
        }
    }

    /// Whether `key` is that of an entry this remote just handed over (found and checked),
    /// which the cache is storing now; forgotten once asked.
    pub(crate) fn take_fetched(&self, key: &Key) -> bool {
        let mut fetched = self.lock_fetched();
        let found = fetched.iter().position(|fetched| fetched == key);
        found.and_then(|at| fetched.remove(at)).is_some()
    }

    fn lock_fetched(&self) -> std::sync::MutexGuard<'_, VecDeque<Key>> {
        self.fetched
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// What the remote tier did in this process.
    pub fn stats(&self) -> RemoteStats {
        let load = |event: Event| self.counters[event as usize].load(Ordering::Relaxed);
        RemoteStats {
            url: self.config.url(),
            hits: load(Event::Hit),
            misses: load(Event::Miss),
            waits: load(Event::Wait),
            published: load(Event::Published),
            errors: load(Event::Error),
            skipped: load(Event::Skipped),
            refused_mac: load(Event::RefusedMac),
            refused_invalid: load(Event::RefusedInvalid),
        }
    }

    /// Whether Redis answers, and how long a `PING` took; the reason when it does not. Asks even
    /// while the breaker leaves the remote alone.
    pub fn ping(&self) -> std::result::Result<Duration, String> {
        let start = Instant::now();
        let mut connection = self.connect().map_err(|error| error.to_string())?;
        let reply: String = redis::cmd("PING")
            .query(&mut connection)
            .map_err(|error| error.to_string())?;
        if reply != "PONG" {
            return Err(format!("it answered {reply:?} to PING"));
        }
        Ok(start.elapsed())
    }

    fn connect(&self) -> redis::RedisResult<redis::Connection> {
        let connection = self
            .client
            .get_connection_with_timeout(self.config.connect_timeout)?;
        connection.set_read_timeout(Some(self.config.op_timeout))?;
        connection.set_write_timeout(Some(self.config.op_timeout))?;
        Ok(connection)
    }

    /// `call` on the connection (made first when there is none), or `None` when the breaker
    /// leaves the remote alone or the call fails; a failure drops the connection and counts.
    fn call<T>(
        &self,
        call: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let now = Instant::now();
        if !self.lock_breaker().allows(now) {
            self.count(Event::Skipped);
            return None;
        }
        let mut slot = self
            .connection
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let result = match slot.as_mut() {
            Some(connection) => call(connection),
            None => self.connect().and_then(|mut connection| {
                let result = call(&mut connection);
                *slot = Some(connection);
                result
            }),
        };
        match result {
            Ok(value) => {
                self.lock_breaker().succeeded();
                Some(value)
            }
            Err(_) => {
                *slot = None;
                self.count(Event::Error);
                let config = &self.config;
                self.lock_breaker()
                    .failed(Instant::now(), config.failures, config.cool_off);
                None
            }
        }
    }

    fn lock_breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn entry_name(&self, key: &Key) -> String {
        format!("{}{}", self.namespace, key.hex())
    }

    /// `GETRANGE` of a value: at most one byte more than [`MAX_ENTRY_BYTES`], so that a value
    /// too long is known without reading it whole. Empty for no value.
    fn bounded_get(name: &str) -> redis::Cmd {
        let mut get = redis::cmd("GETRANGE");
        get.arg(name).arg(0).arg(MAX_ENTRY_BYTES);
        get
    }

    /// The checked entry in `value`, or `None` (counted) when it is refused.
    fn accept(&self, expected: &Expected, value: Vec<u8>) -> Option<Entry> {
        if value.len() > MAX_ENTRY_BYTES {
            self.count(Event::RefusedInvalid);
            return None;
        }
        match seal::accept(&self.config.mac, expected, value) {
            Ok(entry) => {
                self.count(Event::Hit);
                let mut fetched = self.lock_fetched();
                if fetched.len() == FETCHED_KEPT {
                    fetched.pop_front();
                }
                fetched.push_back(entry.key);
                Some(entry)
            }
            Err(Refusal::Mac) => {
                self.count(Event::RefusedMac);
                None
            }
            Err(Refusal::Invalid) => {
                self.count(Event::RefusedInvalid);
                None
            }
        }
    }

    /// The entry of `expected.key` in Redis, or a miss: with this host's lease on the key when
    /// it took it, after waiting (within [`RemoteConfig::wait`]) while another host held it.
    /// A value that is refused, or a failed call, is a miss without a lease.
    pub(crate) fn find(self: &Arc<Self>, expected: &Expected) -> Found {
        let name = self.entry_name(&expected.key);
        let Some(value) = self.call(|c| Self::bounded_get(&name).query::<Vec<u8>>(c)) else {
            return Found::Miss(None);
        };
        if !value.is_empty() {
            return self
                .accept(expected, value)
                .map_or(Found::Miss(None), |entry| Found::Hit(Box::new(entry)));
        }
        self.count(Event::Miss);
        let lease_name = format!("{name}:lease");
        let lease_ms = self.config.lease.as_millis().max(1) as u64;
        // The lease first, then the value: a holder publishes before it releases, so a lease
        // taken after a release finds the value published.
        let mut claim = redis::pipe();
        claim
            .cmd("SET")
            .arg(&lease_name)
            .arg(&self.owner)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms)
            .add_command(Self::bounded_get(&name));
        let (start, mut pause) = (Instant::now(), FIRST_POLL);
        loop {
            let Some((set, value)) = self.call(|c| claim.query::<(Value, Vec<u8>)>(c)) else {
                return Found::Miss(None);
            };
            let lease = was_set(&set).then(|| Lease {
                remote: Arc::clone(self),
                name: lease_name.clone(),
            });
            if !value.is_empty() {
                return self
                    .accept(expected, value)
                    .map_or(Found::Miss(None), |entry| Found::Hit(Box::new(entry)));
            }
            if lease.is_some() {
                return Found::Miss(lease);
            }
            if start.elapsed() >= self.config.wait {
                return Found::Miss(None);
            }
            if pause == FIRST_POLL {
                self.count(Event::Wait);
            }
            std::thread::sleep(pause.min(self.config.wait.saturating_sub(start.elapsed())));
            pause = (pause * 2).min(LONGEST_POLL);
        }
    }

    /// Publishes `entry` (its toolchain and inputs left out: they are the host's own), sealed
    /// under its key; an entry larger than [`MAX_ENTRY_BYTES`] is not.
    pub(crate) fn publish(&self, entry: &Entry) {
        let bytes = Entry {
            toolchain: Default::default(),
            inputs: Default::default(),
            ..entry.clone()
        }
        .encode();
        let value = self.config.mac.seal(&entry.key, &bytes);
        if value.len() > MAX_ENTRY_BYTES {
            return;
        }
        let mut set = redis::cmd("SET");
        set.arg(self.entry_name(&entry.key))
            .arg(value)
            .arg("PX")
            .arg(ENTRY_TTL.as_millis() as u64);
        if self.call(|c| set.query::<Value>(c)).is_some() {
            self.count(Event::Published);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            shown_url("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(shown_url("redis://:secret@host/1"), "redis://:***@host/1");
        assert_eq!(shown_url("redis://host:6379/0"), "redis://host:6379/0");
    }
}
