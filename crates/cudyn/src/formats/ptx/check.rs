//! The check of PTX text before a load: text that reads to its end (no comment, string, bracket
//! or statement left open), as [`parse`](super::parse) reads it but in one pass over the tokens
//! without building the module, and that declares its `.version` and `.target`.

use super::tokens::Tokens;
use super::{
    line_of, not_text, text, ENDS_INSIDE_STATEMENT, ENTRY_PARAMS_OPEN, ENTRY_WITHOUT_NAME,
};
use crate::formats::Facts;
use crate::parse_error::{ParseError, Problem};

/// Checks PTX text before a load (see the module's documentation); what its variables are.
pub(crate) fn validate(bytes: &[u8]) -> Result<Facts, ParseError> {
    validate_text(text(bytes).ok_or_else(not_text)?)
}

/// [`validate`] of bytes already read as text (valid UTF-8 without a NUL, trailing NULs cut:
/// what [`recognized_text`](super::recognized_text) returns).
pub(crate) fn validate_text(text: &str) -> Result<Facts, ParseError> {
    let outline = check_text(text)?;
    let missing = |message| ParseError::new("PTX text", Problem::Missing, message);
    if !outline.version {
        return Err(missing("it has no `.version` directive"));
    }
    if !outline.target {
        return Err(missing("it has no `.target` directive"));
    }
    // The size of PTX variables is not read here: unknown when there are some.
    Ok(if outline.variables {
        Facts::UNKNOWN
    } else {
        Facts::NO_VARIABLES
    })
}

/// What [`check`] found in PTX text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outline {
    /// A `.version` directive with its value.
    pub(crate) version: bool,
    /// A `.target` directive with at least one target.
    pub(crate) target: bool,
    /// A module-scope `.global` or `.const` declaration (a statement that declares no function
    /// and names one of those spaces outside braces: a superset of [`PtxModule::variables`](super::PtxModule::variables)).
    pub(crate) variables: bool,
}

/// How much of an `.entry` statement's head [`check`] has read, as `parse` reads an entry: its
/// name, then a parameter list that must close before the statement ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryHead {
    /// No `.entry` in the statement's head (so far).
    None,
    /// After `.entry`: the name comes next.
    Name,
    /// After the name: a `(` opens the parameters.
    AfterName,
    /// Inside the parameter list: a `)` closes it.
    Params,
    /// Read whole.
    Read,
    /// Cannot be read, for this reason.
    Unreadable(&'static str),
}

/// Where [`check`] is between top-level statements.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    /// Between statements.
    Top,
    /// After `.version` or `.address_size`: their value.
    Value { version: bool },
    /// After `.target` or one of its `,`: a target.
    Target,
    /// After a target: a `,` continues the list.
    TargetList,
    /// After `.file` or one of its `,`: the next field.
    FileField,
    /// After a field of `.file`: a `,` continues it.
    FileList,
    /// Inside a statement that began at `start`.
    Statement(Statement<'a>),
}

#[derive(Debug, Clone, Copy)]
struct Statement<'a> {
    start: &'a [u8],
    /// How much of an `.entry` declaration's head was read.
    entry: EntryHead,
    /// Whether a `;` or `{` was seen: what makes a block is decided before it.
    head_done: bool,
    /// A function body or `.section`: it ends with its closing brace.
    block: bool,
    depth: usize,
    /// `.global` or `.const` outside braces.
    space: bool,
}

/// [`check_text`] of bytes, for the tests, which compare it with [`parse`](super::parse) on any
/// bytes.
#[cfg(test)]
pub(crate) fn check(bytes: &[u8]) -> Result<Outline, ParseError> {
    check_text(text(bytes).ok_or_else(not_text)?)
}

/// Checks that PTX text reads to its end as [`parse`](super::parse) reads it (no comment, string,
/// bracket or statement left open) without building the module: one pass over the tokens,
/// nothing allocated but the stack of open brackets. The errors are [`parse`](super::parse)'s: one
/// of the tokenizer first, else the first bracket that does not pair up, else the first statement
/// the text ends inside.
fn check_text(text: &str) -> Result<Outline, ParseError> {
    let place = |token: &[u8]| format!("PTX line {}", line_of(text, token));
    let mut outline = Outline::default();
    let mut brackets = Brackets::default();
    let mut at = At::Top;
    // The first entry that cannot be read: its statement's start, and why.
    let mut unreadable_entry = None;
    let mut tokens = Tokens::new(text);
    loop {
        let token = match at {
            At::Statement(s) if s.depth > 0 => tokens.pass_braces(|bracket| brackets.see(bracket)),
            // An entry's name and the token after it, whatever they are.
            At::Statement(s) if matches!(s.entry, EntryHead::Name | EntryHead::AfterName) => {
                tokens.next_token()
            }
            // Once a block, only where the statement ends matters (see `statement`).
            At::Statement(s) if s.block => tokens.next_bracket_or_semicolon(),
            At::Statement(_) => tokens.next_mark(),
            _ => tokens.next_token(),
        };
        let Some(token) = token else {
            break;
        };
        brackets.see(token);
        step(&mut at, token, &mut outline, &mut unreadable_entry);
    }
    tokens.end()?;
    if let Some(closing) = brackets.error {
        return Err(ParseError::new(
            place(closing),
            Problem::Damaged,
            format!("`{}` closes nothing", closing.escape_ascii()),
        ));
    }
    if let Some(first) = brackets.open.first() {
        return Err(ParseError::new(
            place(first),
            Problem::Truncated,
            format!(
                "`{}` is never closed: the text ends inside it (is the file cut short?)",
                first.escape_ascii()
            ),
        ));
    }
    if let Some((start, reason)) = unreadable_entry {
        return Err(ParseError::new(place(start), Problem::Damaged, reason));
    }
    match at {
        At::Statement(statement) => Err(ParseError::new(
            place(statement.start),
            Problem::Truncated,
            ENDS_INSIDE_STATEMENT,
        )),
        At::Value { version: true } => {
            // `.version` last, with no value: as `parse` reads it, the module has none.
            outline.version = false;
            Ok(outline)
        }
        _ => Ok(outline),
    }
}

/// The brackets seen so far, and whether they pair up.
#[derive(Default)]
struct Brackets<'a> {
    /// Those open, innermost last.
    open: Vec<&'a [u8]>,
    /// The first that closes nothing: no more are followed after it.
    error: Option<&'a [u8]>,
}

impl<'a> Brackets<'a> {
    /// Follows `token`, if a bracket.
    fn see(&mut self, token: &'a [u8]) {
        if self.error.is_some() {
            return;
        }
        // Brackets are one-byte tokens: told by their byte.
        let expected = match token {
            [b'{' | b'(' | b'['] => {
                self.open.push(token);
                return;
            }
            [b'}'] => b'{',
            [b')'] => b'(',
            [b']'] => b'[',
            _ => return,
        };
        if !matches!(self.open.pop(), Some([open]) if *open == expected) {
            self.error = Some(token);
        }
    }
}

/// An entry that cannot be read: its statement's start, and why.
type Unreadable<'a> = Option<(&'a [u8], &'static str)>;

/// The top-level reading of [`parse`](super::parse), one token at a time: `at` moves on past
/// `token`; `unreadable` keeps the first entry that cannot be read.
fn step<'a>(
    at: &mut At<'a>,
    token: &'a [u8],
    outline: &mut Outline,
    unreadable: &mut Unreadable<'a>,
) {
    match at {
        At::Top => {
            *at = match token {
                b".version" => At::Value { version: true },
                b".address_size" => At::Value { version: false },
                b".target" => At::Target,
                b".file" => At::FileField,
                _ => {
                    let mut begun = Statement {
                        start: token,
                        entry: EntryHead::None,
                        head_done: false,
                        block: false,
                        depth: 0,
                        space: false,
                    };
                    if statement(&mut begun, token, outline, unreadable) {
                        At::Top
                    } else {
                        At::Statement(begun)
                    }
                }
            }
        }
        At::Value { version } => {
            outline.version |= *version;
            *at = At::Top;
        }
        At::Target => {
            outline.target = true;
            *at = At::TargetList;
        }
        At::TargetList if token == b"," => *at = At::Target,
        At::FileField => *at = At::FileList,
        At::FileList if token == b"," => *at = At::FileField,
        At::TargetList | At::FileList => {
            *at = At::Top;
            step(at, token, outline, unreadable);
        }
        At::Statement(current) => {
            if statement(current, token, outline, unreadable) {
                *at = At::Top;
            }
        }
    }
}

/// `token` inside `statement`: whether the statement ends with it (after a `;` outside braces,
/// or the closing brace of a block). An entry that ends unread is kept in `unreadable`, when it
/// is the first.
fn statement<'a>(
    statement: &mut Statement<'a>,
    token: &[u8],
    outline: &mut Outline,
    unreadable: &mut Unreadable<'a>,
) -> bool {
    statement.entry = match (statement.entry, token) {
        (EntryHead::None, b".entry") if !statement.head_done => EntryHead::Name,
        // `is_identifier` of the name, read as bytes: a token is whole characters, and one
        // beyond ASCII is no identifier's first.
        (EntryHead::Name, [first, ..])
            if first.is_ascii_alphabetic() || matches!(first, b'_' | b'$' | b'%') =>
        {
            EntryHead::AfterName
        }
        (EntryHead::Name, _) => EntryHead::Unreadable(ENTRY_WITHOUT_NAME),
        (EntryHead::AfterName, b"(") => EntryHead::Params,
        (EntryHead::AfterName, _) => EntryHead::Read,
        (EntryHead::Params, b")") => EntryHead::Read,
        (entry, _) => entry,
    };
    let outside = statement.depth == 0;
    match token {
        b".entry" | b".func" | b".section" if !statement.head_done => statement.block = true,
        b".global" | b".const" if outside => statement.space = true,
        _ => {}
    }
    if matches!(token, b";" | b"{") {
        statement.head_done = true;
    }
    let ended = match token {
        b"{" => {
            statement.depth += 1;
            false
        }
        b"}" => {
            statement.depth = statement.depth.saturating_sub(1);
            statement.depth == 0 && statement.block
        }
        b";" => outside,
        _ => false,
    };
    if ended {
        outline.variables |= statement.space && !statement.block;
        let reason = match statement.entry {
            EntryHead::Params => Some(ENTRY_PARAMS_OPEN),
            EntryHead::Unreadable(reason) => Some(reason),
            _ => None,
        };
        if let (None, Some(reason)) = (&unreadable, reason) {
            *unreadable = Some((statement.start, reason));
        }
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::formats::ptx::{parse, recognized_text, text, tokenize};

    /// PTX as NVRTC writes it, with what it writes more rarely: variables with initializers,
    /// a device function, debug information with strings and block comments.
    const SEED: &str = "//\n// Generated by NVIDIA NVVM Compiler\n//\n// Based on NVVM 7.0.1\n//\n\n\
        .version 9.0\n.target sm_90\n.address_size 64\n\n\t// .globl\tsaxpy\n\
        .global .align 4 .b8 table[12] = {1, 2, 3};\n.const .align 8 .f64 scale;\n\
        .extern .func (.param .b32 r) helper (.param .b64 p);\n\
        .global .attribute(.managed) .align 4 .u32 flag;\n\n\
        .visible .entry saxpy(\n\t.param .f32 saxpy_param_0,\n\t.param .u64 saxpy_param_1,\n\
        \t.param .align 8 .b8 saxpy_param_2[24]\n)\n{\n\t.reg .pred \t%p<2>;\n\t.reg .b64 \t%rd<15>;\n\n\n\
        \tld.param.f32 \t%f1, [saxpy_param_0];\n\tmov.u32 \t%r1, %ctaid.x;\n\
        \tsetp.ge.u64 \t%p1, %rd1, %rd5;\n\t@%p1 bra \t$L__BB1_2;\n\
        \tld.global.f32 \t%f2, [%rd10+4]; /* a block comment { */\n\
        \t{ // an inner block\n\t.reg .b32 %t;\n\t}\n\
        $L__BB1_2:\n\tret;\n\n}\n\t// .globl\tempty\n\
        .visible .entry empty()\n{\n\tret;\n}\n\
        .visible .func (.param .b32 r) helper (.param .b64 p)\n{\n  ld.global.u32 %r1, [p];\n}\n\
        .file 1 \"/src/k.cu\", 1700000000, 1234\n\
        .section .debug_abbrev\n{\n.b8 17\n.b8 0\n}\n.section .debug_str { $str: .b8 95, 0 }\n";

    /// What mutations insert: what opens or closes a bracket, comment, string or statement, the
    /// directives the check follows, and words, spaces and characters beyond ASCII.
    const PIECES: &[&str] = &[
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ";",
        ",",
        "/*",
        "*/",
        "//",
        "/",
        "*",
        "\"",
        "\n",
        "\r",
        "\r\n",
        " ",
        "\t",
        "\u{b}",
        ".entry",
        ".func",
        ".section",
        ".global",
        ".const",
        ".version",
        ".target",
        ".address_size",
        ".file",
        ".attribute",
        ".version 9.0\n",
        ".target sm_90\n",
        "9.0",
        "k",
        "%r1",
        "ld.param",
        "$L",
        "é",
        "\u{a0}",
        "\u{2028}",
        ".",
        "\0",
    ];

    /// The detection and text reading as they were first written (line by line, with `str`'s
    /// own UTF-8 reading), which the faster ones must agree with.
    fn reference_recognized_text(bytes: &[u8]) -> Option<&str> {
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let text = std::str::from_utf8(&bytes[..end])
            .ok()
            .filter(|text| !text.contains('\0'))?;
        let directive = |line: &str, name: &str| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(char::is_whitespace))
        };
        let lines = || text.lines().map(str::trim_start);
        (lines().any(|line| directive(line, ".version"))
            && lines().any(|line| directive(line, ".target")))
        .then_some(text)
    }

    /// Whether `bytes` may name `.entry` in a statement's head after `.func` or `.section`: the
    /// check takes such a statement for a function or section and does not read the entry,
    /// where `parse` reads it (and refuses one without a name). Told from the tokens: such an
    /// `.entry` after `.func` or `.section` with no `;` or brace between.
    fn entry_after_block_directive(bytes: &[u8]) -> bool {
        let Some(Ok(tokens)) = text(bytes).map(tokenize) else {
            return false;
        };
        let mut block = false;
        tokens.iter().any(|&token| {
            match token {
                ";" | "{" | "}" => block = false,
                ".func" | ".section" => block = true,
                _ => {}
            }
            block && token == ".entry"
        })
    }

    /// `bytes` read by the check, by `parse` and by detection: the same verdict and error, and on
    /// text read whole, the same version and target.
    /// Whether they were compared (not when [`entry_after_block_directive`]).
    fn agree(bytes: &[u8]) -> bool {
        let shown = String::from_utf8_lossy(bytes);
        let expected = reference_recognized_text(bytes);
        assert_eq!(recognized_text(bytes), expected, "{shown:?}");
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let plain = std::str::from_utf8(&bytes[..end]).ok();
        assert_eq!(
            text(bytes),
            plain.filter(|t| !t.contains('\0')),
            "{shown:?}"
        );
        if entry_after_block_directive(bytes) {
            return false;
        }
        match (check(bytes), parse(bytes)) {
            (Ok(outline), Ok(module)) => {
                assert_eq!(outline.version, module.version.is_some(), "{shown:?}");
                assert_eq!(outline.target, !module.target.is_empty(), "{shown:?}");
                // Not the variables: on damaged text, the check's (a statement naming `.global`
                // outside braces, and no `.func`, `.entry` or `.section`) and `parse`'s (read from
                // the declarators, before any `=`) part ways both ways.
            }
            (Err(checked), Err(parsed)) => assert_eq!(checked, parsed, "{shown:?}"),
            (checked, parsed) => panic!("{shown:?}: check {checked:?}, parse {parsed:?}"),
        }
        true
    }

    #[test]
    fn the_check_agrees_with_parse_on_mutated_ptx() {
        assert!(agree(SEED.as_bytes()));
        assert!(check(SEED.as_bytes()).unwrap().variables);
        let mut compared = 0;
        let mut rng = fastrand::Rng::with_seed(0x5054_5843);
        for _ in 0..20_000 {
            let mut bytes = SEED.as_bytes().to_vec();
            for _ in 0..rng.usize(1..=4) {
                let at = rng.usize(..=bytes.len());
                match rng.u8(..8) {
                    0..=3 => {
                        let piece = PIECES[rng.usize(..PIECES.len())];
                        bytes.splice(at..at, piece.bytes());
                    }
                    4 => {
                        let end = (at + rng.usize(1..40)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    5 => bytes.truncate(at),
                    6 if at < bytes.len() => bytes[at] = rng.u8(..),
                    _ if at < bytes.len() => bytes[at] = rng.u8(..0x80),
                    _ => {}
                }
            }
            compared += usize::from(agree(&bytes));
        }
        assert!(compared > 19_000, "{compared}");
    }
}
