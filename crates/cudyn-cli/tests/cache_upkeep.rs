//! `cudyn cache` saying what happened: entries it could not remove (a folder its user may not
//! write: run as an unprivileged user, dropping root's privileges where the tests run as root),
//! the folder the variable names and the layout of cudyn 0.1, a cache turned off or refused,
//! and the words of its reports. Needs NVRTC (scripts/cuda-wheels, then activate the venv).

mod common;
mod hostile;

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hostile::{assert_no_panic, stderr, Fixture};
use serde_json::Value;

/// The user and group the permission cases run as: this process's own, or, when it is root
/// (whom no permission stops), `nobody`'s.
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = CString::new("nobody").unwrap();
    // SAFETY: a valid NUL-terminated name; the record returned is read at once, before any other
    // call that could reuse it.
    let record = unsafe { libc::getpwnam(name.as_ptr()) };
    if record.is_null() {
        return Some((65534, 65534));
    }
    // SAFETY: getpwnam returned a valid record.
    Some(unsafe { ((*record).pw_uid, (*record).pw_gid) })
}

/// A scratch folder the unprivileged user owns, holding a copy of `cudyn` (which a build folder
/// of root's may not let others run) and the cache folder `cache`.
struct Unprivileged {
    folder: tempfile::TempDir,
    user: Option<(u32, u32)>,
}

impl Unprivileged {
    fn new() -> Unprivileged {
        let folder = tempfile::tempdir().unwrap();
        std::fs::copy(common::cudyn_binary(), folder.path().join("cudyn")).unwrap();
        Unprivileged {
            folder,
            user: unprivileged(),
        }
    }

    fn cache(&self) -> PathBuf {
        self.folder.path().join("cache")
    }

    /// Hands every file of the folder to the unprivileged user.
    fn hand_over(&self) {
        let Some((uid, gid)) = self.user else {
            return;
        };
        for path in walk(self.folder.path()) {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).unwrap();
        }
    }

    /// `cudyn ARGS...` as the unprivileged user, on the cache folder.
    fn cudyn(&self, args: &[&str]) -> Output {
        let mut command = Command::new(self.folder.path().join("cudyn"));
        command
            .args(args)
            .env("CUDYN_CACHE_DIR", self.cache())
            .env("HOME", self.folder.path())
            .env_remove("CUDYN_CACHE")
            .stdin(Stdio::null());
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        let output = command.output().unwrap();
        assert_no_panic(&output, &format!("{args:?}"));
        output
    }
}

/// `root` and every file and folder under it.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut paths = vec![root.to_owned()];
    if root.is_dir() && !root.is_symlink() {
        for entry in std::fs::read_dir(root).unwrap() {
            paths.extend(walk(&entry.unwrap().path()));
        }
    }
    paths
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("no JSON ({error}): {output:?}"))
}

/// Fills the cache folder of `scratch` with the entries of two compiles, made by this process's
/// user through `fixture`'s `cudyn` (which finds NVRTC), then copied there.
fn fill(scratch: &Unprivileged, fixture: &Fixture) {
    let made = tempfile::tempdir().unwrap();
    for kernel in ["k.cu", "kernel.cu"] {
        let output = fixture
            .cudyn(&["compile", kernel, "--arch", "sm_90", "--rdc", "-o", "out/"])
            .env("CUDYN_CACHE_DIR", made.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    }
    std::fs::create_dir(scratch.cache()).unwrap();
    for entry in std::fs::read_dir(made.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "cudyn")
        {
            std::fs::copy(&path, scratch.cache().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::set_permissions(scratch.cache(), std::fs::Permissions::from_mode(0o700)).unwrap();
    scratch.hand_over();
}

#[test]
fn entries_a_user_cannot_remove_are_named_not_counted_and_fail_the_command() {
    let fixture = Fixture::new();
    let scratch = Unprivileged::new();
    fill(&scratch, &fixture);
    assert_eq!(
        json(&scratch.cudyn(&["cache", "list", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // The folder is the user's and private, but not writable: nothing in it can be removed.
    std::fs::set_permissions(scratch.cache(), std::fs::Permissions::from_mode(0o500)).unwrap();
    for args in [
        &["cache", "clear", "--yes"][..],
        &["cache", "prune", "--max-bytes", "1"],
    ] {
        let output = scratch.cudyn(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.starts_with("removed 0 entries from "),
            "{args:?}: {text}"
        );
        assert!(
            stderr(&output).contains("could not remove 2 entries of")
                && stderr(&output).contains("Permission denied"),
            "{args:?}: {output:?}"
        );
        let report = json(&scratch.cudyn(&[args, &["--json"]].concat()));
        assert_eq!(report["removed"], 0, "{report}");
        assert_eq!(
            report["not_removed"].as_array().unwrap().len(),
            2,
            "{report}"
        );
        assert!(report["not_removed"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("Permission denied"));
        let listed = json(&scratch.cudyn(&["cache", "list", "--json"]));
        assert_eq!(
            listed.as_array().unwrap().len(),
            2,
            "{args:?} removed an entry"
        );
    }
    // A damaged entry that cannot be removed is named as such by verify.
    std::fs::set_permissions(scratch.cache(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let entry = std::fs::read_dir(scratch.cache())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.extension()
                .is_some_and(|extension| extension == "cudyn")
        })
        .unwrap();
    let bytes = std::fs::read(&entry).unwrap();
    std::fs::write(&entry, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::set_permissions(scratch.cache(), std::fs::Permissions::from_mode(0o500)).unwrap();
    let verified = scratch.cudyn(&["cache", "verify", "--json"]);
    assert_eq!(verified.status.code(), Some(1), "{verified:?}");
    let report = json(&verified);
    assert_eq!(report["removed"], serde_json::json!([]), "{report}");
    assert_eq!(
        report["not_removed"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert!(entry.exists());
    std::fs::set_permissions(scratch.cache(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // Once it may, it removes them all, and counts them in words.
    let cleared = scratch.cudyn(&["cache", "clear", "--yes"]);
    assert!(cleared.status.success(), "{cleared:?}");
    assert!(String::from_utf8_lossy(&cleared.stdout).starts_with("removed 2 entries from"));
}

#[test]
fn the_variable_names_the_folder_of_the_entries_and_the_earlier_layout_is_adopted() {
    let fixture = Fixture::new();
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("cache");
    let with = |args: &[&str]| {
        let output = fixture
            .cudyn(args)
            .env("CUDYN_CACHE_DIR", &cache)
            .output()
            .unwrap();
        assert_no_panic(&output, &format!("{args:?}"));
        output
    };
    // `path` names it without making it.
    let path = with(&["cache", "path"]);
    assert_eq!(
        String::from_utf8_lossy(&path.stdout).trim_end(),
        cache.to_str().unwrap()
    );
    assert!(!cache.exists(), "cache path made the folder");
    let compiled = with(&["compile", "k.cu", "--arch", "sm_90", "-o", "k1.cubin"]);
    assert!(compiled.status.success(), "{compiled:?}");
    let entry_files = |folder: &Path| -> usize {
        std::fs::read_dir(folder)
            .map(|read| {
                read.filter(|entry| {
                    entry
                        .as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|e| e == "cudyn")
                })
                .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(
        entry_files(&cache),
        1,
        "the entry is in the folder named, not below it"
    );
    assert!(!cache.join("kernels").exists());
    // The library opens the same folder as the same cache.
    let opened = cudyn::Cache::open(&cache).unwrap();
    assert_eq!(opened.entries().unwrap().len(), 1);

    // cudyn 0.1 kept its entries in `kernels` below the folder named: they are taken up.
    let earlier = tempfile::tempdir().unwrap();
    std::fs::set_permissions(earlier.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::rename(&cache, earlier.path().join("kernels")).unwrap();
    let listed = fixture
        .cudyn(&["cache", "list", "--json"])
        .env("CUDYN_CACHE_DIR", earlier.path())
        .output()
        .unwrap();
    assert_eq!(json(&listed).as_array().unwrap().len(), 1, "{listed:?}");
    assert_eq!(entry_files(earlier.path()), 1);
    assert!(!earlier.path().join("kernels").exists());
}

#[test]
fn a_cache_turned_off_or_refused_says_why_and_makes_nothing() {
    let fixture = Fixture::new();
    let run = |vars: &[(&str, &str)], args: &[&str]| {
        let output = fixture
            .cudyn(args)
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        assert_no_panic(&output, &format!("{vars:?} {args:?}"));
        output
    };
    for args in [
        &["cache", "stats"][..],
        &["cache", "path"],
        &["cache", "list", "--json"],
    ] {
        let off = run(&[("CUDYN_CACHE", "off")], args);
        assert_eq!(off.status.code(), Some(1), "{off:?}");
        assert!(
            stderr(&off).contains("there is no compile cache: CUDYN_CACHE=off turns it off; unset CUDYN_CACHE to use it")
                && !stderr(&off).contains("warning above"),
            "{off:?}"
        );
        assert!(off.stdout.is_empty());
    }
    let bogus = run(&[("CUDYN_CACHE", "bogus")], &["cache", "stats"]);
    assert!(bogus.status.success(), "{bogus:?}");
    assert_eq!(
        stderr(&bogus)
            .matches("CUDYN_CACHE=bogus is neither on nor off")
            .count(),
        1,
        "{bogus:?}"
    );
    for relative in ["relative/dir", "./here", "cache"] {
        for args in [&["cache", "path"][..], &["cache", "list"]] {
            let refused = run(&[("CUDYN_CACHE_DIR", relative)], args);
            assert_eq!(refused.status.code(), Some(1), "{relative}: {refused:?}");
            assert!(
                stderr(&refused).contains("CUDYN_CACHE_DIR is a relative path"),
                "{refused:?}"
            );
        }
        let compiled = run(
            &[("CUDYN_CACHE_DIR", relative)],
            &["compile", "k.cu", "--arch", "sm_90", "-o", "rel.cubin"],
        );
        assert!(compiled.status.success(), "{compiled:?}");
        assert!(
            stderr(&compiled).contains("compiling without a cache"),
            "{compiled:?}"
        );
    }
    for made in ["relative", "here", "cache"] {
        assert!(!fixture.path(made).exists(), "{made} was made");
    }
}

#[test]
fn reports_count_in_words_and_name_ptx_by_its_virtual_architecture() {
    let fixture = Fixture::new();
    let listed = fixture.output(&["cache", "list", "--json"]);
    let list = json(&listed);
    let archs: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["arch"].as_str().unwrap())
        .collect();
    assert!(
        archs.contains(&"compute_90") && archs.contains(&"sm_90"),
        "{archs:?}"
    );
    let table = String::from_utf8_lossy(&fixture.output(&["cache", "list"]).stdout).into_owned();
    assert!(
        table
            .lines()
            .any(|line| line.contains(" ptx ") && line.contains("compute_90")),
        "{table}"
    );
    let verified =
        String::from_utf8_lossy(&fixture.output(&["cache", "verify"]).stdout).into_owned();
    assert!(verified.ends_with("entries: all intact\n"), "{verified}");
    let pruned = fixture.output(&["cache", "prune", "--max-bytes", "0"]);
    let text = String::from_utf8_lossy(&pruned.stdout);
    assert!(
        text.starts_with(&format!("removed {} entries from ", archs.len())),
        "{text}"
    );
    let again = fixture.output(&["cache", "clear", "--yes"]);
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("removed 0 entries from"));
}

#[test]
fn answering_no_removes_nothing_and_is_no_error() {
    // `script` gives `cudyn` a terminal to ask on, and the answer on it.
    let fixture = Fixture::new();
    let command = format!("{} cache clear", common::cudyn_binary().display());
    for (answer, removed) in [("n", false), ("", false), ("y", true)] {
        let mut child = fixture
            .cudyn::<&str>(&[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn_script(&command);
        let mut input = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut input, format!("{answer}\n").as_bytes()).unwrap();
        drop(input);
        let output = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{answer:?}: {text}");
        assert!(!text.contains("error"), "{answer:?}: {text}");
        assert!(text.contains("? [y/N]"), "{answer:?}: {text}");
        if removed {
            assert!(text.contains("removed 4 entries from"), "{text}");
        } else {
            assert!(text.contains("nothing removed"), "{answer:?}: {text}");
        }
    }
}

/// Runs a shell command line under `script`, which gives it a terminal.
trait SpawnScript {
    fn spawn_script(&mut self, command: &str) -> std::process::Child;
}

impl SpawnScript for Command {
    fn spawn_script(&mut self, command: &str) -> std::process::Child {
        let mut script = Command::new("script");
        script
            .args(["-qec", command, "/dev/null"])
            .current_dir(self.get_current_dir().unwrap())
            .envs(
                self.get_envs()
                    .filter_map(|(name, value)| Some((name, value?))),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        script
            .spawn()
            .expect("`script` (util-linux) gives the command a terminal")
    }
}
