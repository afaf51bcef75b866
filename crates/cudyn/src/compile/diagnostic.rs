//! Compile logs made readable: the source lines that a log's messages point at.
//!
//! NVRTC reports `name(line): error: ...` and leaves the reader to open the file; the source is
//! in memory here, so the error shows the lines themselves.

/// The log, followed by every distinct source line it points at, in order of first mention.
///
/// `files` are the sources NVRTC saw, by the name it reports them under (the program's name and
/// those of the in-memory headers). The log is returned unchanged when it points at none of them.
pub(crate) fn annotate(log: &str, files: &[(&str, &str)]) -> String {
    let mut cited: Vec<(usize, usize)> = Vec::new();
    for message in log.lines() {
        if let Some(place) = locate(message, files) {
            if !cited.contains(&place) {
                cited.push(place);
            }
        }
    }
    let mut text = log.trim_end().to_owned();
    if cited.is_empty() {
        return text;
    }
    text.push_str("\n\nsource lines cited above:\n");
    for (file, line) in cited {
        let (name, source) = files[file];
        let content = source.lines().nth(line - 1).unwrap_or("");
        text.push_str(&format!("  {name}:{line} | {content}\n"));
    }
    text
}

/// The header NVRTC could not open, from its log: `could not open source file "cuda/std/complex"
/// (no directories in search list)` without `-I`, `cannot open source file "..."` with some.
pub(crate) fn missing_header(log: &str) -> Option<String> {
    [
        "could not open source file \"",
        "cannot open source file \"",
    ]
    .iter()
    .find_map(|prefix| {
        let (_, rest) = log.split_once(prefix)?;
        let (header, _) = rest.split_once('"')?;
        Some(header.to_owned())
    })
}

/// `(index of the file, 1-based line)` when `message` begins with `name(line)` of one of `files`
/// and that line exists.
fn locate(message: &str, files: &[(&str, &str)]) -> Option<(usize, usize)> {
    files
        .iter()
        .enumerate()
        .find_map(|(index, (name, source))| {
            let rest = message.strip_prefix(name)?.strip_prefix('(')?;
            let (digits, _) = rest.split_once(')')?;
            let line: usize = digits.parse().ok()?;
            (line >= 1 && line <= source.lines().count()).then_some((index, line))
        })
}

#[cfg(test)]
mod tests {
    use super::{annotate, missing_header};

    #[test]
    fn the_missing_header_is_read_from_either_wording() {
        let bare = "k.cu(2): catastrophic error: could not open source file \"cuda/std/complex\" \
                    (no directories in search list)\n";
        assert_eq!(missing_header(bare).as_deref(), Some("cuda/std/complex"));
        let searched = "/x/include/cooperative_groups/details/info.h(167): catastrophic error: \
                        cannot open source file \"cuda/std/type_traits\"\n";
        assert_eq!(
            missing_header(searched).as_deref(),
            Some("cuda/std/type_traits")
        );
        assert_eq!(missing_header("k.cu(1): error: expected a \";\"\n"), None);
    }

    const SOURCE: &str = "__global__ void k(int *p) {\n  p[0] = 1\n  q[1] = 2;\n}\n";

    #[test]
    fn cites_each_line_a_message_points_at_once() {
        let log = "k.cu(2): error: expected a \";\"\n\
                   k.cu(3): error: identifier \"q\" is undefined\n\
                   k.cu(3): error: another complaint\n\
                   2 errors detected in the compilation of \"k.cu\".\n";
        let text = annotate(log, &[("k.cu", SOURCE)]);
        assert!(text.starts_with(log.trim_end()), "{text}");
        assert!(text.contains("  k.cu:2 |   p[0] = 1\n"), "{text}");
        assert!(text.contains("  k.cu:3 |   q[1] = 2;\n"), "{text}");
        assert_eq!(text.matches("k.cu:3 |").count(), 1, "{text}");
    }

    #[test]
    fn finds_lines_in_headers_and_ignores_what_it_cannot_place() {
        let header = "#pragma once\nint broken(\n";
        let log = "h.cuh(2): error: expected a \")\"\n\
                   other.cu(1): error: not ours\n\
                   k.cu(99): error: past the end\n";
        let text = annotate(log, &[("k.cu", SOURCE), ("h.cuh", header)]);
        assert!(text.contains("  h.cuh:2 | int broken(\n"), "{text}");
        assert!(!text.contains("other.cu:1 |"), "{text}");
        assert!(!text.contains("k.cu:99 |"), "{text}");
        assert_eq!(annotate("all fine\n", &[("k.cu", SOURCE)]), "all fine");
    }
}
