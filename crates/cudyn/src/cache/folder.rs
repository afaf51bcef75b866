//! Which folder the process-wide cache uses, and whether it is on: the switch
//! ([`SWITCH_ENV`](super::SWITCH_ENV), [`set_enabled`](super::set_enabled)), the folder
//! ([`set_dir`](super::set_dir), else [`DIR_ENV`](super::DIR_ENV), else the user's cache folder),
//! and the layout of earlier versions adopted.
//!
//! The folder named is the folder of the entries, the one [`Cache::path`](super::Cache::path)
//! gives and [`Cache::open`](super::Cache::open) takes. cudyn 0.1 kept the
//! entries in a `kernels` folder inside the folder named by `CUDYN_CACHE_DIR` or `set_dir`; such a
//! folder is adopted: its contents move up into the folder named, once, the first time a cache
//! is opened there.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{store, DIR_ENV, SWITCH_ENV};
use crate::error::{Error, Result};

/// The folder of the entries under the user's cache folder (`$XDG_CACHE_HOME` or
/// `~/.cache`): `cudyn/kernels`, beside the environment `scripts/cuda-wheels` installs.
const DEFAULT_SUBFOLDER: &str = "cudyn/kernels";

/// The folder [`set_dir`](super::set_dir) chose, if any.
pub(super) static CHOSEN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// What [`SWITCH_ENV`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Switch {
    On,
    Off,
    /// A value that is neither: the cache stays on, with a warning.
    Unknown,
}

/// How `value` of [`SWITCH_ENV`] sets the cache.
pub(super) fn switch(value: Option<&str>) -> Switch {
    let Some(value) = value else {
        return Switch::On;
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "off" | "0" | "false" | "no" => Switch::Off,
        "on" | "1" | "true" | "yes" | "" => Switch::On,
        _ => Switch::Unknown,
    }
}

/// Why there is no process-wide cache after [`set_enabled(false)`](super::set_enabled).
pub(super) fn turned_off_by_call() -> Error {
    Error::CacheUnavailable {
        reason: "cudyn::cache::set_enabled(false) turned it off".into(),
    }
}

/// Fails when [`SWITCH_ENV`] turns the cache off, saying how; warns once of a value that reads
/// as neither on nor off.
pub(super) fn require_switched_on() -> Result<()> {
    let value = std::env::var(SWITCH_ENV).ok();
    match switch(value.as_deref()) {
        Switch::On => Ok(()),
        Switch::Off => Err(Error::CacheUnavailable {
            reason: format!(
                "{SWITCH_ENV}={} turns it off; unset {SWITCH_ENV} to use it",
                value.unwrap_or_default()
            ),
        }),
        Switch::Unknown => {
            static WARNED: AtomicBool = AtomicBool::new(false);
            if !WARNED.swap(true, Ordering::Relaxed) {
                crate::warn::warning!(
                    "cudyn: warning: {SWITCH_ENV}={} is neither on nor off (off, 0, false or no \
                     turn the cache off; on, 1, true, yes or nothing keep it on): the cache \
                     stays on",
                    value.unwrap_or_default()
                );
            }
            Ok(())
        }
    }
}

/// The folder of the process-wide cache's entries, and whether it was named explicitly
/// (`set_dir` or [`DIR_ENV`]) rather than found under the user's cache folder.
pub(super) fn configured() -> Result<(PathBuf, bool)> {
    let chosen = CHOSEN.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(dir) = chosen.as_ref() {
        return Ok((dir.clone(), true));
    }
    let var = |name| std::env::var_os(name).filter(|value| !value.is_empty());
    if let Some(dir) = var(DIR_ENV).map(PathBuf::from) {
        if dir.is_relative() {
            return Err(Error::CacheRefused {
                path: dir,
                reason: format!(
                    "{DIR_ENV} is a relative path, which would put a cache in every folder cudyn \
                     runs in: name an absolute folder in {DIR_ENV}"
                ),
            });
        }
        return Ok((dir, true));
    }
    // A relative XDG_CACHE_HOME is invalid, and ignored, as the XDG specification says.
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|folder| folder.is_absolute())
        .or_else(|| Some(PathBuf::from(var("HOME")?).join(".cache")));
    match cache {
        Some(cache) => Ok((cache.join(DEFAULT_SUBFOLDER), false)),
        None => Err(Error::CacheUnavailable {
            reason: format!(
                "no folder can be named for it: {DIR_ENV}, XDG_CACHE_HOME and HOME are all \
                 unset; set {DIR_ENV} to a folder of your own"
            ),
        }),
    }
}

/// The earlier layout's folder of entries inside `dir`.
const EARLIER: &str = "kernels";

/// Moves the contents of the earlier layout's `kernels` folder inside `dir` (a private folder of
/// this user, as [`store::prepare_folder`] accepts) up into `dir`, and removes it when it is left
/// empty. Nothing that `dir` already holds is replaced; a `kernels` folder that is not this
/// user's private folder is left alone. Concurrent processes may both try: each rename happens
/// once.
pub(super) fn adopt_earlier_layout(dir: &Path) {
    let earlier = dir.join(EARLIER);
    if store::check_folder(&earlier).is_err() {
        return;
    }
    let Ok(children) = std::fs::read_dir(&earlier) else {
        return;
    };
    for child in children.filter_map(|child| child.ok()) {
        let target = dir.join(child.file_name());
        if std::fs::symlink_metadata(&target).is_err() {
            let _ = std::fs::rename(child.path(), target);
        }
    }
    // Fails, as it should, unless the folder is empty now.
    let _ = std::fs::remove_dir(&earlier);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_the_usual_words_and_knows_the_others() {
        for off in ["off", "OFF", "0", "false", "no", " Off "] {
            assert_eq!(switch(Some(off)), Switch::Off, "{off}");
        }
        for on in ["on", "1", "", "true", "YES"] {
            assert_eq!(switch(Some(on)), Switch::On, "{on}");
        }
        assert_eq!(switch(None), Switch::On);
        for unknown in ["bogus", "disabled", "2"] {
            assert_eq!(switch(Some(unknown)), Switch::Unknown, "{unknown}");
        }
    }

    #[test]
    fn an_earlier_layouts_folder_is_adopted_without_replacing_anything() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let earlier = dir.path().join(EARLIER);
        std::fs::create_dir(&earlier).unwrap();
        std::fs::set_permissions(&earlier, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(earlier.join("compilers")).unwrap();
        std::fs::write(earlier.join("a.cudyn"), "old a").unwrap();
        std::fs::write(earlier.join("b.cudyn"), "old b").unwrap();
        std::fs::write(dir.path().join("b.cudyn"), "new b").unwrap();
        adopt_earlier_layout(dir.path());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.cudyn")).unwrap(),
            "old a"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.cudyn")).unwrap(),
            "new b"
        );
        assert!(dir.path().join("compilers").is_dir());
        // What could not move stays where it was, and so does its folder.
        assert_eq!(
            std::fs::read_to_string(earlier.join("b.cudyn")).unwrap(),
            "old b"
        );
        std::fs::remove_file(earlier.join("b.cudyn")).unwrap();
        adopt_earlier_layout(dir.path());
        assert!(!earlier.exists());
        // A folder others may write to is left alone.
        std::fs::create_dir(&earlier).unwrap();
        std::fs::set_permissions(&earlier, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(earlier.join("c.cudyn"), "planted").unwrap();
        adopt_earlier_layout(dir.path());
        assert!(!dir.path().join("c.cudyn").exists());
    }
}
