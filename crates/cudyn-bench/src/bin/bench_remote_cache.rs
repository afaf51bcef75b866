//! Benchmark of the compile cache's remote tier (Redis), on the loopback; needs NVRTC and a
//! `redis-server` (Debian's package, or `CUDYN_REDIS_SERVER`), no GPU.
//!
//! 1. A remote hit of a cubin of about 100 KiB: `Program::compile_in` of a program another host
//!    published, in a host's cache that has been used but lacks that program (memory and disk
//!    miss, the entry read from Redis, its MAC and code checked, then handed to the cache's
//!    writer thread for the local disk cache, whose write is off the clock but must be done by
//!    the end; each round a program of its own, the source told apart by a comment), against the
//!    reference in the same run, a local disk hit of the same program (a cache of a warm folder,
//!    new, so that memory misses). Both in one process whose compiler is known, medians of many
//!    repetitions. Also printed: a process's first remote hit, which connects to Redis first (a
//!    new cache with a new remote tier each time), and the `GETRANGE` of the value alone (the
//!    `redis` crate, no cudyn), the floor under the remote hit.
//! 2. A cold fleet start: 8 processes (this program run again), each with an empty cache folder
//!    of its own, compile the same 16 sources, with and without the remote tier; the wall time
//!    from the first start to the last exit, medians of a few runs (Redis emptied between runs).
//!
//! Run: `source ~/.cache/cudyn/venv-cu13.0/bin/activate`, then
//! `cargo run --release -p cudyn-bench --bin bench_remote_cache`. Target: the remote hit of 1.
//! at most 1 ms.

#[path = "../../../cudyn/tests/common/redis_server.rs"]
mod redis_server;

#[path = "../durations.rs"]
mod durations;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use durations::median;

use cudyn::cache::RemoteConfig;
use cudyn::compile::{Arch, CacheUse, Program};
use cudyn::Cache;
use redis_server::RedisServer;

/// Set only in the hosts of a fleet: the first source they compile.
const HOST_ENV: &str = "CUDYN_BENCH_REMOTE_HOST";

const HOSTS: usize = 8;
const SOURCES: usize = 16;
/// Repetitions of each hit in 1., runs of each fleet in 2.
const HITS: usize = 101;
const FLEET_RUNS: usize = 3;
/// Rounds of 1. that measure a remote hit: each needs a program compiled and published first.
const NEW_KEYS: usize = 31;

/// About 100 KiB of cubin for sm_90: 35 kernels of an unrolled loop.
fn large_source() -> String {
    (0..35)
        .map(|k| {
            format!(
                "extern \"C\" __global__ void mix{k}(float *x, const float *y, int n) {{\n\
                 int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                 if (i >= n) return;\n\
                 float a = x[i], b = y[i];\n\
                 #pragma unroll\n\
                 for (int r = 0; r < 24; ++r) {{ a = a * {k}.25f + b; b = b * 0.5f - a * r; }}\n\
                 x[i] = a + b;\n}}\n"
            )
        })
        .collect()
}

fn fleet_source(index: usize) -> String {
    format!(
        "extern \"C\" __global__ void scale{index}(float *x, int n) {{\n\
         int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         if (i < n) x[i] = x[i] * {index}.5f + {index};\n}}\n"
    )
}

/// A key file of 32 random bytes, readable by its owner alone.
fn key_file(dir: &Path) -> std::path::PathBuf {
    use std::io::Read as _;
    let mut secret = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut secret))
        .expect("random bytes for the key");
    let path = dir.join("key");
    let hex: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
    std::fs::write(&path, hex).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn main() {
    if let Ok(first) = std::env::var(HOST_ENV) {
        return host(first.parse().unwrap());
    }
    let scratch = tempfile::tempdir().unwrap();
    let key = key_file(scratch.path());
    let redis = RedisServer::start();
    remote_hit(&redis, &key, scratch.path());
    cold_fleet(&redis, &key, scratch.path());
}

/// 1.: a remote hit against a local disk hit.
fn remote_hit(redis: &RedisServer, key: &Path, scratch: &Path) {
    let program = Program::new(large_source()).arch(Arch::new(9, 0));
    let config = || RemoteConfig::new(&redis.url(), key).unwrap();
    let warm = scratch.join("warm");
    let publisher = Cache::open(&warm).unwrap();
    publisher.set_remote(Some(config())).unwrap();
    let code = program.compile_in(&publisher).unwrap();
    assert_eq!(code.cache_use(), &CacheUse::Miss);
    let size = code.code().len();
    let (mut remote, mut first, mut disk, mut get) = (vec![], vec![], vec![], vec![]);
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let names: Vec<String> = redis::cmd("KEYS")
        .arg("cudyn:*")
        .query(&mut connection)
        .unwrap();
    // Programs another host published, one per round: the host's cache below has none of them.
    let published: Vec<Program> = (0..NEW_KEYS)
        .map(|round| {
            let variant =
                Program::new(format!("{}// copy {round}\n", large_source())).arch(Arch::new(9, 0));
            let compiled = variant.compile_in(&publisher).unwrap();
            assert_eq!(compiled.cache_use(), &CacheUse::Miss);
            variant
        })
        .collect();
    let host = Cache::open(scratch.join("host")).unwrap();
    host.set_remote(Some(config())).unwrap();
    // In use: connected, its compiler known and its folder made, by a first remote hit.
    assert_eq!(
        program.compile_in(&host).unwrap().cache_use(),
        &CacheUse::Hit
    );
    for (round, variant) in (0..HITS).zip(published.iter().cycle()) {
        if round < NEW_KEYS {
            let start = Instant::now();
            let hit = variant.compile_in(&host).unwrap();
            remote.push(start.elapsed());
            assert_eq!(hit.cache_use(), &CacheUse::Hit);
            assert_eq!(hit.code(), code.code());
        }
        // A process's first: a new, empty local cache and a new remote tier, not yet connected.
        let folder = scratch.join(format!("empty-{round}"));
        let empty = Cache::open(&folder).unwrap();
        empty.set_remote(Some(config())).unwrap();
        let start = Instant::now();
        let hit = program.compile_in(&empty).unwrap();
        first.push(start.elapsed());
        assert_eq!(empty.stats().unwrap().remote.unwrap().hits, 1);
        assert_eq!(hit.code(), code.code());
        drop(empty);
        std::fs::remove_dir_all(folder).unwrap();
        // Disk: the warm folder, memory empty.
        let local = Cache::open(&warm).unwrap();
        let start = Instant::now();
        let hit = program.compile_in(&local).unwrap();
        disk.push(start.elapsed());
        assert_eq!(local.stats().unwrap().disk_hits, 1);
        assert_eq!(hit.code(), code.code());
        // The value alone.
        let start = Instant::now();
        let value: Vec<u8> = redis::cmd("GETRANGE")
            .arg(&names[0])
            .arg(0)
            .arg(cudyn::cache::MAX_ENTRY_BYTES)
            .query(&mut connection)
            .unwrap();
        get.push(start.elapsed());
        assert!(value.len() > size);
    }
    let stats = host.stats().unwrap();
    assert_eq!(stats.remote.unwrap().hits, NEW_KEYS as u64 + 1);
    assert_eq!(
        stats.entries,
        NEW_KEYS as u64 + 1,
        "every remote hit written to the local disk"
    );
    let (remote, disk, get) = (median(remote), median(disk), median(get));
    let first = median(first);
    println!(
        "1. a hit of a {:.1} KiB cubin, medians of {HITS} ({NEW_KEYS} for the remote hit):",
        size as f64 / 1024.0
    );
    println!("   local disk hit (reference)      {:>9.3} ms", ms(disk));
    println!(
        "   remote hit, disk write queued   {:>9.3} ms  ({:.2}x the disk hit; target <= 1 ms)",
        ms(remote),
        ms(remote) / ms(disk)
    );
    println!(
        "   a process's first remote hit    {:>9.3} ms  (connecting included; {:.2}x)",
        ms(first),
        ms(first) / ms(disk)
    );
    println!("   GETRANGE of the value alone     {:>9.3} ms", ms(get));
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// 2.: a cold fleet start, with and without the remote tier.
fn cold_fleet(redis: &RedisServer, key: &Path, scratch: &Path) {
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut with = Vec::new();
    let mut without = Vec::new();
    for run in 0..FLEET_RUNS {
        for remote in [false, true] {
            let () = redis::cmd("FLUSHALL").query(&mut connection).unwrap();
            let folder = scratch.join(format!("fleet-{run}-{remote}"));
            let (took, compiles) = fleet(&folder, remote.then(|| (redis.url(), key)));
            if remote {
                assert_eq!(compiles, SOURCES, "NVRTC compiles with the remote tier");
                with.push(took);
            } else {
                assert_eq!(compiles, HOSTS * SOURCES);
                without.push(took);
            }
            let _ = std::fs::remove_dir_all(&folder);
        }
    }
    let (with, without) = (median(with), median(without));
    println!(
        "2. a cold fleet start, {HOSTS} processes x {SOURCES} sources, medians of {FLEET_RUNS}:"
    );
    println!(
        "   without the remote tier (reference) {:>8.0} ms  ({} NVRTC compiles)",
        ms(without),
        HOSTS * SOURCES
    );
    println!(
        "   with the remote tier                {:>8.0} ms  ({SOURCES} NVRTC compiles; {:.2}x)",
        ms(with),
        ms(with) / ms(without)
    );
}

/// Runs a fleet with cache folders under `folder`; its wall time and NVRTC compiles in all.
fn fleet(folder: &Path, remote: Option<(String, &Path)>) -> (Duration, usize) {
    let start = Instant::now();
    let children: Vec<_> = (0..HOSTS)
        .map(|host| {
            let mut command = Command::new(std::env::current_exe().unwrap());
            command
                .env(HOST_ENV, (host * 2).to_string())
                .env("CUDYN_CACHE_DIR", folder.join(host.to_string()))
                .env_remove("CUDYN_CACHE")
                .env_remove("CUDYN_CACHE_REMOTE")
                .stdout(Stdio::piped());
            if let Some((url, key)) = &remote {
                command
                    .env("CUDYN_CACHE_REMOTE", url)
                    .env("CUDYN_CACHE_REMOTE_KEY_FILE", key);
            }
            command.spawn().unwrap()
        })
        .collect();
    let mut compiles = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a host failed");
        compiles += String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .parse::<usize>()
            .unwrap();
    }
    (start.elapsed(), compiles)
}

/// A host of a fleet: compiles every source from `first` on; prints how many NVRTC compiled.
fn host(first: usize) {
    let mut compiles = 0;
    for step in 0..SOURCES {
        let source = fleet_source((first + step) % SOURCES);
        let compiled = Program::new(source)
            .arch(Arch::new(9, 0))
            .compile()
            .unwrap();
        compiles += usize::from(compiled.cache_use() == &CacheUse::Miss);
    }
    println!("{compiles}");
}
