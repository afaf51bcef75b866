//! Which executable runs the compile server: the one named, else `cudyn` beside the running
//! program; never one found on `PATH` (see [the module documentation](super)).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{WorkerSetting, WORKER_ENV};

/// The executable to start, or why there is none (`Err`). `setting` is the one given to
/// [`super::set_workers`]; `var` reads the environment; `current_exe` is the running program.
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
    let folders = current_exe
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
    if let Some(found) = folders
        .iter()
        .map(|folder| folder.join("cudyn"))
        .find(|candidate| is_executable(candidate))
    {
        return Ok(found);
    }
    let searched: Vec<String> = folders
        .iter()
        .map(|folder| folder.display().to_string())
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    Err(format!(
        "no `cudyn` executable beside this program (looked in {}); name one with {WORKER_ENV} \
         or cudyn::compile::set_workers, or put the `cudyn` of cudyn {version} beside the \
         program (`cargo install cudyn-cli --version {version} --root DIR` puts it in DIR/bin)",
        match searched.is_empty() {
            true => "no folder: the running program's path is unknown".to_owned(),
            false => searched.join(", "),
        }
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
    fn the_setting_then_the_variable_then_beside_the_program() {
        let root = tempfile::tempdir().unwrap();
        let (beside, on_path) = (root.path().join("beside"), root.path().join("on_path"));
        std::fs::create_dir_all(beside.join("deps")).unwrap();
        std::fs::create_dir_all(&on_path).unwrap();
        let named = PathBuf::from("/opt/cudyn");
        let search = WorkerSetting::Search;
        let exe = Some(beside.join("deps/test-binary"));
        assert_eq!(
            worker_executable(&WorkerSetting::Executable(named.clone()), env(&[]), None),
            Ok(named.clone())
        );
        assert_eq!(
            worker_executable(
                &search,
                env(&[(WORKER_ENV, &named), ("PATH", &on_path)]),
                exe.clone()
            ),
            Ok(named)
        );
        let cargo_built = executable_in(&beside);
        assert_eq!(
            worker_executable(&search, env(&[("PATH", &on_path)]), exe.clone()),
            Ok(cargo_built.clone())
        );
        let in_deps = executable_in(&beside.join("deps"));
        assert_eq!(
            worker_executable(&search, env(&[]), exe),
            Ok(in_deps),
            "beside the program comes before the folder above"
        );
        assert_eq!(
            worker_executable(&search, env(&[]), Some(beside.join("program"))),
            Ok(cargo_built)
        );
    }

    #[test]
    fn path_and_cargo_home_are_never_searched() {
        let root = tempfile::tempdir().unwrap();
        let (program, on_path, home) = (
            root.path().join("program"),
            root.path().join("on_path"),
            root.path().join("home"),
        );
        for folder in [&program, &on_path, &home.join(".cargo/bin")] {
            std::fs::create_dir_all(folder).unwrap();
        }
        executable_in(&on_path);
        executable_in(&home.join(".cargo/bin"));
        let missing = worker_executable(
            &WorkerSetting::Search,
            env(&[("PATH", &on_path), ("HOME", &home), ("CARGO_HOME", &home)]),
            Some(program.join("app")),
        )
        .unwrap_err();
        assert!(
            missing.starts_with("no `cudyn` executable beside this program"),
            "{missing}"
        );
        assert!(
            missing.contains(&program.display().to_string()),
            "{missing}"
        );
        assert!(missing.contains("CUDYN_WORKER"), "{missing}");
        assert!(
            missing.contains(&format!(
                "cargo install cudyn-cli --version {}",
                env!("CARGO_PKG_VERSION")
            )),
            "{missing}"
        );
    }

    #[test]
    fn off_says_why() {
        for value in ["off", "0", "false"] {
            let off = worker_executable(
                &WorkerSetting::Search,
                env(&[(WORKER_ENV, Path::new(value))]),
                None,
            );
            assert_eq!(off, Err(format!("turned off by CUDYN_WORKER={value}")));
        }
        let off = worker_executable(&WorkerSetting::Off, env(&[]), None).unwrap_err();
        assert!(off.contains("set_workers"), "{off}");
    }
}
