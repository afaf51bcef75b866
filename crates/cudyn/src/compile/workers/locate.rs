//! Which executable runs the compile server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{WorkerSetting, WORKER_ENV};

/// The executable to start, or why there is none (`Err`). `setting` is the one given to
/// [`super::set_workers`]; `var` reads the environment.
pub(super) fn worker_executable(
    setting: &WorkerSetting,
    var: impl Fn(&str) -> Option<OsString>,
    current_exe: Option<PathBuf>,
) -> Result<PathBuf, String> {
    match setting {
        WorkerSetting::Off => return Err("turned off by cudyn::compile::set_workers".to_owned()),
        WorkerSetting::Executable(path) => return Ok(path.clone()),
        WorkerSetting::Search => {}
    }
    if let Some(value) = var(WORKER_ENV).filter(|value| !value.is_empty()) {
        if ["off", "0", "false"].contains(&value.to_string_lossy().as_ref()) {
            return Err(format!(
                "turned off by {WORKER_ENV}={}",
                value.to_string_lossy()
            ));
        }
        return Ok(PathBuf::from(value));
    }
    let mut searched = Vec::new();
    let beside_exe = current_exe
        .as_deref()
        .and_then(Path::parent)
        .map(|folder| {
            // Cargo puts tests in target/<profile>/deps and examples in .../examples, a folder
            // below the binaries.
            let cargo_layout = folder
                .file_name()
                .is_some_and(|name| name == "deps" || name == "examples");
            match (cargo_layout, folder.parent()) {
                (true, Some(above)) => vec![folder.to_path_buf(), above.to_path_buf()],
                _ => vec![folder.to_path_buf()],
            }
        })
        .unwrap_or_default();
    let on_path = var("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let cargo_bin = var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cargo")))
        .map(|home| home.join("bin"));
    for folder in beside_exe.into_iter().chain(on_path).chain(cargo_bin) {
        let candidate = folder.join("cudyn");
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        searched.push(folder.display().to_string());
    }
    Err(format!(
        "no `cudyn` executable was found (searched {WORKER_ENV}, then {}); install it with \
         `cargo install cudyn-cli` of the same version as the cudyn library, or name it with \
         {WORKER_ENV} or cudyn::compile::set_workers",
        searched.join(", ")
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a Path)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.as_os_str().to_owned())
        }
    }

    fn executable_in(folder: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = folder.join("cudyn");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_setting_then_the_variable_then_the_folders() {
        let root = tempfile::tempdir().unwrap();
        let (beside, on_path) = (root.path().join("beside"), root.path().join("on_path"));
        std::fs::create_dir_all(beside.join("deps")).unwrap();
        std::fs::create_dir_all(&on_path).unwrap();
        let named = PathBuf::from("/opt/cudyn");
        let search = WorkerSetting::Search;
        let exe = Some(beside.join("deps/test-binary"));
        let from_path = executable_in(&on_path);
        assert_eq!(
            worker_executable(&WorkerSetting::Executable(named.clone()), env(&[]), None),
            Ok(named.clone())
        );
        assert_eq!(
            worker_executable(
                &search,
                env(&[(WORKER_ENV, &named), ("PATH", &on_path)]),
                None
            ),
            Ok(named)
        );
        assert_eq!(
            worker_executable(&search, env(&[("PATH", &on_path)]), exe.clone()),
            Ok(from_path)
        );
        let cargo_built = executable_in(&beside);
        assert_eq!(
            worker_executable(&search, env(&[("PATH", &on_path)]), exe),
            Ok(cargo_built)
        );
    }

    #[test]
    fn off_and_not_found_say_why() {
        let off = worker_executable(
            &WorkerSetting::Search,
            env(&[(WORKER_ENV, Path::new("off"))]),
            None,
        );
        assert!(off.unwrap_err().contains("CUDYN_WORKER=off"));
        let empty = tempfile::tempdir().unwrap();
        let missing = worker_executable(
            &WorkerSetting::Search,
            env(&[("PATH", empty.path()), ("CARGO_HOME", empty.path())]),
            None,
        )
        .unwrap_err();
        assert!(missing.contains("cargo install cudyn-cli"), "{missing}");
        assert!(
            missing.contains(&empty.path().display().to_string()),
            "{missing}"
        );
    }
}
