//! Without a usable worker executable a batch compiles on this process's threads and says why.
//! Its own test binary: it changes the process's worker setting. Needs NVRTC (the CUDA wheels),
//! no GPU.

mod worker_programs;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cudyn::compile::{compile_batch, set_workers, BatchRun, WorkerSetting};
use cudyn::workers::PROTOCOL;
use worker_programs::{assert_same_as_here, programs};

fn script(folder: &Path, name: &str, text: &str) -> PathBuf {
    let path = folder.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{text}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Why a batch under `setting` ran in this process; its results must be right all the same.
fn fallback_reason(setting: WorkerSetting) -> String {
    set_workers(setting);
    let batch = programs("fallback", 3);
    let run = compile_batch(&batch);
    assert_same_as_here(&batch[0], &run.results[0]);
    assert!(run.results.iter().all(Result::is_ok));
    match run.run {
        BatchRun::InProcess { programs: 3, why } => why,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_or_mismatched_worker_falls_back_with_the_reason() {
    let folder = tempfile::tempdir().unwrap();
    let older = script(
        folder.path(),
        "older",
        "echo 'cudyn-compile-server 1 0.0.1 1'; exec sleep 30",
    );
    let why = fallback_reason(WorkerSetting::Executable(older));
    assert!(why.contains("it is cudyn 0.0.1"), "{why}");
    assert!(why.contains("cargo install cudyn-cli --version"), "{why}");

    // The same version speaking another protocol (a build of other sources) is refused as well.
    let version = env!("CARGO_PKG_VERSION");
    let other_protocol = script(
        folder.path(),
        "other_protocol",
        &format!(
            "echo 'cudyn-compile-server {} {version} 1'; exec sleep 30",
            PROTOCOL + 1
        ),
    );
    let why = fallback_reason(WorkerSetting::Executable(other_protocol));
    let expected = format!(
        "it is cudyn {version} (worker protocol {}), but this program uses cudyn {version} \
         (protocol {PROTOCOL})",
        PROTOCOL + 1
    );
    assert!(why.contains(&expected), "{why}");

    let other = script(folder.path(), "other", "echo hello");
    let why = fallback_reason(WorkerSetting::Executable(other));
    assert!(why.contains("not as a cudyn compile server"), "{why}");

    let silent = script(folder.path(), "silent", "exit 3");
    let why = fallback_reason(WorkerSetting::Executable(silent.clone()));
    assert!(why.contains("is not a cudyn compile server"), "{why}");
    assert!(why.contains("wrote nothing"), "{why}");
    // The failure is remembered: the next batch does not try again.
    std::fs::remove_file(&silent).unwrap();
    let remembered = programs("remembered", 3);
    match compile_batch(&remembered).run {
        BatchRun::InProcess { why: again, .. } => assert_eq!(again, why),
        other => panic!("{other:?}"),
    }

    let absent = folder.path().join("absent");
    let why = fallback_reason(WorkerSetting::Executable(absent.clone()));
    assert!(
        why.contains("cannot start") && why.contains(&absent.display().to_string()),
        "{why}"
    );

    let why = fallback_reason(WorkerSetting::Off);
    assert!(why.contains("turned off"), "{why}");
}
