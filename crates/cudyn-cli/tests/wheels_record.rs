//! The first hour: the set-up (`scripts/cuda-wheels`) run with `CUDYN_WHEELS_VENV`, then a new
//! shell without the variable. The bare `cudyn` finds the wheels through the record the set-up
//! left; without a set-up, `cudyn doctor` names the wheel environment it looked for and the
//! variable. Needs the wheel environment (scripts/cuda-wheels, then activate the venv): it is
//! reached through a link, so nothing is installed. Where there is none (a machine with a CUDA
//! toolkit instead), there is nothing to test, and the test says so.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The set-up script, embedded so that the test runs where the sources are not.
const CUDA_WHEELS: &str = include_str!("../../../scripts/cuda-wheels");

/// The wheel environment a finished set-up left (it holds the set-up's stamp): the activated
/// one, else the one NVRTC is found in.
fn installed_venv() -> Option<PathBuf> {
    let nvrtc = cudyn::sys::nvrtc()
        .ok()
        .map(|nvrtc| nvrtc.library.path.clone());
    let activated = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from);
    let mut candidates: Vec<PathBuf> = activated.into_iter().collect();
    candidates.extend(
        nvrtc
            .iter()
            .flat_map(|path| path.ancestors().map(Path::to_path_buf)),
    );
    candidates
        .into_iter()
        .find(|venv| venv.join(".cudyn-pins").is_file())
}

/// A command with a new shell's environment: a scratch HOME, nothing activated, no CUDA
/// variables, PATH holding the system's folders only.
fn fresh(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("CUDYN_CACHE", "off");
    command
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_set_up_elsewhere_is_found_by_a_new_shell_without_the_variable() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // Where the user chose to install: a link to the finished set-up.
    let elsewhere = scratch.path().join("some/dir");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    let Some(installed) = installed_venv() else {
        eprintln!("no wheel environment here (scripts/cuda-wheels makes one): nothing to test");
        return;
    };
    std::os::unix::fs::symlink(installed, &elsewhere).unwrap();

    // Before any set-up: doctor fails, naming where it looked for the wheels and the variable.
    let before = fresh(common::cudyn_binary(), &home)
        .arg("doctor")
        .output()
        .unwrap();
    let report = text(&before);
    assert_eq!(before.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!(
            "cudyn's wheel environment: {} (not installed",
            home.join(".cache/cudyn/venv-cu13.0").display()
        )),
        "{report}"
    );
    assert!(report.contains("CUDYN_WHEELS_VENV=DIR"), "{report}");

    let script = scratch.path().join("cuda-wheels");
    std::fs::write(&script, CUDA_WHEELS).unwrap();
    let set_up = fresh("bash", &home)
        .arg(&script)
        .env("CUDYN_WHEELS_VENV", &elsewhere)
        .output()
        .unwrap();
    assert!(set_up.status.success(), "{}", text(&set_up));
    assert_eq!(
        String::from_utf8_lossy(&set_up.stdout).trim_end(),
        elsewhere.to_str().unwrap()
    );
    let record = std::fs::read_to_string(home.join(".cache/cudyn/wheels-venv")).unwrap();
    assert_eq!(record.trim_end(), elsewhere.to_str().unwrap());

    // A new shell: no variable, nothing activated.
    let after = fresh(common::cudyn_binary(), &home)
        .arg("doctor")
        .output()
        .unwrap();
    let report = text(&after);
    assert_eq!(after.status.code(), Some(0), "{report}");
    assert!(
        report.contains(&format!("{}/lib/python3", elsewhere.display()))
            && report.contains("found by: cudyn's wheel environment"),
        "{report}"
    );
    // And it compiles there.
    let source = scratch.path().join("k.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void k(float *p) { *p = 1; }\n",
    )
    .unwrap();
    let compiled = fresh(common::cudyn_binary(), &home)
        .args(["compile", source.to_str().unwrap(), "--arch", "sm_90"])
        .output()
        .unwrap();
    assert!(compiled.status.success(), "{}", text(&compiled));
}
