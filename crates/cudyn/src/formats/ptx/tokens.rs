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
    /// Whether the processor has AVX2, asked once rather than for every 64 bytes.
    avx2: bool,
}

impl<'a> Tokens<'a> {
    /// The tokens of `text`, from its start.
    pub(super) fn new(text: &'a str) -> Self {
        Tokens {
            text,
            at: 0,
            unterminated: None,
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
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

    /// Passes over the inside of braces, where only brackets matter (to their pairing and to
    /// where the statement ends): to the `}` that closes them, returned, with every bracket
    /// before it shown to `see`. `None` as for [`Tokens::next_token`].
    ///
    /// Most of PTX is function bodies, with a bracket every forty bytes or so: the stops of
    /// 64 bytes are found at once, then taken one after the other, not searched for again.
    pub(super) fn pass_braces(&mut self, mut see: impl FnMut(&'a [u8])) -> Option<&'a [u8]> {
        let bytes = self.text.as_bytes();
        let mut depth = 0usize;
        loop {
            let window = self.at;
            let mut stops = stops_from::<false, false>(bytes, window, self.avx2)?;
            self.at = (window + 64).min(bytes.len());
            while stops != 0 {
                let start = window + stops.trailing_zeros() as usize;
                stops &= stops - 1;
                let stop = bytes.get(start..=start)?;
                match stop {
                    [b'/' | b'"'] => {
                        let at = std::mem::replace(&mut self.at, start);
                        if self.pass_over_comment_or_string() {
                            // What follows is searched afresh from its end.
                            break;
                        }
                        self.at = at;
                        continue;
                    }
                    [open @ (b'[' | b'(')] => {
                        // Closed by the next stop, as `[%rd1]` nearly always: a pair that
                        // changes nothing, passed over as one.
                        let close = if *open == b'[' { b']' } else { b')' };
                        let next = window + stops.trailing_zeros() as usize;
                        if stops != 0 && bytes.get(next) == Some(&close) {
                            stops &= stops - 1;
                            continue;
                        }
                    }
                    [b'{'] => depth += 1,
                    [b'}'] if depth == 0 => {
                        self.at = start + 1;
                        return Some(stop);
                    }
                    [b'}'] => depth -= 1,
                    _ => {}
                }
                see(stop);
            }
        }
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
            self.at = find_stop::<SEMICOLON, false>(bytes, self.at, self.avx2)?;
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
            self.at = find_stop::<true, true>(bytes, self.at, self.avx2)?;
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

/// Where the first `byte` is in `bytes`, sixteen bytes at a time: a comment runs to the end of
/// its line, some forty bytes in PTX, where a byte at a time costs three times as much.
pub(super) fn find(bytes: &[u8], byte: u8) -> Option<usize> {
    let mut at = 0;
    loop {
        let found = masked(bytes, at, |window| equal_mask(window, byte))?;
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize);
        }
        at += 16;
    }
}

/// The length of the word `bytes` start with.
fn word_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|&b| CLASSES[usize::from(b)] != Class::Word)
        .unwrap_or(bytes.len())
}

/// Where the first byte that may start a comment, a string or a bracket (`/"{}()[]`) is in
/// `bytes` from `from` on (see [`stop_mask`]).
fn find_stop<const SEMICOLON: bool, const DOT: bool>(
    bytes: &[u8],
    from: usize,
    avx2: bool,
) -> Option<usize> {
    let mut at = from;
    loop {
        let stops = stops_from::<SEMICOLON, DOT>(bytes, at, avx2)?;
        if stops != 0 {
            return Some(at + stops.trailing_zeros() as usize);
        }
        at += 64;
    }
}

/// [`stop_mask`] of the (up to) 64 bytes of `bytes` from `at`: bit 0 for the byte at `at`, no
/// bit past the end of `bytes`. `None` from the end of `bytes` on. Sixty-four at once (with AVX2
/// when `avx2`, else SSE2), as PTX has a stop every forty bytes or so.
#[inline(always)]
fn stops_from<const SEMICOLON: bool, const DOT: bool>(
    bytes: &[u8],
    at: usize,
    avx2: bool,
) -> Option<u64> {
    let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
    let mut stops = 0;
    if let Some(block) = rest.first_chunk::<64>() {
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: the processor has AVX2 (as `avx2` says), the one feature the function
            // requires.
            return Some(unsafe { stop_mask64_avx2::<SEMICOLON, DOT>(block) });
        }
        for (index, window) in block.as_chunks::<16>().0.iter().enumerate() {
            stops |= u64::from(stop_mask::<SEMICOLON, DOT>(window)) << (16 * index);
        }
        return Some(stops);
    }
    // Only x86-64 has AVX2.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    let mut offset = 0;
    while offset < rest.len() {
        let window = masked(bytes, at + offset, stop_mask::<SEMICOLON, DOT>)?;
        stops |= u64::from(window) << offset;
        offset += 16;
    }
    Some(stops)
}

/// `mask` of the (up to) sixteen bytes of `bytes` from `at`: bit 0 for the byte at `at`, no bit
/// past the end of `bytes`. `None` from the end of `bytes` on.
#[inline(always)]
fn masked(bytes: &[u8], at: usize, mask: impl Fn(&[u8; 16]) -> u32) -> Option<u32> {
    let rest = bytes.get(at..).filter(|rest| !rest.is_empty())?;
    if let Some(window) = rest.first_chunk::<16>() {
        return Some(mask(window));
    }
    // Fewer than sixteen bytes left: the last sixteen of `bytes`, those before `at` shifted out
    // (one load rather than a copy), else all of them, copied.
    let (window, before) = match bytes.last_chunk::<16>() {
        Some(last) => (*last, 16 - rest.len()),
        None => {
            let mut window = [0; 16];
            if let Some(start) = window.get_mut(..bytes.len()) {
                start.copy_from_slice(bytes);
            }
            (window, at)
        }
    };
    let inside = (1u32 << rest.len()) - 1;
    Some((mask(&window) >> before) & inside)
}

/// Which of sixteen bytes may start a comment, a string or a bracket (`/"{}()[]`), or with
/// `SEMICOLON` are a `;`, with `DOT` a `.` (which may start a directive): bit `i` for byte `i`.
/// Most of PTX is function bodies, where these are a few bytes in a hundred.
#[inline(always)]
fn stop_mask<const SEMICOLON: bool, const DOT: bool>(window: &[u8; 16]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every x86-64 processor has SSE2, the one feature the function requires.
    let mask = unsafe { stop_mask_sse2::<SEMICOLON, DOT>(window) };
    #[cfg(not(target_arch = "x86_64"))]
    let mask = window.iter().enumerate().fold(0, |mask, (i, &b)| {
        let stop = matches!(CLASSES[usize::from(b)], Class::Opening | Class::Bracket)
            || (SEMICOLON && b == b';')
            || (DOT && b == b'.');
        mask | u32::from(stop) << i
    });
    mask
}

/// Which of sixteen bytes are `byte`: bit `i` for byte `i`.
#[inline(always)]
fn equal_mask(window: &[u8; 16], byte: u8) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every x86-64 processor has SSE2, the one feature the function requires.
    let mask = unsafe { equal_mask_sse2(window, byte) };
    #[cfg(not(target_arch = "x86_64"))]
    let mask = window
        .iter()
        .enumerate()
        .fold(0, |mask, (i, &b)| mask | u32::from(b == byte) << i);
    mask
}

/// The sixteen bytes of `window` in an SSE2 register. Built from the bytes rather than loaded
/// through a pointer: no unsafe code, and the compiler makes it the same one unaligned load.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn load(window: &[u8; 16]) -> std::arch::x86_64::__m128i {
    let x = u128::from_le_bytes(*window);
    std::arch::x86_64::_mm_set_epi64x((x >> 64) as i64, x as i64)
}

/// [`stop_mask`] with SSE2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn stop_mask_sse2<const SEMICOLON: bool, const DOT: bool>(window: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let splat = |b: u8| _mm_set1_epi8(i8::from_ne_bytes([b]));
    let equal = |x: __m128i, b: u8| _mm_cmpeq_epi8(x, splat(b));
    let x = load(window);
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
    // Sixteen bits, all positive as an `i32`.
    _mm_movemask_epi8(found) as u32
}

/// [`stop_mask`] of 64 bytes with AVX2, 32 bytes to an instruction, each byte looked up by its
/// two halves (`vpshufb`): about a third of SSE2's instructions, which moreover copy registers
/// they overwrite.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn stop_mask64_avx2<const SEMICOLON: bool, const DOT: bool>(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_set1_epi8, _mm256_set_epi64x, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_srli_epi16,
    };
    // A stop is a byte whose low half's bits and high half's bits meet: bit 0 for `"()/` (and
    // `.`), in 0x20..0x30; bit 1 for `;`, in 0x30..0x40; bit 2 for `[]{}`, in 0x50..0x60 and
    // 0x70..0x80. Every table twice, as `vpshufb` looks up each 16-byte lane on its own.
    let table = |halves: [u8; 16]| {
        let low = u64::from_le_bytes(*halves.first_chunk::<8>().unwrap_or(&[0; 8]));
        let high = u64::from_le_bytes(*halves.last_chunk::<8>().unwrap_or(&[0; 8]));
        let (low, high) = (low as i64, high as i64);
        _mm256_set_epi64x(high, low, high, low)
    };
    let mut low_half = [0u8; 16];
    for (half, bits) in low_half.iter_mut().enumerate() {
        *bits = u8::from(matches!(half, 0x2 | 0x8 | 0x9 | 0xf) || (DOT && half == 0xe))
            | u8::from(SEMICOLON && half == 0xb) << 1
            | u8::from(matches!(half, 0xb | 0xd)) << 2;
    }
    let mut high_half = [0u8; 16];
    for (half, bits) in high_half.iter_mut().enumerate() {
        *bits = match half {
            0x2 => 1,
            0x3 => 2,
            0x5 | 0x7 => 4,
            _ => 0,
        };
    }
    let (low_table, high_table) = (table(low_half), table(high_half));
    let nibble = _mm256_set1_epi8(0x0f);
    let mut stops = 0;
    for (index, half) in block.as_chunks::<32>().0.iter().enumerate() {
        // SAFETY: `half` is 32 bytes to read; the load needs no alignment.
        let x = unsafe { _mm256_loadu_si256(half.as_ptr().cast()) };
        let low = _mm256_shuffle_epi8(low_table, _mm256_and_si256(x, nibble));
        let high = _mm256_and_si256(_mm256_srli_epi16::<4>(x), nibble);
        let high = _mm256_shuffle_epi8(high_table, high);
        let none = _mm256_cmpeq_epi8(_mm256_and_si256(low, high), _mm256_setzero_si256());
        // Thirty-two bits, as a `u32`: those of the stops.
        let mask = !u32::from_ne_bytes(_mm256_movemask_epi8(none).to_ne_bytes());
        stops |= u64::from(mask) << (32 * index);
    }
    stops
}

/// [`equal_mask`] with SSE2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn equal_mask_sse2(window: &[u8; 16], byte: u8) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8};
    let splat = _mm_set1_epi8(i8::from_ne_bytes([byte]));
    // Sixteen bits, all positive as an `i32`.
    _mm_movemask_epi8(_mm_cmpeq_epi8(load(window), splat)) as u32
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
