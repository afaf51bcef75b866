//! `cudyn cache`, run as a user would, on a cache filled by `cudyn compile`. Every run names a
//! temporary cache folder through `CUDYN_CACHE_DIR`, so the user's own cache is never touched.
//! Needs NVRTC (scripts/cuda-wheels, then activate the venv).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

/// A temporary cache folder and a folder of sources, with `cudyn` pointed at the first.
struct Scratch {
    cache: tempfile::TempDir,
    sources: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        if let Err(error) = cudyn::sys::nvrtc() {
            panic!("NVRTC is missing ({error}); run scripts/cuda-wheels and activate its venv");
        }
        Scratch {
            cache: tempfile::tempdir().unwrap(),
            sources: tempfile::tempdir().unwrap(),
        }
    }

    /// `cudyn ARGS...` with this cache, standard input closed (not a terminal).
    fn cudyn(&self, args: &[&str]) -> Output {
        self.cudyn_with(&[], args)
    }

    /// [`Scratch::cudyn`] with the environment variables `vars` set too.
    fn cudyn_with(&self, vars: &[(&str, &str)], args: &[&str]) -> Output {
        common::cudyn()
            .env("CUDYN_CACHE_DIR", self.cache.path())
            .env_remove("CUDYN_CACHE")
            .envs(vars.iter().copied())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `cudyn cache ARGS... --json`, required to succeed, parsed.
    fn json(&self, args: &[&str]) -> Value {
        let mut command = vec!["cache"];
        command.extend_from_slice(args);
        command.push("--json");
        let run = self.cudyn(&command);
        assert!(run.status.success(), "{command:?}: {run:?}");
        serde_json::from_slice(&run.stdout).unwrap_or_else(|error| {
            panic!(
                "{command:?} printed no JSON ({error}):\n{}",
                String::from_utf8_lossy(&run.stdout)
            )
        })
    }

    /// Compiles a kernel named `kernel` with `cudyn compile` for sm_90, which stores it in the
    /// cache; returns the cubin's size.
    fn compile(&self, kernel: &str) -> u64 {
        let run = self.run_compile(kernel);
        assert!(run.status.success(), "{run:?}");
        let cubin = self.sources.path().join(format!("{kernel}.cubin"));
        std::fs::metadata(cubin).unwrap().len()
    }

    /// Writes the source of a kernel named `kernel`, `KERNEL.cu`; returns its path.
    fn write_source(&self, kernel: &str) -> String {
        let source = self.sources.path().join(format!("{kernel}.cu"));
        std::fs::write(
            &source,
            format!("extern \"C\" __global__ void {kernel}(float *p) {{ p[0] *= 2.0f; }}\n"),
        )
        .unwrap();
        source.to_str().unwrap().to_owned()
    }

    /// `cudyn compile` of a kernel named `kernel` (its source written first) to `KERNEL.cubin`
    /// for sm_90.
    fn run_compile(&self, kernel: &str) -> Output {
        let source = PathBuf::from(self.write_source(kernel));
        let cubin = source.with_extension("cubin");
        self.cudyn(&[
            "compile",
            source.to_str().unwrap(),
            "--arch",
            "sm_90",
            "-o",
            cubin.to_str().unwrap(),
        ])
    }
}

fn entries(list: &Value) -> &Vec<Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("cache list --json prints an array: {list}"))
}

/// Every file under `folder`, at any depth.
fn files_under(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_folder_a_compile_makes_is_private_and_an_unsafe_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let set_mode =
        |path: &Path, mode| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));

    // The folder named, missing, is made private by the first compile, and so is what it holds.
    let scratch = Scratch::new();
    let folder = scratch.cache.path().join("made/here");
    let vars = [("CUDYN_CACHE_DIR", folder.to_str().unwrap())];
    let compiled = scratch.cudyn_with(
        &vars,
        &["compile", &scratch.write_source("scale"), "--arch", "sm_90"],
    );
    assert!(compiled.status.success(), "{compiled:?}");
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&folder.join("compilers")), 0o700);
    let listed = scratch.cudyn_with(&vars, &["cache", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(entries(&listed).len(), 1);

    // A folder others may write to, or a link in its place (which could lead to one), is
    // refused, and the compile goes on without the cache, saying so.
    let refused = |reason: &str| {
        let run = scratch.cudyn_with(
            &vars,
            &["compile", &scratch.write_source("scale"), "--arch", "sm_90"],
        );
        assert!(run.status.success(), "{run:?}");
        let warning = String::from_utf8_lossy(&run.stderr);
        assert!(
            warning.contains("compiling without a cache") && warning.contains(reason),
            "{warning}"
        );
    };
    set_mode(&folder, 0o777).unwrap();
    refused(&format!(
        "writable by group or others (mode 777), who could plant code in it: `chmod 700 {}`",
        folder.display()
    ));
    set_mode(&folder, 0o700).unwrap();
    let moved = scratch.cache.path().join("elsewhere");
    std::fs::rename(&folder, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &folder).unwrap();
    refused("symbolic link");
    std::fs::remove_file(&folder).unwrap();
    std::fs::write(&folder, "a file").unwrap();
    refused("it is not a folder");
    let run = scratch.cudyn_with(&vars, &["cache", "list"]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let text = String::from_utf8_lossy(&run.stderr);
    assert!(
        text.contains("move it away, or point CUDYN_CACHE_DIR at another folder")
            && !text.contains("chmod"),
        "{text}"
    );
    std::fs::remove_file(&folder).unwrap();
    std::fs::rename(&moved, &folder).unwrap();
    let listed = scratch.cudyn_with(&vars, &["cache", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(entries(&listed).len(), 1);
}

#[test]
fn the_size_cap_reads_suffixes_and_a_bad_one_is_said() {
    let scratch = Scratch::new();
    let stats = |value: &str| {
        scratch.cudyn_with(
            &[("CUDYN_CACHE_MAX_BYTES", value)],
            &["cache", "stats", "--json"],
        )
    };
    let cap = |run: &Output| {
        assert!(run.status.success(), "{run:?}");
        let json: Value = serde_json::from_slice(&run.stdout).unwrap();
        json["stats"]["max_bytes"].as_u64().unwrap()
    };
    let run = stats("200M");
    assert_eq!(cap(&run), 200 << 20);
    assert!(run.stderr.is_empty(), "{run:?}");
    let run = stats("lots");
    assert_eq!(cap(&run), 1 << 30);
    let warning = String::from_utf8_lossy(&run.stderr);
    assert!(
        warning.contains("CUDYN_CACHE_MAX_BYTES") && warning.contains("`lots` is not a size"),
        "{warning}"
    );
}

#[test]
fn path_is_the_folder_named_by_the_environment() {
    let scratch = Scratch::new();
    let text = scratch.cudyn(&["cache", "path"]);
    assert!(text.status.success(), "{text:?}");
    let printed = PathBuf::from(String::from_utf8(text.stdout).unwrap().trim_end());
    // The folder the variable names is the folder of the entries, as `Cache::open` takes it.
    assert_eq!(printed, scratch.cache.path(), "{printed:?}");
    let json = scratch.json(&["path"]);
    assert_eq!(json["path"].as_str(), printed.to_str(), "{json}");
}

#[test]
fn list_and_stats_show_each_compiled_kernel_once() {
    let scratch = Scratch::new();
    assert_eq!(entries(&scratch.json(&["list"])).len(), 0);
    let empty = scratch.cudyn(&["cache", "list"]);
    assert!(
        String::from_utf8_lossy(&empty.stdout).contains("empty"),
        "{empty:?}"
    );

    let cubin_bytes = scratch.compile("scale");
    scratch.compile("scale"); // the same source again: a hit, no second entry
    scratch.compile("shift");

    let list = scratch.json(&["list"]);
    let listed = entries(&list);
    assert_eq!(listed.len(), 2, "{list}");
    let mut kernels: Vec<&str> = listed
        .iter()
        .map(|entry| entry["kernels"][0].as_str().unwrap())
        .collect();
    kernels.sort_unstable();
    assert_eq!(kernels, ["scale", "shift"], "{list}");
    for entry in listed {
        let key = entry["key"].as_str().unwrap();
        assert!(
            key.len() >= 16 && key.chars().all(|c| c.is_ascii_hexdigit()),
            "{entry}"
        );
        assert_eq!(entry["kind"], "cubin", "{entry}");
        assert!(entry["arch"].as_str().unwrap().contains("90"), "{entry}");
        assert_eq!(entry["kernels"].as_array().unwrap().len(), 1, "{entry}");
        // The entry holds the cubin and its manifest.
        assert!(entry["size"].as_u64().unwrap() >= cubin_bytes, "{entry}");
        assert!(entry["age_seconds"].as_u64().unwrap() < 600, "{entry}");
        let created = entry["created"].as_u64().unwrap();
        assert!(entry["last_used"].as_u64().unwrap() >= created, "{entry}");
    }

    let stats = scratch.json(&["stats"]);
    assert_eq!(stats["stats"]["entries"], 2, "{stats}");
    let listed_bytes: u64 = listed.iter().map(|e| e["size"].as_u64().unwrap()).sum();
    assert_eq!(
        stats["stats"]["bytes"].as_u64(),
        Some(listed_bytes),
        "{stats}"
    );
    assert!(stats["stats"]["max_bytes"].as_u64().unwrap() > listed_bytes);
    for counter in [
        "memory_hits",
        "disk_hits",
        "misses",
        "writes",
        "corrupt",
        "evictions",
        "failed_writes",
    ] {
        assert!(
            stats["stats"][counter].is_u64(),
            "{counter} missing: {stats}"
        );
    }

    let table = scratch.cudyn(&["cache", "list"]);
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.starts_with("KEY "), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        table.contains("sm_90") && table.contains("shift"),
        "{table}"
    );
}

#[test]
fn compile_with_no_cache_stores_nothing() {
    let scratch = Scratch::new();
    let source = scratch.sources.path().join("scale.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void scale(float *p) { *p *= 2; }\n",
    )
    .unwrap();
    let cubin = source.with_extension("cubin");
    let (source, cubin) = (source.to_str().unwrap(), cubin.to_str().unwrap());
    let run = scratch.cudyn(&[
        "compile",
        source,
        "--arch",
        "sm_90",
        "--no-cache",
        "-o",
        cubin,
    ]);
    assert!(run.status.success(), "{run:?}");
    assert!(std::fs::metadata(cubin).unwrap().len() > 0);
    assert_eq!(entries(&scratch.json(&["list"])).len(), 0);
    let cached = scratch.cudyn(&["compile", source, "--arch", "sm_90", "-o", cubin]);
    assert!(cached.status.success(), "{cached:?}");
    assert_eq!(entries(&scratch.json(&["list"])).len(), 1);
}

#[test]
fn verify_removes_damaged_and_outdated_entries_and_says_so() {
    let scratch = Scratch::new();
    scratch.compile("scale");
    let clean = scratch.json(&["verify"]);
    assert_eq!(clean["checked"], 1, "{clean}");
    assert_eq!(clean["removed"], serde_json::json!([]), "{clean}");

    let list = scratch.json(&["list"]);
    let key = entries(&list)[0]["key"].as_str().unwrap().to_owned();
    let folder = scratch.json(&["path"])["path"].as_str().unwrap().to_owned();
    let entry_file = files_under(Path::new(&folder))
        .into_iter()
        .find(|file| {
            let relative = file.strip_prefix(&folder).unwrap().to_string_lossy();
            relative.replace('/', "").contains(&key)
        })
        .unwrap_or_else(|| panic!("no file of entry {key} under {folder}"));
    let bytes = std::fs::read(&entry_file).unwrap();
    std::fs::write(&entry_file, &bytes[..bytes.len() / 2]).unwrap();

    let run = scratch.cudyn(&["cache", "verify", "--json"]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["removed"], serde_json::json!([key]), "{report}");
    assert_eq!(report["outdated"], serde_json::json!([]), "{report}");
    assert_eq!(entries(&scratch.json(&["list"])).len(), 0);

    // An entry of an older cudyn's format is removed too, and is no failure.
    scratch.compile("scale");
    let mut older = std::fs::read(&entry_file).unwrap();
    assert!(older.starts_with(b"CUDYNKC"), "the entry's magic moved");
    older[7] = b'1';
    std::fs::write(&entry_file, &older).unwrap();
    let run = scratch.cudyn(&["cache", "verify"]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        text.starts_with("checked 1 entry: removed 0 damaged and 1 of an older cudyn's format\n"),
        "{text}"
    );
    assert!(text.contains(&format!("{key} (older format)")), "{text}");
    assert!(!entry_file.exists());
}

#[test]
fn prune_evicts_down_to_the_size_given() {
    let scratch = Scratch::new();
    scratch.compile("scale");
    scratch.compile("shift");
    let before = scratch.json(&["stats"])["stats"]["bytes"].as_u64().unwrap();

    let kept = scratch.json(&["prune", "--max-bytes", &before.to_string()]);
    assert_eq!(kept["removed"], 0, "{kept}");
    assert_eq!(kept["remaining_bytes"].as_u64(), Some(before), "{kept}");

    let pruned = scratch.json(&["prune", "--max-bytes", &(before - 1).to_string()]);
    assert_eq!(pruned["removed"], 1, "{pruned}");
    let remaining = pruned["remaining_bytes"].as_u64().unwrap();
    assert!(remaining < before, "{pruned}");
    assert_eq!(pruned["freed_bytes"].as_u64(), Some(before - remaining));
    assert_eq!(entries(&scratch.json(&["list"])).len(), 1);

    let all = scratch.json(&["prune", "--max-bytes", "0K"]);
    assert_eq!(all["remaining_bytes"], 0, "{all}");
    assert_eq!(entries(&scratch.json(&["list"])).len(), 0);
}

#[test]
fn clear_needs_yes_where_it_cannot_ask() {
    let scratch = Scratch::new();
    scratch.compile("scale");
    let refused = scratch.cudyn(&["cache", "clear"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("error: cudyn cache clear: pass --yes"),
        "{stderr}"
    );
    assert_eq!(entries(&scratch.json(&["list"])).len(), 1);

    let cleared = scratch.json(&["clear", "--yes"]);
    assert_eq!(cleared["removed"], 1, "{cleared}");
    assert_eq!(cleared["not_removed"], serde_json::json!([]), "{cleared}");
    assert_eq!(cleared["remaining_bytes"], 0, "{cleared}");
    assert_eq!(entries(&scratch.json(&["list"])).len(), 0);
}

#[test]
fn bad_input_is_a_usage_error_and_a_disabled_cache_a_failure() {
    let scratch = Scratch::new();
    for args in [
        &["cache", "prune", "--max-bytes", "lots"][..],
        &["cache", "prune", "--max-bytes", "-5"],
        &["cache", "frobnicate"],
        &["cache"],
        &["cache", "list", "--yes"],
    ] {
        let run = scratch.cudyn(args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
    }

    let off = common::cudyn()
        .args(["cache", "stats"])
        .env("CUDYN_CACHE_DIR", scratch.cache.path())
        .env("CUDYN_CACHE", "off")
        .output()
        .unwrap();
    assert_eq!(off.status.code(), Some(1), "{off:?}");
    let stderr = String::from_utf8_lossy(&off.stderr);
    assert!(stderr.starts_with("error: cudyn cache stats: "), "{stderr}");
    assert!(stderr.contains("CUDYN_CACHE=off"), "{stderr}");
}

#[test]
fn help_ends_with_exit_status_and_examples() {
    for subcommand in ["", "path", "stats", "list", "verify", "prune", "clear"] {
        let run = common::cudyn()
            .args(
                ["cache", subcommand, "--help"]
                    .iter()
                    .filter(|a| !a.is_empty()),
            )
            .output()
            .unwrap();
        assert!(run.status.success(), "{subcommand}: {run:?}");
        let help = String::from_utf8(run.stdout).unwrap();
        let exit_status = help.find("\nExit status:\n").expect(&help);
        let examples = help.rfind("\nExamples:\n").expect(&help);
        assert!(exit_status < examples, "{help}");
        let lines: Vec<&str> = help[examples..].lines().skip(2).collect();
        assert!(lines.len() >= 6, "{help}");
        assert!(
            lines
                .iter()
                .all(|l| l.trim_start().starts_with("cudyn cache ")),
            "{help}"
        );
    }
}
