//! Cache keys: blake3 over every input that can change a compile's result, and the headers a
//! source includes from disk.
//!
//! NVRTC 13.0 has no option that reports a compile's dependencies (it rejects `-M`, `-MM`,
//! `-MD`, `-MF` and `--generate-dependencies` as invalid options), so cudyn finds them itself: it reads the `#include`
//! lines of the source, of the in-memory headers and, recursively, of every header they include
//! from the program's own folders, and resolves each name the way NVRTC does (in-memory headers,
//! then, for `"quoted"` names, the including file's folder, then the `-I` folders in order). The
//! key covers each name with the file it resolved to and that file's content, and the names that
//! resolved to none of the program's folders: a header changed, added in an earlier folder (so
//! that it shadows the one used before) or removed changes the key. Conditional compilation is
//! ignored, which can only add headers to the key. CUDA's own header folders are keyed by their
//! identity (folders, CUDA version, CCCL version) instead of their thousands of files.
//!
//! File contents are remembered per process by size and modification time, and not for files
//! modified in the last two seconds, whose time stamp may not show a change yet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The version of the key and entry format: entries of another schema are never found.
pub(crate) const SCHEMA: &[u8] = b"cudyn-cache-5";

/// A cache key: the blake3 hash of a compile's inputs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub(crate) [u8; 32]);

impl Key {
    /// The key as 64 hexadecimal digits, the entry's file name.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }

    /// The key of 64 hexadecimal digits.
    pub fn from_hex(text: &str) -> Option<Key> {
        Some(Key(from_hex(text)?.try_into().ok()?))
    }
}

/// `bytes` as lower-case hexadecimal digits, two per byte.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    text
}

/// The bytes of hexadecimal digits (either case); `None` for anything else.
pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let text = text.as_bytes();
    text.len().is_multiple_of(2).then_some(())?;
    text.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({})", self.hex())
    }
}

/// Builds a key from fields, each length-prefixed so that no two lists of fields hash alike.
///
/// The fields are gathered and hashed in blocks: a key is dozens of small fields (lengths,
/// options, names), and blake3 costs about as much per call as per kilobyte for inputs that
/// small. The key is the same as hashing each field as it comes.
#[derive(Debug)]
pub struct KeyHasher {
    /// What is hashed so far, when fields have outgrown [`KeyHasher::BLOCK`] at least once.
    hashed: Option<blake3::Hasher>,
    pending: Vec<u8>,
}

impl KeyHasher {
    /// The bytes gathered before they are hashed (a large source goes straight through).
    const BLOCK: usize = 16 << 10;

    /// A key for results of kind `purpose` ("nvrtc", "nvjitlink").
    pub fn new(purpose: &str) -> Self {
        let mut hasher = KeyHasher {
            hashed: None,
            pending: Vec::with_capacity(1024),
        };
        hasher.field(SCHEMA).field(purpose.as_bytes());
        hasher
    }

    /// Adds one field.
    pub fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.pending
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        if self.pending.len() + bytes.len() <= Self::BLOCK {
            self.pending.extend_from_slice(bytes);
        } else {
            let hasher = self.hashed.get_or_insert_with(blake3::Hasher::new);
            hasher.update(&self.pending).update(bytes);
            self.pending.clear();
        }
        self
    }

    /// Adds a list of text fields, with their count.
    pub fn fields<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        FieldSink::fields(self, items)
    }

    /// The key.
    pub fn finish(&self) -> Key {
        let hash = match &self.hashed {
            None => blake3::hash(&self.pending),
            Some(hashed) => hashed.clone().update(&self.pending).finalize(),
        };
        Key(*hash.as_bytes())
    }
}

/// Where length-prefixed fields go: a [`KeyHasher`], which hashes them, or [`Fields`], which
/// keeps their bytes. The encoding is the same, so one function can write a program's inputs to
/// either.
pub(crate) trait FieldSink {
    /// Adds one field.
    fn field(&mut self, bytes: &[u8]) -> &mut Self;

    /// Adds a list of text fields, with their count.
    fn fields<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        self.field(&(items.len() as u64).to_le_bytes());
        for item in items {
            self.field(item.as_ref().as_bytes());
        }
        self
    }
}

impl FieldSink for KeyHasher {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        KeyHasher::field(self, bytes)
    }
}

/// Fields kept as their bytes, in the encoding [`KeyHasher`] hashes. A program's inputs are
/// kept so: hashed into its key when the key is needed, and compared byte for byte with those an
/// entry was made from where a new process's first lookup would otherwise hash them (its first
/// use of blake3, CPU detection included, on the path of every warm start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields(pub(crate) Vec<u8>);

impl FieldSink for Fields {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.0.extend_from_slice(bytes);
        self
    }
}

impl Fields {
    /// No fields yet, room for `bytes` of them.
    pub(crate) fn with_capacity(bytes: usize) -> Fields {
        Fields(Vec::with_capacity(bytes))
    }

    /// Adds a list of texts with their count, each text given as the pieces it is made of, end
    /// to end: the bytes [`FieldSink::fields`] adds for the texts themselves, without building
    /// them. `each` hands every text's pieces to the function it is given.
    pub(crate) fn texts_of_pieces(
        &mut self,
        each: impl FnOnce(&mut dyn FnMut(&[&str])),
    ) -> &mut Self {
        let count_at = self.0.len() + 8;
        self.field(&0u64.to_le_bytes());
        let mut count = 0u64;
        each(&mut |pieces| {
            let len: usize = pieces.iter().map(|piece| piece.len()).sum();
            self.0.extend_from_slice(&(len as u64).to_le_bytes());
            for piece in pieces {
                self.0.extend_from_slice(piece.as_bytes());
            }
            count += 1;
        });
        self.0[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        self
    }

    /// A short name for these fields, for a file name: 32 hexadecimal digits of their xxh3-128
    /// hash. Not a key: whatever is found under it is compared with the fields themselves, or
    /// checked like the file it stands for.
    pub(crate) fn name(&self) -> String {
        hex(&xxhash_rust::xxh3::xxh3_128(&self.0).to_le_bytes())
    }
}

/// The key of an NVRTC compile: the compiler's `identity` (see `ResolvedCompiler`) and the
/// program's own `inputs`, as [`Fields`] keeps them.
pub(crate) fn nvrtc_key(identity: &Key, inputs: &[u8]) -> Key {
    KeyHasher::new("nvrtc")
        .field(&identity.0)
        .field(inputs)
        .finish()
}

/// Adds a library file's identity (path, size, modification time) to the key.
pub(crate) fn add_library(hasher: &mut KeyHasher, file: &crate::sys::LibraryFile) {
    hasher
        .field(file.path.as_os_str().as_encoded_bytes())
        .field(&file.size.to_le_bytes())
        .field(&nanos(file.modified).to_le_bytes());
}

fn nanos(time: SystemTime) -> u128 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// One `#include` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Include {
    name: String,
    quoted: bool,
}

/// Whether `text` may hold an include directive: whether the word `include` appears in it at
/// all, which every line [`includes_of`] reads an include from holds, or a line continuation,
/// which may split the word (`#inc\` then `lude`). Substring searches, which the standard
/// library runs 16 bytes at a time: every compile through the cache asks this of its texts.
pub(crate) fn may_include(text: &str) -> bool {
    text.contains("include") || text.contains("\\\n") || text.contains("\\\r")
}

/// The includes of a text; `None` when one is computed (`#include MACRO`), which cudyn cannot
/// resolve. Read as the preprocessor reads a directive: lines joined at a backslash before the
/// line break first, then `#` (or its digraph `%:`), blanks and comments, `include`.
fn includes_of(text: &str) -> Includes {
    let spliced;
    let text = if text.contains("\\\n") || text.contains("\\\r\n") {
        spliced = text.replace("\\\r\n", "").replace("\\\n", "");
        spliced.as_str()
    } else {
        text
    };
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix('#').or_else(|| line.strip_prefix("%:")) else {
            continue;
        };
        let Some(rest) = skip_blanks(rest).strip_prefix("include") else {
            continue;
        };
        let rest = skip_blanks(rest);
        let (close, quoted) = match rest.chars().next() {
            Some('"') => ('"', true),
            Some('<') => ('>', false),
            _ => return None,
        };
        let name = rest[1..].split(close).next().unwrap_or_default();
        found.push(Include {
            name: name.to_owned(),
            quoted,
        });
    }
    Some(found)
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

/// The includes of one file: `None` when one of them is computed.
type Includes = Option<Vec<Include>>;

/// What the key needs of a header file: its content's hash and its own includes.
#[derive(Debug, Clone)]
struct Scanned {
    hash: [u8; 32],
    includes: Includes,
}

/// Scanned files by path, valid while their size and modification time are unchanged.
static SCANNED: Mutex<Option<ScanMemo>> = Mutex::new(None);

/// Each file's size and modification time when scanned, and what the scan found.
type ScanMemo = BTreeMap<PathBuf, (u64, SystemTime, Scanned)>;

/// Files modified more recently than this are read again on every compile.
const SETTLED: Duration = Duration::from_secs(2);

fn scan(path: &Path) -> Option<Scanned> {
    let metadata = std::fs::metadata(path).ok()?;
    let modified = metadata.modified().ok()?;
    let mut memo = SCANNED.lock().unwrap_or_else(|poison| poison.into_inner());
    let memo = memo.get_or_insert_with(BTreeMap::new);
    if let Some((size, time, scanned)) = memo.get(path) {
        if *size == metadata.len() && *time == modified {
            return Some(scanned.clone());
        }
    }
    let bytes = std::fs::read(path).ok()?;
    let scanned = Scanned {
        hash: *blake3::hash(&bytes).as_bytes(),
        includes: includes_of(&String::from_utf8_lossy(&bytes)),
    };
    let settled = SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= SETTLED);
    if settled {
        memo.insert(
            path.to_owned(),
            (bytes.len() as u64, modified, scanned.clone()),
        );
    } else {
        memo.remove(path);
    }
    Some(scanned)
}

/// Adds the headers `source` and the in-memory `headers` include from the program's `folders`
/// (see the module documentation). `None` when a computed include makes the program's inputs
/// unknowable while it has folders of its own: such a program is not cached.
pub(crate) fn add_disk_includes(
    hasher: &mut impl FieldSink,
    source: &str,
    headers: &[(String, String)],
    folders: &[PathBuf],
) -> Option<()> {
    // Texts that never say `include` add nothing: found by one pass over their bytes, so that
    // a warm start of such a program runs none of the scan's code for the first time.
    if !may_include(source) && headers.iter().all(|(_, text)| !may_include(text)) {
        return Some(());
    }
    scan_includes(hasher, source, headers, folders)
}

/// [`add_disk_includes`] by reading every text's include lines.
fn scan_includes(
    hasher: &mut impl FieldSink,
    source: &str,
    headers: &[(String, String)],
    folders: &[PathBuf],
) -> Option<()> {
    let in_memory: BTreeSet<&str> = headers.iter().map(|(name, _)| name.as_str()).collect();
    // Each text's includes, with the folder of its file (none for texts in memory).
    let mut pending: Vec<(Includes, Option<PathBuf>)> = vec![(includes_of(source), None)];
    pending.extend(headers.iter().map(|(_, text)| (includes_of(text), None)));
    let mut seen: BTreeSet<(String, Option<PathBuf>)> = BTreeSet::new();
    while let Some((includes, folder)) = pending.pop() {
        let Some(includes) = includes else {
            if folders.is_empty() {
                continue;
            }
            return None;
        };
        for include in includes {
            if in_memory.contains(include.name.as_str()) {
                continue;
            }
            let beside = folder.as_ref().filter(|_| include.quoted);
            if !seen.insert((include.name.clone(), beside.cloned())) {
                continue;
            }
            hasher.field(include.name.as_bytes());
            let resolved = beside
                .into_iter()
                .chain(folders)
                .map(|folder| folder.join(&include.name))
                .find(|path| path.is_file());
            let Some(path) = resolved else {
                // Not the program's: one of CUDA's (keyed by identity) or missing.
                hasher.field(b"");
                continue;
            };
            let scanned = scan(&path)?;
            hasher
                .field(path.as_os_str().as_encoded_bytes())
                .field(&scanned.hash);
            pending.push((scanned.includes, path.parent().map(Path::to_path_buf)));
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_the_hash_of_its_fields_whatever_their_sizes() {
        let small = [b"x".to_vec(), vec![7; 300]];
        let large = [
            vec![1; KeyHasher::BLOCK - 20],
            vec![2; 3 * KeyHasher::BLOCK],
            b"y".to_vec(),
        ];
        for fields in [&small[..], &large[..]] {
            let mut hasher = KeyHasher::new("test");
            let mut expected = blake3::Hasher::new();
            for field in [SCHEMA, b"test"] {
                expected
                    .update(&(field.len() as u64).to_le_bytes())
                    .update(field);
            }
            for field in fields {
                hasher.field(field);
                expected
                    .update(&(field.len() as u64).to_le_bytes())
                    .update(field);
            }
            assert_eq!(hasher.finish(), Key(*expected.finalize().as_bytes()));
            // Finishing leaves the hasher as it was.
            assert_eq!(hasher.finish(), hasher.finish());
        }
    }

    #[test]
    fn include_lines_are_read_with_their_kind() {
        let includes = includes_of(
            "#include \"a.h\"\n  #  include <cuda/std/cstdint>\nint x; // #include \"no.h\"\n",
        )
        .unwrap();
        assert_eq!(
            includes,
            [
                Include {
                    name: "a.h".into(),
                    quoted: true
                },
                Include {
                    name: "cuda/std/cstdint".into(),
                    quoted: false
                }
            ]
        );
        assert!(includes_of("#include HEADER\n").is_none());
        let names = |text: &str| -> Vec<String> {
            includes_of(text)
                .unwrap()
                .into_iter()
                .map(|include| include.name)
                .collect()
        };
        assert_eq!(names("#inc\\\nlude \"a.h\"\nint x;\n"), ["a.h"]);
        assert_eq!(names("# /* c */ include /* d */ <b.h>\n"), ["b.h"]);
        assert_eq!(names("%:include \"c.h\"\n"), ["c.h"]);
        assert_eq!(
            names("/* #include \"no.h\" */\n#define X\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_text_that_may_include_is_never_missed_and_one_that_cannot_skips_the_scan() {
        for text in [
            "#include \"a.h\"\n",
            "  #  include <cuda/std/cstdint>\n",
            "#\u{b}include \"vertical-tab.h\"\n",
            "#\u{a0}include \"no-break-space.h\"\n",
            "#include HEADER\n",
            "x\n#include \"last.h\"",
            "#inc\\\nlude \"spliced.h\"\n",
            "#\\\r\ninclude \"spliced-crlf.h\"\n",
            "#/* a comment */include/**/\"commented.h\"\n",
            "%:include <digraph.h>\n",
        ] {
            assert!(
                includes_of(text).is_none_or(|found| !found.is_empty()),
                "{text:?}"
            );
            assert!(may_include(text), "{text:?}");
        }
        for text in [
            "",
            "i",
            "incl",
            "inclu\nde",
            "int main() { return 0; }\n#define X 1\n",
            "a trailing backslash \\",
            "\\ \n in c lude",
        ] {
            assert_eq!(includes_of(text), Some(Vec::new()), "{text:?}");
            assert!(!may_include(text), "{text:?}");
        }
        // The word, or a splice, wherever it is (a directive or not), the very end included.
        for text in ["ends with include", "a splice at the end \\\r"] {
            assert!(may_include(text), "{text:?}");
        }
        // The key of a program without includes is what the full scan gives.
        let source = "__global__ void k() {}\n";
        let headers = [("h.cuh".to_owned(), "#define N 4\n".to_owned())];
        let folders = [PathBuf::from("/nonexistent")];
        let (mut fast, mut scanned) = (KeyHasher::new("test"), KeyHasher::new("test"));
        add_disk_includes(&mut fast, source, &headers, &folders).unwrap();
        scan_includes(&mut scanned, source, &headers, &folders).unwrap();
        assert_eq!(fast.finish(), scanned.finish());
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let key = KeyHasher::new("test").field(b"x").finish();
        assert_eq!(Key::from_hex(&key.hex()), Some(key));
        assert_eq!(Key::from_hex("zz"), None);
        assert_eq!(Key::from_hex(&key.hex()[2..]), None);
        assert_eq!(hex(&[0, 0x9f, 0xa0]), "009fa0");
        assert_eq!(from_hex("009FA0"), Some(vec![0, 0x9f, 0xa0]));
        assert_eq!(from_hex("0g"), None);
        assert_eq!(from_hex("abc"), None);
    }

    fn key_of(source: &str, folders: &[PathBuf]) -> Option<Key> {
        let mut hasher = KeyHasher::new("test");
        add_disk_includes(&mut hasher, source, &[], folders)?;
        Some(hasher.finish())
    }

    #[test]
    fn a_header_changed_added_in_front_or_removed_changes_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(second.join("sub")).unwrap();
        std::fs::write(second.join("a.h"), "#include \"sub/b.h\"\n").unwrap();
        std::fs::write(second.join("sub/b.h"), "int b;\n").unwrap();
        let folders = [first.clone(), second.clone()];
        let source = "#include \"a.h\"\n#include <cuda_fp16.h>\n";
        let original = key_of(source, &folders).unwrap();
        assert_eq!(key_of(source, &folders), Some(original));

        std::fs::write(second.join("sub/b.h"), "int b2;\n").unwrap();
        let changed = key_of(source, &folders).unwrap();
        assert_ne!(changed, original);

        std::fs::write(first.join("a.h"), "#include \"sub/b.h\"\n").unwrap();
        let shadowed = key_of(source, &folders).unwrap();
        assert_ne!(shadowed, changed);

        std::fs::remove_file(first.join("a.h")).unwrap();
        assert_eq!(key_of(source, &folders), Some(changed));
        std::fs::remove_file(second.join("sub/b.h")).unwrap();
        assert_ne!(key_of(source, &folders), Some(changed));
    }

    #[test]
    fn a_computed_include_is_uncacheable_only_with_folders_of_its_own() {
        assert!(key_of("#include HEADER\n", &[]).is_some());
        assert!(key_of("#include HEADER\n", &[PathBuf::from("/nowhere")]).is_none());
    }
}
