//! The curve of the compile cache: the time of a disk-cache hit against the entries in the cache.

use std::time::Instant;

use serde_json::{json, Value};

use cudyn::compile::CacheUse;
use cudyn::{Cache, Program};

/// The file extension of the cache's entries.
const EXTENSION: &str = "cudyn";

use crate::{median_us, Run};

/// Hits timed per cache size.
const HITS: usize = 51;

/// Hard links made to one file at most: ext4 allows 65,000 names of one inode, so past this the
/// names are links to a copy of the entry.
const LINKS_PER_FILE: usize = 50_000;

/// A hit (`Cache::open` of the folder, then `Program::compile_in`, a new `Cache` each time so
/// that its memory does not answer), against the entries in the folder: one real entry, the
/// others hard links to it (or, past [`LINKS_PER_FILE`], to copies of it) under keys of no
/// program (files of the cache's kind that take next to no disk space).
pub fn curve(run: &Run) -> Result<Value, String> {
    let sizes: &[usize] = if run.quick {
        &[10, 100, 1000, 10_000]
    } else {
        &[10, 100, 1000, 10_000, 100_000]
    };
    let folder = run.scratch.path().join("cache-curve");
    let program = Program::new(format!(
        "extern \"C\" __global__ void hit(float *x) {{ x[0] = 1.0f; }}\n// bench_curves {}\n",
        run.tag
    ))
    .arch(run.arch);
    let cache = Cache::open(&folder).map_err(|e| e.to_string())?;
    cache.set_max_bytes(u64::MAX);
    program.compile_in(&cache).map_err(|e| e.to_string())?;
    let entries = cache.entries().map_err(|e| e.to_string())?;
    let [entry] = &entries[..] else {
        return Err(format!("the cache holds {} entries, not 1", entries.len()));
    };
    let real = folder.join(format!("{}.{EXTENSION}", entry.key));
    if !real.is_file() {
        return Err(format!("no entry file {}", real.display()));
    }
    let copies = folder.join("copies");
    std::fs::create_dir_all(&copies).map_err(|e| format!("{}: {e}", copies.display()))?;
    let mut filled = 1;
    let mut points = Vec::new();
    for &size in sizes {
        while filled < size {
            let original = match filled / LINKS_PER_FILE {
                0 => real.clone(),
                copy => {
                    let path = copies.join(format!("{copy}"));
                    if !path.exists() {
                        std::fs::copy(&real, &path)
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                    }
                    path
                }
            };
            // A key of no program: the index spread over 64 hex digits.
            let key = format!("{:064x}", filled as u128 * 0x9e37_79b9_7f4a_7c15);
            let link = folder.join(format!("{key}.{EXTENSION}"));
            std::fs::hard_link(&original, &link).map_err(|e| format!("{}: {e}", link.display()))?;
            filled += 1;
        }
        let (mut open, mut hit) = (Vec::new(), Vec::new());
        for round in 0..=HITS {
            let start = Instant::now();
            let cache = Cache::open(&folder).map_err(|e| e.to_string())?;
            let opened = start.elapsed();
            let start = Instant::now();
            let compiled = program.compile_in(&cache).map_err(|e| e.to_string())?;
            let compiled_in = start.elapsed();
            if *compiled.cache_use() != CacheUse::Hit {
                return Err("the compile was not a cache hit".into());
            }
            if round > 0 {
                open.push(opened);
                hit.push(compiled_in);
            }
        }
        points.push(json!({
            "entries": size,
            "open_us": median_us(open),
            "hit_us": median_us(hit),
        }));
    }
    Ok(json!({
        "what": "disk-cache hit (a new Cache::open + Program::compile_in) against the entries in the cache",
        "hits": HITS,
        "points": points,
    }))
}
