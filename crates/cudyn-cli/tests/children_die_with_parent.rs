//! Every process cudyn starts dies with its parent: `cudyn link` killed (SIGKILL) during a link
//! leaves no link worker running, and `cudyn compile` killed during a batch leaves no compile
//! server or worker. The children are found by a marker in their environment, which they inherit.
//! Needs NVRTC (the CUDA wheels), no GPU. Linux only (`/proc`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cudyn;

/// The name of the marker variable.
const MARKER: &str = "CUDYN_TEST_CHILD_MARKER";

/// The processes whose environment holds `MARKER=value`, with their arguments.
fn marked(value: &str) -> Vec<(i32, String)> {
    let wanted = format!("{MARKER}={value}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|&b| b == 0)
            .any(|pair| pair == wanted.as_bytes())
        {
            continue;
        }
        // A zombie has an empty command line and runs nothing.
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline.is_empty() {
            continue;
        }
        let args = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((pid, args));
    }
    found
}

/// Whether process `pid` sleeps (the test hook's hang), rather than waits for its next job on a
/// pipe: a worker killed while it waits would end anyway, when its pipe closes.
fn sleeping(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan"))
        .is_ok_and(|wchan| wchan.contains("nanosleep"))
}

/// Runs `cudyn args` in `folder` with the marker and `hang` (the test hook that makes a worker
/// never answer on that input), waits for a child in `mode` to hang on it, kills the command
/// with SIGKILL, together with the children whose arguments hold `also` (as a kill of the
/// process group would), and requires every marked process to be gone within seconds.
fn kill_and_look(folder: &Path, args: &[&str], hang: &str, mode: &str, also: Option<&str>) {
    let value = format!("{}-{mode}", std::process::id());
    let mut parent = cudyn()
        .current_dir(folder)
        .env(MARKER, &value)
        .env("CUDYN_WORKER_TEST_HANG", hang)
        .env("CUDYN_CACHE", "off")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let hung = |(pid, args): &(i32, String)| args.contains(mode) && sleeping(*pid);
    while !marked(&value).iter().any(hung) {
        assert!(
            Instant::now() < deadline,
            "no {mode} hung: {:?}",
            marked(&value)
        );
        assert!(parent.try_wait().unwrap().is_none(), "cudyn ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let children = marked(&value);
    parent.kill().unwrap();
    for (pid, args) in &children {
        if also.is_some_and(|also| args.contains(also)) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
    parent.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = marked(&value);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = marked(&value);
    }
    // A failure leaves nothing behind either.
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "still running after their parent was killed: {left:?} (children were {children:?})"
    );
}

fn compile(folder: &Path, args: &[&str]) {
    let run = cudyn().current_dir(folder).args(args).output().unwrap();
    assert!(run.status.success(), "{run:?}");
}

#[test]
fn a_killed_link_leaves_no_link_worker_running() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("a.cu"),
        "__device__ int a() { return 1; }\n",
    )
    .unwrap();
    std::fs::write(
        folder.path().join("hang.cu"),
        "__device__ int b() { return 2; }\n",
    )
    .unwrap();
    compile(
        folder.path(),
        &[
            "compile", "a.cu", "hang.cu", "--emit", "ltoir", "--rdc", "--arch", "sm_90",
        ],
    );
    kill_and_look(
        folder.path(),
        &["link", "a.ltoir", "hang.ltoir", "--lto", "--arch", "sm_90"],
        "hang.ltoir",
        "__link-worker",
        None,
    );
}

#[test]
fn a_killed_batch_leaves_no_compile_server_or_worker_running() {
    let folder = tempfile::tempdir().unwrap();
    for name in ["a", "b", "hang"] {
        let source = format!("extern \"C\" __global__ void {name}() {{}}\n");
        std::fs::write(folder.path().join(format!("{name}.cu")), source).unwrap();
    }
    kill_and_look(
        folder.path(),
        &["compile", "a.cu", "b.cu", "hang.cu", "--arch", "sm_90"],
        "hang.cu",
        "__compile-worker",
        None,
    );
    // The compile server killed too: its workers are not ended by it, and must die with it.
    kill_and_look(
        folder.path(),
        &["compile", "a.cu", "b.cu", "hang.cu", "--arch", "sm_90"],
        "hang.cu",
        "__compile-worker",
        Some("__compile-server"),
    );
}
