//! PTX's tokens: words (directives, names, numbers) and single punctuation characters, with
//! comments and string literals passed over.

use std::ops::Range;

use super::line_of;
use crate::parse_error::{ParseError, Problem};

/// Splits PTX into tokens: words (directives, names, numbers) and single punctuation characters;
/// comments and string literals are dropped. An error when the text ends inside one of them.
pub(super) fn tokenize(text: &str) -> Result<Vec<&str>, ParseError> {
    Tokens::new(text).collect()
}

/// The tokens of PTX text, one at a time (see [`tokenize`]); after an error, none.
pub(super) struct Tokens<'a> {
    text: &'a str,
    at: usize,
    /// Where the comment or string the text ends inside starts, and which it is: the error that
    /// ended the tokens. Kept here rather than returned with each token, which then fits in
    /// registers.
    unterminated: Option<(usize, &'static str)>,
}

impl<'a> Tokens<'a> {
    /// The tokens of `text`, from its start.
    pub(super) fn new(text: &'a str) -> Self {
        Tokens {
            text,
            at: 0,
            unterminated: None,
        }
    }

    /// The next token, as the bytes of the text it spans; `None` at the end of the text or at an
    /// error (see [`Tokens::end`]).
    pub(super) fn next_token(&mut self) -> Option<&'a [u8]> {
        let span = self.next_span()?;
        self.text.as_bytes().get(span)
    }

    /// Where the next token is in the text: always whole characters.
    fn next_span(&mut self) -> Option<Range<usize>> {
        let bytes = self.text.as_bytes();
        while let Some(&c) = bytes.get(self.at) {
            let start = self.at;
            match CLASSES[usize::from(c)] {
                Class::Space => self.at += 1,
                Class::Word => {
                    self.at += word_len(&bytes[start..]);
                    return Some(start..self.at);
                }
                Class::Opening if self.pass_over_comment_or_string() => {}
                Class::Opening | Class::Bracket | Class::Other => {
                    self.at += if c.is_ascii() {
                        1
                    } else {
                        // Rare: the width of a character beyond ASCII.
                        self.text[start..].chars().next().map_or(1, char::len_utf8)
                    };
                    return Some(start..self.at);
                }
            }
        }
        None
    }

    /// The next bracket (`{}()[]`), passing over every other token: inside braces, where the rest
    /// does not matter to [`check`](fn@super::check). `None` as for [`Tokens::next_token`].
    pub(super) fn next_bracket(&mut self) -> Option<&'a [u8]> {
        self.next_delimiter::<false>()
    }

    /// The next bracket or `;`, passing over every other token: in a statement already known to
    /// be a block (a function or a `.section`), whose directives no longer change what
    /// [`check`](fn@super::check) finds. `None` as for [`Tokens::next_token`].
    pub(super) fn next_bracket_or_semicolon(&mut self) -> Option<&'a [u8]> {
        self.next_delimiter::<true>()
    }

    /// The next bracket, or with `SEMICOLON` also the next `;`.
    fn next_delimiter<const SEMICOLON: bool>(&mut self) -> Option<&'a [u8]> {
        let bytes = self.text.as_bytes();
        loop {
            // Only comments, strings and the delimiters change what follows.
            self.at += find_stop::<SEMICOLON, false>(bytes.get(self.at..)?)?;
            let start = self.at;
            let byte = *bytes.get(start)?;
            match CLASSES[usize::from(byte)] {
                Class::Opening if self.pass_over_comment_or_string() => {}
                Class::Bracket => {
                    self.at += 1;
                    return bytes.get(start..self.at);
                }
                _ if SEMICOLON && byte == b';' => {
                    self.at += 1;
                    return bytes.get(start..self.at);
                }
                _ => self.at += 1,
            }
        }
    }

    /// The next token that may end or shape a statement outside braces: a bracket, `;`, or a
    /// word that starts with `.` (a directive); every other token is passed over, as it changes
    /// nothing to [`check`](fn@super::check). `None` as for [`Tokens::next_token`].
    pub(super) fn next_mark(&mut self) -> Option<&'a [u8]> {
        let bytes = self.text.as_bytes();
        loop {
            self.at += find_stop::<true, true>(bytes.get(self.at..)?)?;
            let start = self.at;
            match bytes.get(start).map(|&b| CLASSES[usize::from(b)]) {
                Some(Class::Opening) if self.pass_over_comment_or_string() => {}
                Some(Class::Word) => {
                    // A `.` after a byte of a word is inside that word (`ld.param`, `1.5`).
                    if start > 0 && CLASSES[usize::from(bytes[start - 1])] == Class::Word {
                        self.at += 1;
                    } else {
                        self.at += word_len(&bytes[start..]);
                        return bytes.get(start..self.at);
                    }
                }
                Some(Class::Bracket | Class::Other) => {
                    self.at += 1;
                    return bytes.get(start..self.at);
                }
                _ => self.at += 1,
            }
        }
    }

    /// Whether the tokens ended at the end of the text (else the error that ended them).
    pub(super) fn end(&self) -> Result<(), ParseError> {
        match self.unterminated {
            None => Ok(()),
            Some((at, what)) => Err(ParseError::new(
                format!(
                    "PTX line {}",
                    line_of(self.text, &self.text.as_bytes()[at..])
                ),
                Problem::Truncated,
                format!("the text ends inside this {what} (is the file cut short?)"),
            )),
        }
    }

    /// Moves past the comment or string literal that starts where the tokens are, if one does:
    /// whether one did. To the end of the text when it ends inside one.
    fn pass_over_comment_or_string(&mut self) -> bool {
        let Some(rest) = self.text.as_bytes().get(self.at..) else {
            return false;
        };
        let (what, end) = match rest {
            [b'/', b'/', comment @ ..] => {
                ("", Some(2 + find(comment, b'\n').unwrap_or(comment.len())))
            }
            [b'/', b'*', ..] => ("comment", comment_end(rest)),
            [b'"', string @ ..] => ("string", find(string, b'"').map(|end| end + 2)),
            _ => return false,
        };
        match end {
            Some(end) => self.at += end,
            None => {
                self.unterminated = Some((self.at, what));
                self.at = self.text.len();
            }
        }
        true
    }
}

/// Where the `/*` comment that `rest` starts with ends, after its `*/` (whose `*` may be the
/// opening one, as in `/*/`).
fn comment_end(rest: &[u8]) -> Option<usize> {
    let mut star = 1;
    loop {
        if rest.get(star + 1) == Some(&b'/') {
            return Some(star + 2);
        }
        star += 1 + find(rest.get(star + 1..)?, b'*')?;
    }
}

/// Where the first `byte` is in `bytes`. Comments and strings in PTX are a line or less, too short
/// for a call to `memchr` to pay.
fn find(bytes: &[u8], byte: u8) -> Option<usize> {
    bytes.iter().position(|&b| b == byte)
}

/// The length of the word `bytes` start with.
fn word_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| CLASSES[usize::from(b)] != Class::Word)
        .unwrap_or(bytes.len())
}

/// Where the first byte that may start a comment, a string or a bracket (`/"{}()[]`) is in
/// `bytes`, or with `SEMICOLON` also a `;`, with `DOT` also a `.` (which may start a directive).
/// Most of PTX is function bodies, where the first are a few bytes in a hundred: sixteen bytes
/// are tested at once, with SSE2.
#[cfg(target_arch = "x86_64")]
fn find_stop<const SEMICOLON: bool, const DOT: bool>(bytes: &[u8]) -> Option<usize> {
    // SAFETY: every x86-64 processor has SSE2, the one feature the function requires.
    unsafe { find_stop_sse2::<SEMICOLON, DOT>(bytes) }
}

/// [`find_stop`] with SSE2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn find_stop_sse2<const SEMICOLON: bool, const DOT: bool>(bytes: &[u8]) -> Option<usize> {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_set_epi64x,
    };
    let splat = |b: u8| _mm_set1_epi8(i8::from_ne_bytes([b]));
    let equal = |x: __m128i, b: u8| _mm_cmpeq_epi8(x, splat(b));
    let (blocks, tail) = bytes.as_chunks::<16>();
    for (index, block) in blocks.iter().enumerate() {
        // Built from the bytes rather than loaded through a pointer: no unsafe code, and the
        // compiler makes it the same one unaligned load.
        let x = u128::from_le_bytes(*block);
        let x = _mm_set_epi64x((x >> 64) as i64, x as i64);
        // `(` and `)` differ in bit 0, `[` and `{` (and `]` and `}`) in bit 5.
        let paren = equal(_mm_and_si128(x, splat(0xfe)), b'(');
        let square = _mm_and_si128(x, splat(0xdf));
        let mut found = _mm_or_si128(
            _mm_or_si128(paren, equal(square, b'[')),
            _mm_or_si128(
                equal(square, b']'),
                _mm_or_si128(equal(x, b'/'), equal(x, b'"')),
            ),
        );
        if SEMICOLON {
            found = _mm_or_si128(found, equal(x, b';'));
        }
        if DOT {
            found = _mm_or_si128(found, equal(x, b'.'));
        }
        let found = _mm_movemask_epi8(found);
        if found != 0 {
            return Some(index * 16 + found.trailing_zeros() as usize);
        }
    }
    Some(blocks.len() * 16 + find_stop_in_tail::<SEMICOLON, DOT>(tail)?)
}

/// [`find_stop`] where SSE2 is not known to be there: eight bytes are tested at once, in a `u64`.
#[cfg(not(target_arch = "x86_64"))]
fn find_stop<const SEMICOLON: bool, const DOT: bool>(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // The bytes of `x` that are 0, as the highest bit of each: exact for the lowest such byte,
    // the one wanted (a byte above it may borrow and show falsely).
    let zeros = |x: u64| x.wrapping_sub(ONES) & !x;
    let (words, tail) = bytes.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let x = u64::from_le_bytes(*word);
        // `(` and `)` differ in bit 0, `[` and `{` (and `]` and `}`) in bit 5.
        let paren = (x & (ONES * 0xfe)) ^ (ONES * u64::from(b'('));
        let opening = (x & (ONES * 0xdf)) ^ (ONES * u64::from(b'['));
        let closing = (x & (ONES * 0xdf)) ^ (ONES * u64::from(b']'));
        let slash = x ^ (ONES * u64::from(b'/'));
        let quote = x ^ (ONES * u64::from(b'"'));
        let mut found =
            zeros(paren) | zeros(opening) | zeros(closing) | zeros(slash) | zeros(quote);
        if SEMICOLON {
            found |= zeros(x ^ (ONES * u64::from(b';')));
        }
        if DOT {
            found |= zeros(x ^ (ONES * u64::from(b'.')));
        }
        found &= HIGHS;
        if found != 0 {
            return Some(index * 8 + found.trailing_zeros() as usize / 8);
        }
    }
    Some(words.len() * 8 + find_stop_in_tail::<SEMICOLON, DOT>(tail)?)
}

/// [`find_stop`] one byte at a time, for the few bytes after the last whole block.
fn find_stop_in_tail<const SEMICOLON: bool, const DOT: bool>(tail: &[u8]) -> Option<usize> {
    tail.iter().position(|&b| {
        matches!(CLASSES[usize::from(b)], Class::Opening | Class::Bracket)
            || (SEMICOLON && b == b';')
            || (DOT && b == b'.')
    })
}

/// What a byte may begin, to the tokenizer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// ASCII whitespace, between tokens.
    Space,
    /// A byte of a word: a directive, a name, a number.
    Word,
    /// A byte that may start a comment or a string: `/` or `"`.
    Opening,
    /// `{}()[]`.
    Bracket,
    /// Any other punctuation, or a character beyond ASCII.
    Other,
}

static CLASSES: [Class; 256] = {
    let mut classes = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        classes[b] = if byte.is_ascii_whitespace() {
            Class::Space
        } else if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'$' | b'%' | b'.') {
            Class::Word
        } else if matches!(byte, b'/' | b'"') {
            Class::Opening
        } else if matches!(byte, b'{' | b'}' | b'(' | b')' | b'[' | b']') {
            Class::Bracket
        } else {
            Class::Other
        };
        b += 1;
    }
    classes
};

impl<'a> Iterator for Tokens<'a> {
    type Item = Result<&'a str, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_span() {
            Some(span) => Some(Ok(&self.text[span])),
            // The error once, then none.
            None => self.end().err().map(|error| {
                self.unterminated = None;
                Err(error)
            }),
        }
    }
}
