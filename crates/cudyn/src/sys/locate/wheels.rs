//! cudyn's wheel environment: the virtual environment `scripts/cuda-wheels` installs the pinned
//! CUDA wheels into, and where it records that it did.
//!
//! The set-up installs into `$CUDYN_WHEELS_VENV`, else `${XDG_CACHE_HOME:-~/.cache}/
//! cudyn/venv-cu13.0`, and writes the environment's absolute path into the record
//! `${XDG_CACHE_HOME:-~/.cache}/cudyn/wheels-venv`. Later, with the variable unset (a new shell,
//! a program started by another), the record still leads to the environment: the bare `cudyn`
//! and any program built on cudyn find the wheels where the set-up put them.

use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The environment variable naming cudyn's wheel environment, the virtual environment into which
/// `scripts/cuda-wheels` installs the pinned CUDA wheels.
pub const WHEELS_VENV_ENV: &str = "CUDYN_WHEELS_VENV";
/// The folder of cudyn's wheel environment under the user's cache folder when
/// [`WHEELS_VENV_ENV`] is not set (`scripts/cuda-wheels` uses the same default).
pub const WHEELS_VENV_DEFAULT: &str = "cudyn/venv-cu13.0";
/// The record `scripts/cuda-wheels` writes under the user's cache folder: one line, the absolute
/// path of the environment it installed into.
pub const WHEELS_RECORD: &str = "cudyn/wheels-venv";

/// The places cudyn's wheel environment may be, in the order they are searched:
/// `$CUDYN_WHEELS_VENV` alone when it is set; else the environment the set-up recorded, then
/// the default under `$XDG_CACHE_HOME` or `$HOME/.cache`.
pub(super) fn cudyn_wheels_venvs(var: &impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let set = |name: &str| {
        var(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(venv) = set(WHEELS_VENV_ENV) {
        return vec![venv];
    }
    let Some(cache) = set("XDG_CACHE_HOME")
        .filter(|folder| folder.is_absolute())
        .or_else(|| Some(set("HOME")?.join(".cache")))
    else {
        return Vec::new();
    };
    let default = cache.join(WHEELS_VENV_DEFAULT);
    let mut venvs: Vec<PathBuf> = recorded(&cache.join(WHEELS_RECORD)).into_iter().collect();
    if !venvs.contains(&default) {
        venvs.push(default);
    }
    venvs
}

/// The environment a record names: its first line, an absolute path.
fn recorded(record: &Path) -> Option<PathBuf> {
    // A record is one line; anything much longer is not one.
    let mut text = String::new();
    std::fs::File::open(record)
        .ok()?
        .take(64 << 10)
        .read_to_string(&mut text)
        .ok()?;
    let line = text.lines().next()?.trim();
    let venv = PathBuf::from(line);
    venv.is_absolute().then_some(venv)
}

/// How the search order's summary names an environment that is not there, with the fix.
pub(super) fn missing(venv: &Path) -> String {
    format!(
        "{} (not installed: scripts/cuda-wheels installs the pinned wheels there and records \
         where; an environment installed elsewhere is found through {WHEELS_VENV_ENV}=DIR)",
        venv.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::locate::search::fake_env;

    #[test]
    fn the_variable_wins_then_the_record_then_the_default() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let chosen = root.path().join("chosen");
        let default = home.join(".cache").join(WHEELS_VENV_DEFAULT);
        assert_eq!(
            cudyn_wheels_venvs(&fake_env(&[("HOME", &home)])),
            vec![default.clone()]
        );
        let record = home.join(".cache").join(WHEELS_RECORD);
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        std::fs::write(&record, format!("{}\n", chosen.display())).unwrap();
        assert_eq!(
            cudyn_wheels_venvs(&fake_env(&[("HOME", &home)])),
            [chosen.clone(), default.clone()]
        );
        let elsewhere = root.path().join("elsewhere");
        assert_eq!(
            cudyn_wheels_venvs(&fake_env(&[("HOME", &home), (WHEELS_VENV_ENV, &elsewhere)])),
            vec![elsewhere.clone()]
        );
        // A relative or empty record names nothing.
        for text in ["relative/venv\n", "", "\n"] {
            std::fs::write(&record, text).unwrap();
            assert_eq!(
                cudyn_wheels_venvs(&fake_env(&[("HOME", &home)])),
                vec![default.clone()]
            );
        }
        assert!(cudyn_wheels_venvs(&fake_env(&[])).is_empty());
    }

    #[test]
    fn the_set_up_script_installs_and_records_where_the_search_looks() {
        let text = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cuda-wheels"));
        let cache = "${XDG_CACHE_HOME:-$HOME/.cache}";
        for expected in [
            format!("venv=${{{WHEELS_VENV_ENV}:-{cache}/{WHEELS_VENV_DEFAULT}}}"),
            format!("record={cache}/{WHEELS_RECORD}"),
        ] {
            assert!(
                text.lines().any(|line| line.trim() == expected),
                "scripts/cuda-wheels no longer says `{expected}`"
            );
        }
    }
}
