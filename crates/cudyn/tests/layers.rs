//! The library's modules import only from their own layer and the layers below it, as the layer
//! table of docs/ARCHITECTURE.md states it (the one place it is written down), and no two of
//! them import each other, directly or around a circle.
//!
//! An import is any `crate::module` path in code (comments and strings aside), `use` lines and
//! paths in expressions alike; `super::` stays inside a module's own tree. A module's tests
//! (its `#[cfg(test)] mod`) may use any layer. The crate's root (`lib.rs`) is the facade over all
//! layers and is not checked. Generated bindings are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first, each with its top-level modules, from docs/ARCHITECTURE.md.
fn layers() -> Vec<(String, Vec<String>)> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ARCHITECTURE.md");
    let text = std::fs::read_to_string(&doc).expect("docs/ARCHITECTURE.md");
    let block = text
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```layers block in docs/ARCHITECTURE.md");
    let mut layers: Vec<(String, Vec<String>)> = block
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(layer, modules)| {
            let modules = modules.split_whitespace().map(str::to_owned).collect();
            (layer.trim().to_owned(), modules)
        })
        .collect();
    // The table lists the top layer first, as a picture of layers is drawn.
    layers.reverse();
    layers
}

/// Every source file of the library but the generated bindings, with its module path
/// (`compile/batch.rs`: `compile::batch`; `compile/mod.rs`: `compile`).
fn sources() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name() != Some("generated".as_ref()) {
                    folders.push(path);
                }
                continue;
            }
            if path.extension() != Some("rs".as_ref()) || path == src.join("lib.rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap().with_extension("");
            let mut segments: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            if segments.last().is_some_and(|last| last == "mod") {
                segments.pop();
            }
            found.push((segments.join("::"), path));
        }
    }
    found
}

/// `text` without its comments, string and character literals, so that what remains is code.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        match (chars[i], at(i + 1)) {
            ('/', '/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ('/', '*') => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            // A raw string, r"..." or r#"..."#, which may hold quotes.
            ('r', '#' | '"') if !at(i.wrapping_sub(1)).is_alphanumeric() => {
                let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body: String = chars[i + 1 + hashes..].iter().collect();
                let len = body[1..]
                    .find(&close)
                    .map_or(body.len(), |end| end + 1 + close.len());
                i += 1 + hashes + body[..len].chars().count();
                code.push_str("\"\"");
                continue;
            }
            ('"', _) => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                code.push_str("\"\"");
            }
            // A character literal ('x', '\n', '\''), not a lifetime ('a).
            ('\'', '\\') => {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            ('\'', _) if at(i + 2) == '\'' => i += 2,
            (c, _) => code.push(c),
        }
        i += 1;
    }
    code
}

/// The paths `code` names through `crate::` (`a::b::X`), grouped imports included
/// (`use crate::{a::X, b::Y}`), each as far as it goes; `super::` paths resolved from `module`,
/// the path of the module `code` is.
fn imports_of(code: &str, module: &str) -> BTreeSet<String> {
    let mut imports = BTreeSet::new();
    let mut starts: Vec<(usize, String)> = code
        .match_indices("crate::")
        .filter(|(at, _)| !code[..*at].ends_with("pub(") && !code[..*at].ends_with("in "))
        .map(|(at, _)| (at + "crate::".len(), String::new()))
        .collect();
    for (at, _) in code.match_indices("super::") {
        // A chain `super::super::` counts once, from its first `super`.
        if code[..at].ends_with("super::") {
            continue;
        }
        let mut base: Vec<&str> = module.split("::").collect();
        let mut end = at;
        while code[end..].starts_with("super::") {
            base.pop();
            end += "super::".len();
        }
        let prefix = base.iter().map(|segment| format!("{segment}::")).collect();
        starts.push((end, prefix));
    }
    for (start, prefix) in starts {
        let rest = &code[start..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => {
                let group = group.split('}').next().unwrap_or_default();
                // Each item up to its own group: `a::X, b::{Y, Z}` names a::X and b.
                let mut depth = 0;
                let mut items = Vec::new();
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            items.push(&group[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                items.push(&group[start..]);
                items
            }
            None => vec![rest],
        };
        for name in names {
            let name: String = name
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let name = name.trim_end_matches(':').to_owned();
            if !name.is_empty() {
                imports.insert(format!("{prefix}{name}"));
            }
        }
    }
    imports
}

#[test]
fn every_module_imports_only_from_its_own_layer_and_below_and_no_circle_exists() {
    let layers = layers();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(index, (_, modules))| modules.iter().map(move |m| (m.as_str(), index)))
        .collect();
    // The table's entry a module path falls under: the longest listed prefix (`compile::batch`
    // may sit in another layer than the rest of `compile`).
    let entry_of = |path: &str| -> Option<String> {
        let segments: Vec<&str> = path.split("::").collect();
        (1..=segments.len())
            .rev()
            .map(|n| segments[..n].join("::"))
            .find(|prefix| layer_of.contains_key(prefix.as_str()))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (file_module, path) in sources() {
        let module = entry_of(&file_module).unwrap_or_else(|| file_module.clone());
        let Some(&own) = layer_of.get(module.as_str()) else {
            problems.push(format!(
                "{}: module `{module}` is in no layer of docs/ARCHITECTURE.md",
                path.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        // A module's tests may use any layer: they are not part of what the module needs.
        let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
        let code = code_of(text);
        for path_named in imports_of(&code, &file_module) {
            // Macros and items of the crate's root (`crate::Error` re-exports) count as the
            // module they name only when that is a module of the table.
            let Some(imported) = entry_of(&path_named) else {
                continue;
            };
            if imported == module {
                continue;
            }
            let theirs = layer_of[imported.as_str()];
            graph
                .entry(module.clone())
                .or_default()
                .insert(imported.clone());
            if theirs > own {
                problems.push(format!(
                    "{}: `{module}` ({}) imports `{imported}` ({}), a layer above it",
                    path.display(),
                    layers[own].0,
                    layers[theirs].0
                ));
            }
        }
    }
    // A circle within a layer: a module reaching itself through the graph.
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((module, trail)) = stack.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if next == start {
                    problems.push(format!("import circle: {} -> {start}", trail.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn imports_are_read_from_code_only() {
    let code = code_of(
        "use crate::{a::X, b::{Y, Z}};\n// crate::comment\nlet s = \"crate::string \\\" q\";\n\
         /* crate::block */ crate::c::f(); pub(crate) fn g<'a>() {}\n\
         let q = '\"'; let e = '\\''; crate::d::h();\n\
         let r = r#\"crate::raw \" still\"#; crate::e::i();\n",
    );
    let found: Vec<String> = imports_of(&code, "m::n").into_iter().collect();
    assert_eq!(found, ["a::X", "b", "c::f", "d::h", "e::i"]);
    let relative = code_of("use super::x::Y;\nuse super::super::z;\npub(super) fn f() {}\n");
    let found: Vec<String> = imports_of(&relative, "m::n::o").into_iter().collect();
    assert_eq!(found, ["m::n::x::Y", "m::z"]);
}
