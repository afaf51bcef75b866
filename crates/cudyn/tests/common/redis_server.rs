//! A `redis-server` of its own for a test or a benchmark: started on a free loopback port with
//! nothing saved to disk, stopped (killed) when dropped. It needs Debian's `redis-server`
//! package (`apt-get install redis-server`, which `.ci/run` installs when missing), or the
//! program named by `CUDYN_REDIS_SERVER`; without it, starting fails with a message saying so.

#![allow(dead_code)] // each user takes part of it

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the `redis-server` program, when not on `PATH`.
pub const SERVER_ENV: &str = "CUDYN_REDIS_SERVER";

/// A running `redis-server` on `127.0.0.1:port`.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// A new server on a free port; panics, naming what is missing, when it cannot start.
    pub fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        let dir = tempfile::tempdir().expect("a folder for redis-server");
        let mut server = RedisServer {
            port,
            child: None,
            log: dir.path().join("redis.log"),
            _dir: dir,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:port/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server at once (SIGKILL): what a crashed or unplugged Redis looks like.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty (nothing is ever saved); waits until it
    /// answers `PING`.
    pub fn restart(&mut self) {
        self.kill();
        let program = std::env::var_os(SERVER_ENV).unwrap_or_else(|| "redis-server".into());
        let log = std::fs::File::create(&self.log).expect("redis-server's log file");
        let child = Command::new(&program)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "yes", "--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log, twice"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start {}: {error}. These tests need a Redis server: install \
                     Debian's redis-server package (apt-get install redis-server), or name the \
                     program in {SERVER_ENV}",
                    PathBuf::from(&program).display()
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "redis-server exited ({status}) instead of serving port {}: {}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {} within 10 s: {}",
                self.port,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers `PING` now.
    pub fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut reply = [0; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
