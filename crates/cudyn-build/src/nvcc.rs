//! Finding nvcc, and the CUDA runtime's static library beside it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variables that name nvcc or a toolkit holding it, in the order they are
/// looked at. A build script reruns when one of them changes.
pub const ENVIRONMENT: [&str; 7] = [
    "CUDYN_NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "PATH",
    "CUDYN_WHEELS_VENV",
    "XDG_CACHE_HOME",
    "HOME",
];

/// nvcc, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nvcc {
    /// The nvcc executable.
    pub path: PathBuf,
    /// The rule that found it, e.g. "CUDA_HOME".
    pub found_by: String,
}

impl Nvcc {
    /// The folder of the CUDA runtime's static library (`libcudart_static.a`) of this nvcc's
    /// toolkit: `lib64` (a toolkit) or `lib` (the CUDA wheels), beside nvcc's `bin`.
    pub fn static_runtime_dir(&self) -> Option<PathBuf> {
        let toolkit = self.path.parent()?.parent()?;
        ["lib64", "lib", "targets/x86_64-linux/lib"]
            .into_iter()
            .map(|folder| toolkit.join(folder))
            .find(|folder| folder.join("libcudart_static.a").is_file())
    }
}

/// Where nvcc is looked for, first match wins: `$CUDYN_NVCC` (the executable itself),
/// `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, every folder of `PATH`, `/usr/local/cuda/bin`, and the
/// CUDA wheels' environment `scripts/cuda-wheels` installs (`$CUDYN_WHEELS_VENV`, else
/// `$XDG_CACHE_HOME/cudyn/venv-cu13.0`, else `~/.cache/cudyn/venv-cu13.0`: its
/// `lib/python3.*/site-packages/nvidia/cu13/bin`).
pub fn candidates(env: impl Fn(&str) -> Option<OsString>) -> Vec<(String, PathBuf)> {
    let mut places = Vec::new();
    if let Some(nvcc) = env("CUDYN_NVCC") {
        places.push(("CUDYN_NVCC".to_owned(), PathBuf::from(nvcc)));
    }
    for variable in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env(variable) {
            places.push((variable.to_owned(), Path::new(&home).join("bin/nvcc")));
        }
    }
    if let Some(path) = env("PATH") {
        for folder in std::env::split_paths(&path) {
            places.push(("PATH".to_owned(), folder.join("nvcc")));
        }
    }
    places.push((
        "/usr/local/cuda".to_owned(),
        PathBuf::from("/usr/local/cuda/bin/nvcc"),
    ));
    if let Some(venv) = wheels_venv(&env) {
        places.push((
            format!("cudyn's wheel environment ({})", venv.display()),
            venv.join("lib/python3.*/site-packages/nvidia/cu13/bin/nvcc"),
        ));
    }
    places
}

fn wheels_venv(env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(venv) = env("CUDYN_WHEELS_VENV") {
        return Some(venv.into());
    }
    let cache = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(cache.join("cudyn/venv-cu13.0"))
}

/// The first existing nvcc among `candidates`, or every place looked at.
pub fn find(candidates: Vec<(String, PathBuf)>) -> Result<Nvcc, Vec<String>> {
    let mut searched = Vec::new();
    for (found_by, pattern) in candidates {
        if let Some(path) = existing(&pattern) {
            return Ok(Nvcc { path, found_by });
        }
        searched.push(format!("{found_by}: {}", pattern.display()));
    }
    Err(searched)
}

/// `pattern` if it is a file; a `python3.*` component matches any Python version's folder.
fn existing(pattern: &Path) -> Option<PathBuf> {
    let text = pattern.to_str()?;
    let Some((before, after)) = text.split_once("python3.*") else {
        return pattern.is_file().then(|| pattern.to_path_buf());
    };
    let mut versions: Vec<PathBuf> = std::fs::read_dir(before)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3."))
        .map(|entry| entry.path().join(after.trim_start_matches('/')))
        .filter(|path| path.is_file())
        .collect();
    versions.sort();
    versions.pop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.as_os_str().to_owned()))
            .collect();
        move |key| map.get(key).cloned()
    }

    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"#!/bin/sh\n").unwrap();
    }

    #[test]
    fn cuda_home_comes_before_path_and_the_wheels() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("toolkit");
        let on_path = dir.path().join("elsewhere");
        executable(&home.join("bin/nvcc"));
        executable(&on_path.join("nvcc"));
        let env = env_of(&[("CUDA_HOME", &home), ("PATH", &on_path)]);
        let nvcc = find(candidates(&env)).unwrap();
        assert_eq!(nvcc.path, home.join("bin/nvcc"));
        assert_eq!(nvcc.found_by, "CUDA_HOME");

        let env = env_of(&[("PATH", &on_path)]);
        assert_eq!(find(candidates(&env)).unwrap().path, on_path.join("nvcc"));
    }

    #[test]
    fn the_wheel_environment_is_found_whatever_its_python_version() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let nvcc = venv.join("lib/python3.12/site-packages/nvidia/cu13/bin/nvcc");
        executable(&nvcc);
        std::fs::create_dir_all(venv.join("lib/python3.12/site-packages/nvidia/cu13/lib")).unwrap();
        std::fs::write(
            venv.join("lib/python3.12/site-packages/nvidia/cu13/lib/libcudart_static.a"),
            b"!<arch>\n",
        )
        .unwrap();
        let env = env_of(&[("CUDYN_WHEELS_VENV", &venv)]);
        // A toolkit installed at /usr/local/cuda comes first on a machine that has one.
        let candidates = candidates(&env)
            .into_iter()
            .filter(|(found_by, _)| found_by != "/usr/local/cuda")
            .collect();
        let found = find(candidates).unwrap();
        assert_eq!(found.path, nvcc);
        assert!(found.found_by.starts_with("cudyn's wheel environment"));
        assert_eq!(
            found.static_runtime_dir().unwrap(),
            venv.join("lib/python3.12/site-packages/nvidia/cu13/lib")
        );
    }

    #[test]
    fn a_missing_nvcc_lists_every_place_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_of(&[("CUDA_HOME", dir.path()), ("HOME", dir.path())]);
        let mut places = candidates(&env);
        assert!(places.iter().any(|(by, _)| by == "/usr/local/cuda"));
        // Where a toolkit is installed in /usr/local/cuda it would be found.
        places.retain(|(by, _)| by != "/usr/local/cuda");
        let searched = find(places).unwrap_err();
        let text = searched.join("\n");
        let home = dir.path().display();
        assert!(
            text.contains(&format!("CUDA_HOME: {home}/bin/nvcc")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{home}/.cache/cudyn/venv-cu13.0")),
            "{text}"
        );
    }
}
