//! The compile cache's remote tier against a real `redis-server` on the loopback (started on a
//! free port by `common/redis_server.rs`, stopped after; it needs Debian's `redis-server`
//! package). Needs NVRTC, no GPU.
//!
//! The hosts of a fleet are this test binary run again, filtered to the test that starts them,
//! with [`HOST_ENV`] saying where to write what they got; each has a cache folder of its own and
//! finds the remote through `CUDYN_CACHE_REMOTE` and `CUDYN_CACHE_REMOTE_KEY_FILE`, as a
//! deployed program would. A host compiles the same [`SOURCES`] sources, starting at a source of
//! its own, and reports for each whether NVRTC ran (`CacheUse::Miss`) and the code's digest.

#[path = "common/redis_server.rs"]
mod redis_server;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudyn::cache::RemoteConfig;
use cudyn::compile::CacheUse;
use cudyn::{Arch, Cache, Output, Program};
use redis_server::RedisServer;

/// Set only in hosts: the file to write their report to, and the first source they compile.
const HOST_ENV: &str = "CUDYN_FLEET_HOST";

/// Hosts of a fleet, and the sources each compiles.
const HOSTS: usize = 8;
const SOURCES: usize = 16;

/// Longest a fleet may take, all together.
const TIMEOUT: Duration = Duration::from_secs(240);

/// The fleets of these tests each load both cores; one at a time.
static ONE_FLEET: Mutex<()> = Mutex::new(());

fn source(index: usize) -> String {
    format!(
        "extern \"C\" __global__ void scale{index}(float *x, int n) {{\n\
         \x20   int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20   if (i < n) x[i] = x[i] * {index}.5f + {index};\n}}\n"
    )
}

fn program(index: usize) -> Program {
    Program::new(source(index))
        .arch(Arch::new(9, 0))
        .output(Output::Cubin)
}

/// The blake3 digest of each source's code, compiled without any cache.
fn reference() -> &'static [String] {
    static REFERENCE: OnceLock<Vec<String>> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        (0..SOURCES)
            .map(|index| {
                let code = program(index).cache(false).compile().expect("compiles");
                blake3::hash(code.code()).to_hex().to_string()
            })
            .collect()
    })
}

/// A key file of 32 random bytes as hex, readable by its owner alone.
fn key_file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let secret: String = (0..32)
        .map(|_| format!("{:02x}", fastrand::u8(..)))
        .collect();
    std::fs::write(&path, secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// What a host got for one source.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Compile {
    source: usize,
    digest: String,
    compiled: bool,
}

/// What a host reported: each compile, and its remote tier's counters.
#[derive(Debug, Default)]
struct Report {
    compiles: Vec<Compile>,
    stats: BTreeMap<String, u64>,
}

impl Report {
    fn read(path: &Path) -> Report {
        let mut report = Report::default();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // A host may be writing its last line: only whole lines are read.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            match fields[..] {
                ["compile", source, digest, compiled] => report.compiles.push(Compile {
                    source: source.parse().unwrap(),
                    digest: digest.into(),
                    compiled: compiled == "nvrtc",
                }),
                ["stat", name, value] => {
                    report.stats.insert(name.into(), value.parse().unwrap());
                }
                _ => panic!("a host wrote {line:?}"),
            }
        }
        report
    }

    fn nvrtc_compiles(&self) -> usize {
        self.compiles.iter().filter(|c| c.compiled).count()
    }

    fn stat(&self, name: &str) -> u64 {
        self.stats[name]
    }
}

/// A host's work, run when [`HOST_ENV`] is set: compile every source from its first one on,
/// through the process-wide cache the environment configures, reporting each as it goes.
fn run_host(setting: &str) {
    use std::io::Write as _;
    let (out, first) = setting.split_once('\n').expect("out file and first source");
    let first: usize = first.parse().unwrap();
    let mut report = std::fs::File::create(out).unwrap();
    for step in 0..SOURCES {
        let index = (first + step) % SOURCES;
        let compiled = program(index).compile().expect("compiles");
        let nvrtc = match compiled.cache_use() {
            CacheUse::Miss => "nvrtc",
            CacheUse::Hit => "cache",
            other => panic!("a compile without the cache: {other:?}"),
        };
        let digest = blake3::hash(compiled.code()).to_hex();
        writeln!(report, "compile {index} {digest} {nvrtc}").unwrap();
    }
    let stats = Cache::global().unwrap().stats().unwrap();
    let remote = stats.remote.expect("the remote tier the environment names");
    for (name, value) in [
        ("hits", remote.hits),
        ("misses", remote.misses),
        ("waits", remote.waits),
        ("published", remote.published),
        ("errors", remote.errors),
        ("skipped", remote.skipped),
        ("refused_mac", remote.refused_mac),
        ("refused_invalid", remote.refused_invalid),
    ] {
        writeln!(report, "stat {name} {value}").unwrap();
    }
}

/// A fleet of `hosts` hosts of `test` on the remote `url`, sealed with `key`, each with a new
/// cache folder; `during` is called every few milliseconds with the reports so far, until every
/// host is done. Panics when a host fails or the fleet runs past [`TIMEOUT`].
fn fleet(
    test: &str,
    url: &str,
    key: &Path,
    hosts: usize,
    mut during: impl FnMut(&[Report]),
) -> Vec<Report> {
    let scratch = tempfile::tempdir().unwrap();
    let outs: Vec<PathBuf> = (0..hosts)
        .map(|host| scratch.path().join(format!("host-{host}")))
        .collect();
    let mut children: Vec<Child> = outs
        .iter()
        .enumerate()
        .map(|(host, out)| {
            let cache = scratch.path().join(format!("cache-{host}"));
            Command::new(std::env::current_exe().unwrap())
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env(HOST_ENV, format!("{}\n{}", out.display(), host * 2))
                .env("CUDYN_CACHE_DIR", &cache)
                .env("CUDYN_CACHE_REMOTE", url)
                .env("CUDYN_CACHE_REMOTE_KEY_FILE", key)
                .env_remove("CUDYN_CACHE")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + TIMEOUT;
    let mut done = vec![false; hosts];
    while !done.iter().all(|&d| d) {
        for (host, child) in children.iter_mut().enumerate() {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "host {host} failed: {status}");
                done[host] = true;
            }
        }
        let reports: Vec<Report> = outs.iter().map(|out| Report::read(out)).collect();
        during(&reports);
        if Instant::now() > deadline {
            children.iter_mut().for_each(|child| drop(child.kill()));
            panic!("the fleet ran past {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    outs.iter().map(|out| Report::read(out)).collect()
}

/// Every host got, for every source, the code of a compile without cache.
fn assert_correct(reports: &[Report]) {
    for (host, report) in reports.iter().enumerate() {
        assert_eq!(report.compiles.len(), SOURCES, "host {host}");
        for compile in &report.compiles {
            assert_eq!(
                compile.digest,
                reference()[compile.source],
                "host {host}, source {}",
                compile.source
            );
        }
    }
}

fn total(reports: &[Report], stat: &str) -> u64 {
    reports.iter().map(|report| report.stat(stat)).sum()
}

#[test]
fn eight_hosts_compile_each_source_once() {
    if let Ok(setting) = std::env::var(HOST_ENV) {
        return run_host(&setting);
    }
    let _one = ONE_FLEET
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    reference();
    let redis = RedisServer::start();
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), "key");
    let started = Instant::now();
    let reports = fleet(
        "eight_hosts_compile_each_source_once",
        &redis.url(),
        &key,
        HOSTS,
        |_| {},
    );
    eprintln!("8 hosts x 16 sources in {:?}", started.elapsed());
    assert_correct(&reports);
    let compiles: usize = reports.iter().map(Report::nvrtc_compiles).sum();
    assert_eq!(compiles, SOURCES, "NVRTC compiles across the fleet");
    assert_eq!(total(&reports, "published"), SOURCES as u64);
    assert_eq!(
        total(&reports, "hits"),
        (HOSTS * SOURCES - SOURCES) as u64,
        "every other result came from Redis"
    );
    for stat in ["errors", "skipped", "refused_mac", "refused_invalid"] {
        assert_eq!(total(&reports, stat), 0, "{stat}");
    }
}

#[test]
fn redis_killed_mid_run_costs_no_host_its_results_and_an_empty_one_is_filled_again() {
    if let Ok(setting) = std::env::var(HOST_ENV) {
        return run_host(&setting);
    }
    let test = "redis_killed_mid_run_costs_no_host_its_results_and_an_empty_one_is_filled_again";
    let _one = ONE_FLEET
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    reference();
    let mut redis = RedisServer::start();
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), "key");
    let started = Instant::now();
    let mut killed_after = None;
    let reports = fleet(test, &redis.url(), &key, HOSTS, |reports| {
        let compiled: usize = reports.iter().map(|report| report.compiles.len()).sum();
        if killed_after.is_none() && compiled >= 4 {
            redis.kill();
            killed_after = Some(compiled);
        }
    });
    let took = started.elapsed();
    let killed_after = killed_after.expect("Redis was killed while the hosts compiled");
    eprintln!("killed after {killed_after} results; the fleet finished in {took:?}");
    assert!(killed_after < HOSTS * SOURCES, "killed during the run");
    assert_correct(&reports);
    assert!(total(&reports, "errors") >= 1, "the hosts noticed");
    assert!(took < Duration::from_secs(120), "bounded: {took:?}");

    // Restarted empty: the next host compiles and publishes everything, the one after finds it.
    redis.restart();
    let refill = fleet(test, &redis.url(), &key, 1, |_| {});
    assert_correct(&refill);
    assert_eq!(refill[0].nvrtc_compiles(), SOURCES);
    assert_eq!(refill[0].stat("published"), SOURCES as u64);
    let after = fleet(test, &redis.url(), &key, 1, |_| {});
    assert_correct(&after);
    assert_eq!(after[0].nvrtc_compiles(), 0);
    assert_eq!(after[0].stat("hits"), SOURCES as u64);
}

/// The names of the entries in Redis (leases aside).
fn entry_names(connection: &mut redis::Connection) -> Vec<String> {
    let names: Vec<String> = redis::cmd("KEYS").arg("cudyn:*").query(connection).unwrap();
    names
        .into_iter()
        .filter(|name| !name.ends_with(":lease"))
        .collect()
}

/// `entry` (an entry file) sealed under `key` with the secret in `key_file`, written here
/// independently of cudyn's code, as the format is documented: magic, keyed blake3 MAC over
/// magic, cache key and entry, then the entry.
fn seal(key_file: &Path, key: &[u8; 32], entry: &[u8]) -> Vec<u8> {
    let secret = std::fs::read(key_file).unwrap();
    let mac_key = blake3::derive_key(
        "cudyn 2026 remote compile cache MAC key",
        secret.trim_ascii(),
    );
    let mut mac = blake3::Hasher::new_keyed(&mac_key);
    mac.update(b"CUDYNRE1").update(key).update(entry);
    [&b"CUDYNRE1"[..], mac.finalize().as_bytes(), entry].concat()
}

fn key_of(name: &str) -> [u8; 32] {
    let hex = name.rsplit(':').next().unwrap();
    std::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
}

#[test]
fn entries_of_another_key_damaged_or_of_the_wrong_kind_are_refused_counted_and_compiled_locally() {
    let redis = RedisServer::start();
    let keys = tempfile::tempdir().unwrap();
    let (ours, theirs) = (
        key_file(keys.path(), "ours"),
        key_file(keys.path(), "theirs"),
    );
    let folders = tempfile::tempdir().unwrap();
    let hosts = std::sync::atomic::AtomicUsize::new(0);
    // A host with a new, empty cache folder.
    let host = |key: &Path| {
        let number = hosts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cache = Cache::open(folders.path().join(number.to_string())).unwrap();
        cache
            .set_remote(Some(RemoteConfig::new(&redis.url(), key).unwrap()))
            .unwrap();
        cache
    };
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let expected = program(3).cache(false).compile().unwrap();
    // Our fleet publishes the cubin; another fleet, with another key, publishes it too.
    let first = program(3).compile_in(&host(&ours)).unwrap();
    assert_eq!(first.cache_use(), &CacheUse::Miss);
    let name = entry_names(&mut connection).pop().unwrap();
    program(3).compile_in(&host(&theirs)).unwrap();
    let other_name = entry_names(&mut connection)
        .into_iter()
        .find(|other| *other != name)
        .expect("the other key's entry, under its own name");
    // And the PTX of the same source, under its own key.
    program(3)
        .output(Output::Ptx)
        .compile_in(&host(&ours))
        .unwrap();
    let ptx_name = entry_names(&mut connection)
        .into_iter()
        .find(|other| *other != name && *other != other_name)
        .unwrap();
    let get = |connection: &mut redis::Connection, name: &str| -> Vec<u8> {
        redis::cmd("GET").arg(name).query(connection).unwrap()
    };
    let good = get(&mut connection, &name);
    assert_eq!(
        program(3).compile_in(&host(&ours)).unwrap().cache_use(),
        &CacheUse::Hit,
        "the good entry is a hit"
    );

    let with_other_key = get(&mut connection, &other_name);
    let mut flipped = good.clone();
    let at = flipped.len() - 100; // in the code
    flipped[at] ^= 0x10;
    // The PTX entry, its key made the cubin's, sealed again whole with our key: every check of
    // its own passes, but it is not the cubin the key is for.
    let ptx_entry = get(&mut connection, &ptx_name)[40..].to_vec();
    let mut wrong_kind = ptx_entry[..ptx_entry.len() - 16].to_vec();
    assert_eq!(
        wrong_kind[24..56],
        key_of(&ptx_name),
        "the entry's key field"
    );
    wrong_kind[24..56].copy_from_slice(&key_of(&name));
    let checksum = xxhash_rust::xxh3::xxh3_128(&wrong_kind).to_le_bytes();
    wrong_kind.extend_from_slice(&checksum);
    let wrong_kind = seal(&ours, &key_of(&name), &wrong_kind);

    for (what, value, refusal) in [
        ("another key's entry", with_other_key, "refused_mac"),
        ("flipped bytes", flipped, "refused_mac"),
        (
            "the wrong kind under a valid MAC",
            wrong_kind,
            "refused_invalid",
        ),
    ] {
        let () = redis::cmd("SET")
            .arg(&name)
            .arg(value)
            .query(&mut connection)
            .unwrap();
        let cache = host(&ours);
        let compiled = program(3).compile_in(&cache).unwrap();
        assert_eq!(
            compiled.cache_use(),
            &CacheUse::Miss,
            "{what}: compiled locally"
        );
        assert_eq!(compiled.code(), expected.code(), "{what}");
        let stats = cache.stats().unwrap().remote.unwrap();
        let counted = match refusal {
            "refused_mac" => (stats.refused_mac, stats.refused_invalid),
            _ => (stats.refused_invalid, stats.refused_mac),
        };
        assert_eq!(counted, (1, 0), "{what}: {stats:?}");
        assert_eq!((stats.hits, stats.published), (0, 1), "{what}: {stats:?}");
        // The local compile published a good entry over it.
        let next = program(3).compile_in(&host(&ours)).unwrap();
        assert_eq!(next.cache_use(), &CacheUse::Hit, "{what}: published again");
    }
}

/// A server on a loopback port that accepts connections and, for each, either never answers (a
/// Redis hung or far too slow) or answers bytes that are not Redis's protocol.
fn impostor(answer: Option<&'static [u8]>) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/0", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut request = [0; 4096];
                while let Ok(read) = stream.read(&mut request) {
                    if read == 0 {
                        return;
                    }
                    if let Some(answer) = answer {
                        let _ = stream.write_all(answer);
                    }
                }
            });
        }
    });
    url
}

#[test]
fn an_absent_hung_or_garbled_remote_costs_a_few_short_timeouts_then_is_left_alone() {
    let nothing_there = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("redis://{}/0", listener.local_addr().unwrap())
    };
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), "key");
    let folders = tempfile::tempdir().unwrap();
    let op_timeout = Duration::from_millis(200);
    for (what, url) in [
        ("no server", nothing_there),
        ("a server that never answers", impostor(None)),
        (
            "a server answering garbage",
            impostor(Some(b"garbage, not RESP\r\n")),
        ),
    ] {
        let cache = Cache::open(folders.path().join(what)).unwrap();
        let config = RemoteConfig::new(&url, &key)
            .unwrap()
            .op_timeout(op_timeout);
        cache.set_remote(Some(config)).unwrap();
        let started = Instant::now();
        for index in 0..4 {
            let compiled = program(index).compile_in(&cache).unwrap();
            assert_eq!(compiled.cache_use(), &CacheUse::Miss, "{what}");
            assert_eq!(
                blake3::hash(compiled.code()).to_hex().to_string(),
                reference()[index],
                "{what}"
            );
        }
        let took = started.elapsed();
        let stats = cache.stats().unwrap().remote.unwrap();
        // Three failures open the breaker: the lookups, publishes and lease releases after it are
        // not tried.
        assert_eq!(stats.errors, 3, "{what}: {stats:?}");
        assert!(stats.skipped >= 4, "{what}: {stats:?}");
        assert_eq!((stats.hits, stats.published), (0, 0), "{what}");
        // Four compiles, and at most three timeouts of the remote (a connect's and a reply's).
        assert!(took < Duration::from_secs(20), "{what}: {took:?}");
        let remote = cache.remote().unwrap();
        assert!(remote.ping().is_err(), "{what}: said to answer");
        assert_eq!(cache.remote_totals().errors, 3, "{what}: the host's tally");
    }
}

/// Set only in the process [`a_remote_hit_is_on_disk_for_the_next_start_after_a_drop_or_an_exit`]
/// starts: the programs it compiles, from 0 on, before it exits at once.
const HIT_AND_EXIT_ENV: &str = "CUDYN_REMOTE_HIT_AND_EXIT";

/// The programs `0..count` compiled in `cache`: every one a hit.
fn all_hits(cache: &Cache, count: usize) {
    for index in 0..count {
        let compiled = program(index).compile_in(cache).unwrap();
        assert_eq!(compiled.cache_use(), &CacheUse::Hit, "program {index}");
        assert_eq!(
            blake3::hash(compiled.code()).to_hex().to_string(),
            reference()[index]
        );
    }
}

#[test]
fn a_remote_hit_is_on_disk_for_the_next_start_after_a_drop_or_an_exit() {
    const PROGRAMS: usize = 4;
    if let Ok(count) = std::env::var(HIT_AND_EXIT_ENV) {
        // Through the process-wide cache the environment names; no look at the folder before
        // the exit, which alone must wait for the writes.
        for index in 0..count.parse().unwrap() {
            let compiled = program(index).compile().unwrap();
            assert_eq!(compiled.cache_use(), &CacheUse::Hit);
        }
        // At once, not through the test harness's own end.
        std::process::exit(0);
    }
    let redis = RedisServer::start();
    let keys = tempfile::tempdir().unwrap();
    let key = key_file(keys.path(), "key");
    let folders = tempfile::tempdir().unwrap();
    let remote = || Some(RemoteConfig::new(&redis.url(), &key).unwrap());
    let publisher = Cache::open(folders.path().join("publisher")).unwrap();
    publisher.set_remote(remote()).unwrap();
    for index in 0..PROGRAMS {
        let compiled = program(index).compile_in(&publisher).unwrap();
        assert_eq!(compiled.cache_use(), &CacheUse::Miss);
    }

    // A cache dropped right after its remote hits: the drop waits for their writes.
    let dropped = folders.path().join("dropped");
    let host = Cache::open(&dropped).unwrap();
    host.set_remote(remote()).unwrap();
    all_hits(&host, PROGRAMS);
    // The remote tier's own counters: `Cache::stats` would wait for the writes itself.
    assert_eq!(host.remote().unwrap().stats().hits, PROGRAMS as u64);
    drop(host);
    next_start_is_local(&dropped, PROGRAMS);

    // A process that exits right after its remote hits: its exit waits for their writes.
    let exited = folders.path().join("exited");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_remote_hit_is_on_disk_for_the_next_start_after_a_drop_or_an_exit",
            "--exact",
            "--test-threads",
            "1",
        ])
        .env(HIT_AND_EXIT_ENV, PROGRAMS.to_string())
        .env("CUDYN_CACHE_DIR", &exited)
        .env("CUDYN_CACHE_REMOTE", redis.url())
        .env("CUDYN_CACHE_REMOTE_KEY_FILE", &key)
        .env_remove("CUDYN_CACHE")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    next_start_is_local(&exited, PROGRAMS);
}

/// A new cache of `folder` gets each of the `programs` as a disk hit, and its tally holds the
/// remote hits that filled it: the writes queued off the caller's path were done.
fn next_start_is_local(folder: &std::path::Path, programs: usize) {
    let next = Cache::open(folder).unwrap();
    all_hits(&next, programs);
    let stats = next.stats().unwrap();
    let count = programs as u64;
    assert_eq!(
        (stats.disk_hits, stats.misses, stats.entries),
        (count, 0, count),
        "the next start is local: {stats:?}"
    );
    assert_eq!(next.remote_totals().hits, count, "the tally");
}
