//! Which files a compile reads: NVRTC's include search, reproduced, for the compile cache's key
//! and for [`Program::dependencies`](super::Program::dependencies).
//!
//! NVRTC 13.0 cannot report a compile's dependencies (it rejects `-M`, `-MM`, `-MD`, `-MF` and
//! `--generate-dependencies` as invalid options), so cudyn resolves a program's includes itself,
//! by the rules NVRTC follows (read off its file-system calls, and checked against them by
//! cudyn's tests):
//!
//! - A name that is one of the program's in-memory headers ([`Program::header`](super::Program::header)) is that header,
//!   whoever includes it, quoted or angled, whatever files exist.
//! - An absolute name is that file.
//! - A quoted name (`#include "x.h"`) is looked for first in the folder of the text that
//!   includes it: for the program's source, the folder of the program's
//!   [name](super::Program::name) (`src/kernel.cu`: `src/`; a bare `kernel.cu`: the current folder);
//!   for an in-memory header, the folder of its name, likewise; for a file, its own folder (not
//!   the source's).
//! - Then, quoted or angled, in the `-I` folders in order: the program's own
//!   ([`Program::include`](super::Program::include)), CUDA's, then those given as raw options (`-I`, `--include-path`).
//! - `__has_include(...)` searches as `#include` does. `#include_next` continues the search in
//!   the folders after the one its file was found in: every such folder counts.
//! - `-include` and `--pre-include` name a file of the current folder, else of the `-I` folders.
//!
//! Relative folders and names are relative to the current folder of the compiling process (a
//! compile worker works in its caller's).
//!
//! Conditional compilation is not evaluated: every directive counts, which can only add files.
//! What cudyn cannot know is said, never guessed: a computed include (`#include CONFIG_H`, whose
//! name only the preprocessor knows), a file that exists but cannot be read, or an option that
//! reads or writes files of its own (precompiled headers, timing reports) makes a program's
//! dependencies unknown, and the compile cache then does not answer for it.
//!
//! CUDA's own header folders are not followed: the cache keys them by their installation's
//! identity (folders, CUDA and CCCL versions; see [`crate::cache`]), not by their thousands of
//! files. Whether a name is found in them is decided by that identity too; the names a program
//! looks for past its own folders are keyed with every file of that name in the folders given
//! as raw options, which such a name could otherwise reach.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use crate::cache::key::FieldSink;

/// The files compiling a [`Program`](super::Program) reads besides its source, as NVRTC finds
/// them: see [`Program::dependencies`](super::Program::dependencies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dependencies {
    /// The program's header files, each once, in the order they are first found, named as
    /// NVRTC opens them (relative to the current folder when the folder or name they were found
    /// through is relative). Every `#include_next` candidate counts.
    pub files: Vec<PathBuf>,
    /// Headers found in CUDA's own header folders. What they include in turn is CUDA's and not
    /// listed.
    pub cuda_headers: Vec<PathBuf>,
    /// The in-memory headers ([`Program::header`](super::Program::header)) included.
    pub in_memory: Vec<String>,
    /// Names included, or tested with `__has_include`, that no folder holds.
    pub missing: Vec<String>,
    /// Why the lists may be incomplete, when they may be: the compile cache does not answer for
    /// such a program.
    pub unknown: Option<String>,
}

/// A sink that keeps nothing: a search run for its [`Dependencies`] alone.
pub(crate) struct Discard;

impl FieldSink for Discard {
    fn field(&mut self, _: &[u8]) -> &mut Self {
        self
    }
}

/// What a search knows of CUDA's header folders.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CudaFolders<'a> {
    /// These folders, searched after the program's own.
    Known(&'a [PathBuf]),
    /// Some, not known here: their contents are keyed through the compiler's identity.
    Keyed,
}

/// A program's inputs as the include search reads them.
pub(crate) struct Request<'a> {
    pub(crate) source: &'a str,
    pub(crate) name: &'a str,
    pub(crate) headers: &'a [(String, String)],
    pub(crate) folders: &'a [PathBuf],
    pub(crate) cuda: CudaFolders<'a>,
    pub(crate) options: &'a [String],
}

/// Resolves every include of `request`, writing what the cache key takes of each to `sink`: the
/// directive, the folder it is looked for beside, and where it resolved (the file's path and
/// content hash, an in-memory header, CUDA's folders, nothing).
pub(crate) fn resolve(request: &Request<'_>, sink: &mut impl FieldSink) -> Dependencies {
    let mut search = Search {
        request,
        raw_folders: Vec::new(),
        found: Dependencies::default(),
        pending: VecDeque::new(),
        seen: BTreeSet::new(),
    };
    search.start();
    while let Some((directives, beside)) = search.pending.pop_front() {
        match directives {
            Ok(directives) => {
                for directive in directives {
                    search.follow(directive, &beside, sink);
                }
            }
            Err(computed) => search.unknown(format!(
                "`{computed}` names its file through a macro, which only the preprocessor \
                 expands"
            )),
        }
    }
    search.found
}

/// Why an option makes a compile's result depend on more than its inputs: it reads or writes
/// files of its own. `None` for every other option.
pub(crate) fn uncacheable_option(options: &[String]) -> Option<String> {
    const FILE_OPTIONS: [&str; 10] = [
        "-pch",
        "--pch",
        "--create-pch",
        "--create_pch",
        "--use-pch",
        "--use_pch",
        "--pch-dir",
        "--pch_dir",
        "--time",
        "--fdevice-time-trace",
    ];
    options.iter().find_map(|option| {
        let flag = option.split('=').next().unwrap_or_default();
        FILE_OPTIONS
            .contains(&flag)
            .then(|| format!("the option {option} makes NVRTC read or write files of its own"))
    })
}

/// The directives of a text still to be followed (or the first computed one), with the folder
/// its quoted names are looked for in first.
type Pending = (Result<Vec<Directive>, String>, PathBuf);

struct Search<'r, 'a> {
    request: &'r Request<'a>,
    /// `-I` folders given as raw options, searched after CUDA's.
    raw_folders: Vec<PathBuf>,
    found: Dependencies,
    pending: VecDeque<Pending>,
    /// Each directive followed, with the folder it was looked for beside.
    seen: BTreeSet<(Directive, PathBuf)>,
}

impl Search<'_, '_> {
    /// Queues the source, the in-memory headers and the files options include; reads the
    /// options' folders.
    fn start(&mut self) {
        let request = self.request;
        if let Some(reason) = uncacheable_option(request.options) {
            self.unknown(reason);
        }
        let mut pre_included = Vec::new();
        let mut options = request.options.iter();
        while let Some(option) = options.next() {
            let value = |flags: &[&str]| -> Option<String> {
                flags.iter().find_map(|flag| {
                    let rest = option.strip_prefix(flag)?;
                    if rest.is_empty() {
                        return options.clone().next().cloned();
                    }
                    rest.strip_prefix('=').map(str::to_owned)
                })
            };
            if let Some(folder) = value(&["--include-path"]) {
                self.raw_folders.push(folder.into());
            } else if let Some(file) = value(&["-include", "--pre-include"]) {
                pre_included.push(file);
            } else if let Some(folder) = option.strip_prefix("-I") {
                match folder {
                    "" => self
                        .raw_folders
                        .extend(options.clone().next().map(PathBuf::from)),
                    folder => self.raw_folders.push(folder.into()),
                }
            }
        }
        self.pending
            .push_back((directives_of(request.source), folder_of(request.name)));
        for (name, text) in request.headers {
            self.pending
                .push_back((directives_of(text), folder_of(name)));
        }
        let pre_included = pre_included.into_iter().map(|name| Directive {
            kind: DirectiveKind::Include,
            name,
            quoted: true,
        });
        // Looked for in the current folder first, as quoted names of a bare-named text are.
        self.pending
            .push_back((Ok(pre_included.collect()), PathBuf::new()));
    }

    fn unknown(&mut self, reason: String) {
        self.found.unknown.get_or_insert(reason);
    }

    /// Resolves one directive of a text whose quoted names are looked for in `beside` first.
    fn follow(&mut self, directive: Directive, beside: &Path, sink: &mut impl FieldSink) {
        let beside = if directive.quoted {
            beside.to_owned()
        } else {
            PathBuf::new()
        };
        if !self.seen.insert((directive.clone(), beside.clone())) {
            return;
        }
        sink.field(&[directive.kind as u8, u8::from(directive.quoted)])
            .field(directive.name.as_bytes())
            .field(beside.as_os_str().as_encoded_bytes());
        let in_memory = self
            .request
            .headers
            .iter()
            .any(|(name, _)| *name == directive.name);
        if in_memory {
            sink.field(b"in memory");
            if !self.found.in_memory.contains(&directive.name) {
                self.found.in_memory.push(directive.name.clone());
            }
            if directive.kind != DirectiveKind::IncludeNext {
                return;
            }
        }
        let name = Path::new(&directive.name);
        if name.is_absolute() {
            if !self.first_file(std::iter::once(name.to_owned()), sink) {
                self.missing(&directive.name, sink);
            }
            return;
        }
        let quoted = directive.quoted.then(|| beside.join(name));
        let own = quoted
            .into_iter()
            .chain(self.request.folders.iter().map(|folder| folder.join(name)));
        if directive.kind == DirectiveKind::IncludeNext {
            return self.every_candidate(name, own.collect(), sink);
        }
        if self.first_file(own, sink) {
            return;
        }
        match self.request.cuda {
            CudaFolders::Known(folders) => {
                let in_cuda = folders
                    .iter()
                    .map(|folder| folder.join(name))
                    .find(|path| is_file(path));
                if let Some(path) = in_cuda {
                    sink.field(b"cuda")
                        .field(path.as_os_str().as_encoded_bytes());
                    push_once(&mut self.found.cuda_headers, path);
                    return;
                }
                if !self.first_file(self.raw_candidates(name).into_iter(), sink) {
                    self.missing(&directive.name, sink);
                }
            }
            CudaFolders::Keyed => {
                // Found in CUDA's folders or not, as the compiler's identity says; the files of
                // that name in the raw folders after them could be what NVRTC reads.
                sink.field(b"past the program's folders");
                for path in self.raw_candidates(name) {
                    self.candidate(path, sink);
                }
            }
        }
    }

    /// `#include_next`: every file of the name in the program's folders, CUDA's (when known)
    /// and the raw ones.
    fn every_candidate(&mut self, name: &Path, own: Vec<PathBuf>, sink: &mut impl FieldSink) {
        for path in own {
            self.candidate(path, sink);
        }
        if let CudaFolders::Known(folders) = self.request.cuda {
            for path in folders.iter().map(|folder| folder.join(name)) {
                if is_file(&path) {
                    push_once(&mut self.found.cuda_headers, path);
                }
            }
        }
        for path in self.raw_candidates(name) {
            self.candidate(path, sink);
        }
    }

    /// Where `name` would be in the folders given as raw options.
    fn raw_candidates(&self, name: &Path) -> Vec<PathBuf> {
        self.raw_folders
            .iter()
            .map(|folder| folder.join(name))
            .collect()
    }

    /// Keys `path` whether or not it exists, and follows it when it does.
    fn candidate(&mut self, path: PathBuf, sink: &mut impl FieldSink) {
        if !self.take_file(&path, sink) {
            sink.field(path.as_os_str().as_encoded_bytes()).field(b"");
        }
    }

    /// Takes the first of `paths` that is a file; whether one was.
    fn first_file(
        &mut self,
        mut paths: impl Iterator<Item = PathBuf>,
        sink: &mut impl FieldSink,
    ) -> bool {
        paths.any(|path| self.take_file(&path, sink))
    }

    /// When `path` is a file: keys its path and content, lists it, queues its directives
    /// (their quoted names looked for beside it) and says so.
    fn take_file(&mut self, path: &Path, sink: &mut impl FieldSink) -> bool {
        if !is_file(path) {
            return false;
        }
        let scanned = match scan(path) {
            Ok(scanned) => scanned,
            Err(reason) => {
                self.unknown(reason);
                return true;
            }
        };
        sink.field(path.as_os_str().as_encoded_bytes())
            .field(&scanned.hash);
        if !self.found.files.iter().any(|file| file == path) {
            self.found.files.push(path.to_owned());
            let folder = path.parent().map(Path::to_owned).unwrap_or_default();
            self.pending.push_back((scanned.directives, folder));
        }
        true
    }

    fn missing(&mut self, name: &str, sink: &mut impl FieldSink) {
        sink.field(b"missing");
        if !self.found.missing.iter().any(|missing| missing == name) {
            self.found.missing.push(name.to_owned());
        }
    }
}

/// The folder quoted names of the text named `name` are looked for in: its own, as a relative
/// path (empty, the current folder, for a bare name).
fn folder_of(name: &str) -> PathBuf {
    Path::new(name)
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|metadata| metadata.is_file())
}

fn push_once(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// What a directive does with its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DirectiveKind {
    Include = 1,
    IncludeNext = 2,
    HasInclude = 3,
}

/// One `#include`, `#include_next` or `__has_include`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Directive {
    kind: DirectiveKind,
    name: String,
    quoted: bool,
}

/// Whether `text` may hold an include directive: whether the word `include` appears in it at
/// all, which every line [`directives_of`] reads a directive from holds (`__has_include` too),
/// or a line continuation, which may split the word (`#inc\` then `lude`). Substring searches,
/// which the standard library runs 16 bytes at a time: every compile through the cache asks
/// this of its texts.
pub(crate) fn may_include(text: &str) -> bool {
    text.contains("include") || text.contains("\\\n") || text.contains("\\\r")
}

/// The directives of a text, or the first one whose name is computed (`#include MACRO`), which
/// cudyn cannot resolve. Read as the preprocessor reads a directive: lines joined at a backslash
/// before the line break first, then `#` (or its digraph `%:`), blanks and comments, the
/// directive's word. `__has_include` is read in every directive line (`#if`, `#elif`, `#define`),
/// the only places it may appear.
fn directives_of(text: &str) -> Result<Vec<Directive>, String> {
    let spliced;
    let text = if text.contains("\\\n") || text.contains("\\\r\n") {
        spliced = text.replace("\\\r\n", "").replace("\\\n", "");
        spliced.as_str()
    } else {
        text
    };
    let mut found = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed
            .strip_prefix('#')
            .or_else(|| trimmed.strip_prefix("%:"))
        else {
            continue;
        };
        let rest = skip_blanks(rest);
        let include = [
            ("include_next", DirectiveKind::IncludeNext),
            ("include", DirectiveKind::Include),
        ]
        .into_iter()
        .find_map(|(word, kind)| Some((rest.strip_prefix(word)?, kind)));
        if let Some((after, kind)) = include {
            let (name, quoted) = name_of(after).ok_or_else(|| line.trim().to_owned())?;
            found.push(Directive { kind, name, quoted });
            continue;
        }
        let mut rest = rest;
        while let Some(at) = rest.find("__has_include") {
            let after = &rest[at + "__has_include".len()..];
            let (after, kind) = match after.strip_prefix("_next") {
                Some(after) => (after, DirectiveKind::IncludeNext),
                None => (after, DirectiveKind::HasInclude),
            };
            rest = after;
            // `defined(__has_include)` and `#ifdef __has_include` test for the operator itself.
            let Some(argument) = skip_blanks(after).strip_prefix('(') else {
                continue;
            };
            let (name, quoted) = name_of(argument).ok_or_else(|| line.trim().to_owned())?;
            found.push(Directive { kind, name, quoted });
        }
    }
    Ok(found)
}

/// Whether `text` includes `name` in quotes (`#include "name"`), which NVRTC looks for beside
/// the text first.
pub(crate) fn quotes(text: &str, name: &str) -> bool {
    directives_of(text).is_ok_and(|directives| {
        directives
            .iter()
            .any(|directive| directive.quoted && directive.name == name)
    })
}

/// The `"name"` or `<name>` at the start of `text` (after blanks), and whether it is quoted.
fn name_of(text: &str) -> Option<(String, bool)> {
    let text = skip_blanks(text);
    let (close, quoted) = match text.chars().next() {
        Some('"') => ('"', true),
        Some('<') => ('>', false),
        _ => return None,
    };
    let name = text[1..].split(close).next().unwrap_or_default();
    Some((name.to_owned(), quoted))
}

/// `text` after its leading white space and `/* ... */` comments, which a directive may hold
/// between its words.
fn skip_blanks(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        match text
            .strip_prefix("/*")
            .and_then(|rest| rest.split_once("*/"))
        {
            Some((_, after)) => text = after,
            None => return text,
        }
    }
}

/// What the search needs of a header file: its content's hash and its directives (or the first
/// computed one).
#[derive(Debug, Clone)]
struct Scanned {
    hash: [u8; 32],
    directives: Result<Vec<Directive>, String>,
}

/// A file as it was when scanned: what identifies its content without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    modified: SystemTime,
    changed: (i64, i64),
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        Some(Stamp {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.len(),
            modified: metadata.modified().ok()?,
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        })
    }
}

/// Scanned files by absolute path, valid while their stamps are unchanged.
static SCANNED: LazyLock<Mutex<HashMap<PathBuf, (Stamp, Scanned)>>> = LazyLock::new(Mutex::default);

/// Files modified more recently than this are read again on every compile: their time stamps
/// may not show a change made within the same tick.
const SETTLED: Duration = Duration::from_secs(2);

/// Reads (or recalls) the header file at `path`; why not when it cannot be read.
fn scan(path: &Path) -> Result<Scanned, String> {
    let cannot = |error: std::io::Error| format!("{} cannot be read: {error}", path.display());
    let metadata = std::fs::metadata(path).map_err(cannot)?;
    let stamp = Stamp::of(&metadata);
    // Remembered by absolute path: a relative one names another file in another folder.
    let absolute = std::path::absolute(path).map_err(cannot)?;
    let mut memo = SCANNED.lock().unwrap_or_else(|poison| poison.into_inner());
    if let (Some((remembered, scanned)), Some(stamp)) = (memo.get(&absolute), &stamp) {
        if remembered == stamp {
            return Ok(scanned.clone());
        }
    }
    let bytes = std::fs::read(path).map_err(cannot)?;
    let scanned = Scanned {
        hash: *blake3::hash(&bytes).as_bytes(),
        directives: directives_of(&String::from_utf8_lossy(&bytes)),
    };
    memo.remove(&absolute);
    let settled = stamp.filter(|stamp| {
        SystemTime::now()
            .duration_since(stamp.modified)
            .is_ok_and(|age| age >= SETTLED)
            && stamp.size == bytes.len() as u64
    });
    if let Some(stamp) = settled {
        memo.insert(absolute, (stamp, scanned.clone()));
    }
    Ok(scanned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::key::{Key, KeyHasher};

    fn names(text: &str) -> Vec<(DirectiveKind, String, bool)> {
        directives_of(text)
            .unwrap()
            .into_iter()
            .map(|directive| (directive.kind, directive.name, directive.quoted))
            .collect()
    }

    #[test]
    fn directives_are_read_with_their_kind() {
        use DirectiveKind::{HasInclude, Include, IncludeNext};
        assert_eq!(
            names(
                "#include \"a.h\"\n  #  include <cuda/std/cstdint>\nint x; // #include \"no.h\"\n"
            ),
            [
                (Include, "a.h".into(), true),
                (Include, "cuda/std/cstdint".into(), false)
            ]
        );
        assert_eq!(names("#inc\\\nlude \"a.h\"\nint x;\n")[0].1, "a.h");
        assert_eq!(names("# /* c */ include /* d */ <b.h>\n")[0].1, "b.h");
        assert_eq!(names("%:include \"c.h\"\n")[0].1, "c.h");
        assert_eq!(names("#include<tight.h>\n")[0].1, "tight.h");
        assert_eq!(names("/* #include \"no.h\" */\n#define X\n"), []);
        assert_eq!(
            names("#include_next <n.h>\n#include_next \"m.h\"\n"),
            [
                (IncludeNext, "n.h".into(), false),
                (IncludeNext, "m.h".into(), true)
            ]
        );
        assert_eq!(
            names(
                "#if defined(__has_include) && __has_include(\"a.h\") || __has_include( <b.h> )\n\
                 #elif __has_include_next(<c.h>)\n#define HAS_D __has_include(\"d.h\")\n\
                 #ifdef __has_include\n#endif\nint __has_include_outside_directives;\n"
            ),
            [
                (HasInclude, "a.h".into(), true),
                (HasInclude, "b.h".into(), false),
                (IncludeNext, "c.h".into(), false),
                (HasInclude, "d.h".into(), true)
            ]
        );
        for computed in [
            "#include HEADER\n",
            "#include_next NEXT\n",
            "#if __has_include(HEADER)\n#endif\n",
            "#define H \"h.h\"\n#include H\n",
        ] {
            assert!(directives_of(computed).is_err(), "{computed:?}");
        }
        assert_eq!(
            directives_of("int x;\n  #  include   CONFIG_H // the config\n"),
            Err("#  include   CONFIG_H // the config".to_owned())
        );
    }

    #[test]
    fn a_text_that_may_include_is_never_missed_and_one_that_cannot_skips_the_scan() {
        for text in [
            "#include \"a.h\"\n",
            "  #  include <cuda/std/cstdint>\n",
            "#\u{b}include \"vertical-tab.h\"\n",
            "#include HEADER\n",
            "x\n#include \"last.h\"",
            "#inc\\\nlude \"spliced.h\"\n",
            "#\\\r\ninclude \"spliced-crlf.h\"\n",
            "#/* a comment */include/**/\"commented.h\"\n",
            "%:include <digraph.h>\n",
            "#if __has_include(<probe.h>)\n#endif\n",
            "#include_next <next.h>\n",
        ] {
            assert!(
                directives_of(text).map_or(true, |found| !found.is_empty()),
                "{text:?}"
            );
            assert!(may_include(text), "{text:?}");
        }
        for text in [
            "",
            "incl",
            "inclu\nde",
            "int main() { return 0; }\n#define X 1\n",
            "a trailing backslash \\",
        ] {
            assert_eq!(directives_of(text), Ok(Vec::new()), "{text:?}");
            assert!(!may_include(text), "{text:?}");
        }
    }

    /// A program in `root`, named by its absolute path there.
    struct Tree {
        root: tempfile::TempDir,
    }

    impl Tree {
        fn new(files: &[(&str, &str)]) -> Tree {
            let tree = Tree {
                root: tempfile::tempdir().unwrap(),
            };
            for (path, text) in files {
                tree.write(path, text);
            }
            tree
        }

        fn path(&self, relative: &str) -> PathBuf {
            self.root.path().join(relative)
        }

        fn write(&self, relative: &str, text: &str) {
            let path = self.path(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn resolve(&self, program: &Program<'_>) -> (Dependencies, Key) {
            let name = self.path(program.name);
            let folders: Vec<PathBuf> = program.folders.iter().map(|f| self.path(f)).collect();
            let cuda: Vec<PathBuf> = program.cuda.iter().map(|f| self.path(f)).collect();
            let options: Vec<String> = program
                .options
                .iter()
                .map(|option| option.replace("ROOT", self.root.path().to_str().unwrap()))
                .collect();
            let request = Request {
                source: program.source,
                name: name.to_str().unwrap(),
                headers: &program.headers,
                folders: &folders,
                cuda: CudaFolders::Known(&cuda),
                options: &options,
            };
            let mut hasher = KeyHasher::new("test");
            let found = resolve(&request, &mut hasher);
            (found, hasher.finish())
        }

        /// The files found, relative to the root.
        fn files(&self, program: &Program<'_>) -> Vec<String> {
            let found = self.resolve(program).0;
            assert_eq!(found.unknown, None);
            found
                .files
                .iter()
                .map(|file| {
                    let relative = file.strip_prefix(self.root.path()).unwrap();
                    relative.to_str().unwrap().to_owned()
                })
                .collect()
        }
    }

    /// What a test program is made of; paths relative to its tree's root.
    #[derive(Default, Clone)]
    struct Program<'a> {
        source: &'a str,
        name: &'a str,
        headers: Vec<(String, String)>,
        folders: Vec<&'a str>,
        cuda: Vec<&'a str>,
        options: Vec<&'a str>,
    }

    #[test]
    fn quoted_names_are_found_beside_the_program_name_then_in_its_folders() {
        let tree = Tree::new(&[
            ("src/h.h", "#include \"sub/a.h\"\n"),
            ("src/sub/a.h", "#include \"b.h\"\n#include \"c.h\"\n"),
            // Beside the includer, not beside the source.
            ("src/sub/b.h", ""),
            (
                "src/c.h",
                "not read: c.h is looked for beside sub/a.h, then in the folders",
            ),
            ("inc/c.h", ""),
            ("h.h", "not read: beside the name comes first"),
        ]);
        let program = Program {
            source: "#include \"h.h\"\n",
            name: "src/k.cu",
            folders: vec!["inc"],
            ..Program::default()
        };
        assert_eq!(
            tree.files(&program),
            ["src/h.h", "src/sub/a.h", "src/sub/b.h", "inc/c.h"]
        );
    }

    #[test]
    fn angled_names_skip_the_includers_folder_and_raw_folders_come_after_cudas() {
        let tree = Tree::new(&[
            ("src/v.h", "not read"),
            ("mine/v.h", ""),
            ("cuda/w.h", ""),
            ("raw/w.h", "not read: CUDA's folder comes first"),
            ("raw/x.h", ""),
        ]);
        let program = Program {
            source: "#include <v.h>\n#include <w.h>\n#include <x.h>\n#include <y.h>\n",
            name: "src/k.cu",
            folders: vec!["mine"],
            cuda: vec!["cuda"],
            options: vec!["-I", "ROOT/raw"],
            ..Program::default()
        };
        let (found, _) = tree.resolve(&program);
        assert_eq!(found.files, [tree.path("mine/v.h"), tree.path("raw/x.h")]);
        assert_eq!(found.cuda_headers, [tree.path("cuda/w.h")]);
        assert_eq!(found.missing, ["y.h"]);
        for raw in [
            &["-IROOT/raw"][..],
            &["--include-path=ROOT/raw"],
            &["--include-path", "ROOT/raw"],
        ] {
            let program = Program {
                options: raw.to_vec(),
                ..program.clone()
            };
            assert_eq!(tree.resolve(&program).0.files, found.files, "{raw:?}");
        }
    }

    #[test]
    fn in_memory_headers_come_first_and_find_their_quoted_names_beside_their_own_names() {
        let tree = Tree::new(&[("src/m.h", "not read"), ("lib/y.h", "")]);
        let root = tree.root.path().to_str().unwrap();
        let program = Program {
            source: "#include \"m.h\"\n",
            name: "src/k.cu",
            headers: vec![
                ("m.h".into(), format!("#include \"{root}/lib/x.h\"\n")),
                (format!("{root}/lib/x.h"), "#include \"y.h\"\n".into()),
            ],
            ..Program::default()
        };
        let (found, _) = tree.resolve(&program);
        assert_eq!(found.files, [tree.path("lib/y.h")]);
        assert_eq!(
            found.in_memory,
            ["m.h".to_owned(), format!("{root}/lib/x.h")]
        );
    }

    #[test]
    fn include_next_takes_every_candidate_and_options_pre_include_from_the_current_folder() {
        let tree = Tree::new(&[
            ("a/n.h", "#include_next <n.h>\n"),
            ("b/n.h", ""),
            ("c/n.h", ""),
            ("a/p.h", ""),
        ]);
        let program = Program {
            source: "#include <n.h>\n",
            name: "k.cu",
            folders: vec!["a", "b", "c"],
            options: vec!["-include", "ROOT/a/p.h"],
            ..Program::default()
        };
        assert_eq!(tree.files(&program), ["a/n.h", "a/p.h", "b/n.h", "c/n.h"]);
    }

    #[test]
    fn the_key_follows_every_file_read_and_every_place_that_could_shadow_one() {
        let tree = Tree::new(&[
            (
                "src/a.h",
                "#include \"sub/b.h\"\n#if __has_include(\"opt.h\")\n#endif\n",
            ),
            ("inc/sub/b.h", "int b;\n"),
        ]);
        let program = Program {
            source: "#include \"a.h\"\n#include <cuda_fp16.h>\n",
            name: "src/k.cu",
            folders: vec!["first", "inc"],
            ..Program::default()
        };
        let key = || tree.resolve(&program).1;
        let original = key();
        assert_eq!(key(), original);
        let mut keys = vec![original];
        let mut changed = |change: &dyn Fn()| {
            change();
            let new = key();
            assert!(!keys.contains(&new), "{keys:?}");
            keys.push(new);
        };
        changed(&|| tree.write("inc/sub/b.h", "int b2;\n"));
        changed(&|| tree.write("first/sub/b.h", "int b;\n"));
        changed(&|| tree.write("src/sub/b.h", "int b;\n"));
        changed(&|| tree.write("src/opt.h", ""));
        changed(&|| tree.write("first/cuda_fp16.h", ""));
        changed(&|| std::fs::remove_file(tree.path("src/sub/b.h")).unwrap());
        // Angled names are not looked for beside the includer.
        tree.write("src/cuda_fp16.h", "");
        assert_eq!(key(), keys[6]);
        // Back to an earlier state: the earlier key.
        std::fs::remove_file(tree.path("first/cuda_fp16.h")).unwrap();
        std::fs::remove_file(tree.path("src/opt.h")).unwrap();
        std::fs::remove_file(tree.path("first/sub/b.h")).unwrap();
        assert_eq!(key(), keys[1]);
    }

    #[test]
    fn what_cannot_be_known_is_said() {
        let tree = Tree::new(&[("src/h.h", "#define X 1\n#include X_HEADER\n")]);
        let unknown = |program: &Program<'_>| tree.resolve(program).0.unknown;
        let computed = Program {
            source: "#include \"h.h\"\n",
            name: "src/k.cu",
            ..Program::default()
        };
        assert!(unknown(&computed).unwrap().contains("#include X_HEADER"));
        let plain = Program {
            source: "__global__ void k() {}\n",
            name: "src/k.cu",
            ..Program::default()
        };
        assert_eq!(unknown(&plain), None);
        for option in ["--pch", "--create-pch=a.pch", "--use-pch", "--time=t.csv"] {
            let program = Program {
                options: vec![option],
                ..Program::default()
            };
            assert!(unknown(&program).unwrap().contains(option), "{option}");
        }
    }
}
