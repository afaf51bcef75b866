//! PTX's tokens: words (directives, names, numbers) and single punctuation characters, with
//! comments and string literals passed over.

use super::{line_of, ParseError};

/// Splits PTX into tokens: words (directives, names, numbers) and single punctuation characters;
/// comments and string literals are dropped. An error when the text ends inside one of them.
pub(super) fn tokenize(text: &str) -> Result<Vec<&str>, ParseError> {
    Tokens::new(text).collect()
}

/// The tokens of PTX text, one at a time (see [`tokenize`]); after an error, none.
pub(super) struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Tokens<'a> {
    /// The tokens of `text`, from its start.
    pub(super) fn new(text: &'a str) -> Self {
        Tokens { text, at: 0 }
    }

    /// The next token, or with `brackets_only` the next bracket (`{}()[]`), passing over every
    /// other token: inside braces, where the rest does not matter to [`check`](fn@super::check).
    pub(super) fn advance(&mut self, brackets_only: bool) -> Option<Result<&'a str, ParseError>> {
        let text = self.text;
        let bytes = text.as_bytes();
        let unterminated = |at: usize, what: &str| {
            ParseError::new(
                format!("PTX line {}", line_of(text, &text[at..])),
                format!("the text ends inside this {what} (is the file cut short?)"),
            )
        };
        while self.at < bytes.len() {
            if brackets_only {
                // Only comments, strings and brackets change what follows.
                let skipped = bytes[self.at..]
                    .iter()
                    .position(|&b| BRACKET_PASS_STOPS[usize::from(b)]);
                self.at += skipped.unwrap_or(bytes.len() - self.at);
                if self.at == bytes.len() {
                    break;
                }
            }
            let at = self.at;
            let c = bytes[at];
            let rest = &bytes[at..];
            if c.is_ascii_whitespace() {
                self.at += 1;
            } else if rest.starts_with(b"//") {
                self.at += find_byte(b'\n', rest).unwrap_or(rest.len());
            } else if rest.starts_with(b"/*") {
                let Some(end) = rest.windows(2).position(|w| w == b"*/") else {
                    self.at = bytes.len();
                    return Some(Err(unterminated(at, "comment")));
                };
                self.at += end + 2;
            } else if c == b'"' {
                let Some(end) = find_byte(b'"', &rest[1..]) else {
                    self.at = bytes.len();
                    return Some(Err(unterminated(at, "string")));
                };
                self.at += end + 2;
            } else if brackets_only && c == b'/' {
                self.at += 1;
            } else {
                let len = if is_word_byte(c) {
                    rest.iter()
                        .position(|&b| !is_word_byte(b))
                        .unwrap_or(rest.len())
                } else {
                    text[at..].chars().next().map_or(1, char::len_utf8)
                };
                self.at += len;
                return Some(Ok(&text[at..at + len]));
            }
        }
        None
    }
}

/// The bytes where [`Tokens::advance`] stops when it passes over all but brackets: those that
/// may start a comment, a string or a bracket.
static BRACKET_PASS_STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut at = 0;
    let bytes = b"/\"{}()[]";
    while at < bytes.len() {
        stops[bytes[at] as usize] = true;
        at += 1;
    }
    stops
};

/// Where `byte` first occurs in `haystack`.
fn find_byte(byte: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == byte)
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Result<&'a str, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(false)
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'%' | b'.')
}
