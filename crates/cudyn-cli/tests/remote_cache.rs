//! `cudyn doctor` and `cudyn cache stats` on the compile cache's remote tier, against a real
//! `redis-server` on the loopback (Debian's `redis-server` package; see the helper): whether it
//! answers, why it is refused, and the host's counts after compiles through it. Needs NVRTC.

mod common;
#[path = "../../cudyn/tests/common/redis_server.rs"]
mod redis_server;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use redis_server::RedisServer;

const SOURCE: &str = "extern \"C\" __global__ void twice(int *x) { *x *= 2; }\n";

/// `cudyn` with the cache folder `cache` and the remote `url` sealed by `key`.
fn cudyn(cache: &Path, url: &str, key: &Path) -> Command {
    let mut command = common::cudyn();
    command
        .env("CUDYN_CACHE_DIR", cache)
        .env("CUDYN_CACHE_REMOTE", url)
        .env("CUDYN_CACHE_REMOTE_KEY_FILE", key)
        .env_remove("CUDYN_CACHE");
    command
}

fn stdout(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(output.status.success(), "{command:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn doctor_and_cache_stats_report_the_remote_tier() {
    let mut redis = RedisServer::start();
    let scratch = tempfile::tempdir().unwrap();
    let key = scratch.path().join("key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let source = scratch.path().join("twice.cu");
    std::fs::write(&source, SOURCE).unwrap();

    let doctor = stdout(cudyn(&scratch.path().join("a"), &redis.url(), &key).arg("doctor"));
    assert!(
        doctor.contains(&format!("{} answers (", redis.url())),
        "{doctor}"
    );

    // Two hosts: the first compiles and publishes, the second reads it.
    for host in ["a", "b"] {
        let cache = scratch.path().join(host);
        let out = scratch.path().join(format!("{host}.cubin"));
        stdout(
            cudyn(&cache, &redis.url(), &key)
                .args(["compile", "--arch", "sm_90", "-o"])
                .arg(&out)
                .arg(&source),
        );
    }
    assert_eq!(
        std::fs::read(scratch.path().join("a.cubin")).unwrap(),
        std::fs::read(scratch.path().join("b.cubin")).unwrap()
    );
    let stats = |host: &str| {
        let cache = scratch.path().join(host);
        let json = stdout(cudyn(&cache, &redis.url(), &key).args(["cache", "stats", "--json"]));
        serde_json::from_str::<serde_json::Value>(&json).unwrap()
    };
    let (a, b) = (stats("a"), stats("b"));
    assert_eq!(a["remote_totals"]["misses"], 1, "{a}");
    assert_eq!(a["remote_totals"]["published"], 1, "{a}");
    assert_eq!(b["remote_totals"]["hits"], 1, "{b}");
    assert_eq!(b["remote_totals"]["published"], 0, "{b}");
    assert_eq!(
        b["stats"]["entries"], 1,
        "the hit was written to the disk cache"
    );
    assert!(b["remote"]["answers_in_ms"].is_number(), "{b}");
    let text =
        stdout(cudyn(&scratch.path().join("b"), &redis.url(), &key).args(["cache", "stats"]));
    assert!(text.contains("1 hits, 0 misses"), "{text}");

    // Without a key: refused, saying why; the command still succeeds.
    let refused = cudyn(&scratch.path().join("a"), &redis.url(), Path::new(""))
        .arg("doctor")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stdout);
    assert!(
        said.contains("CUDYN_CACHE_REMOTE_KEY_FILE names no key file"),
        "{said}"
    );
    assert!(refused.status.success(), "a refused remote is no failure");

    // Redis gone: doctor says it does not answer.
    redis.kill();
    let doctor = stdout(cudyn(&scratch.path().join("a"), &redis.url(), &key).arg("doctor"));
    assert!(doctor.contains("does not answer"), "{doctor}");
}
