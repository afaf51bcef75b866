//! The check of PTX text before a load: text that reads to its end (no comment, string, bracket
//! or statement left open), as [`parse`](super::parse) reads it but in one pass over the tokens
//! without building the module, and that declares its `.version` and `.target`.

use super::tokens::Tokens;
use super::{
    is_identifier, line_of, not_text, text, ENDS_INSIDE_STATEMENT, ENTRY_PARAMS_OPEN,
    ENTRY_WITHOUT_NAME,
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
            At::Statement(s) if s.depth > 0 => pass_braces(&mut tokens, &mut brackets),
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
        let expected: &[u8] = match token {
            b"{" | b"(" | b"[" => {
                self.open.push(token);
                return;
            }
            b"}" => b"{",
            b")" => b"(",
            b"]" => b"[",
            _ => return,
        };
        if self.open.pop() != Some(expected) {
            self.error = Some(token);
        }
    }
}

/// Passes over the inside of braces, where only brackets matter (to their pairing and to where
/// the statement ends): to the `}` that closes them, returned as the next token.
fn pass_braces<'a>(tokens: &mut Tokens<'a>, brackets: &mut Brackets<'a>) -> Option<&'a [u8]> {
    let mut depth = 0usize;
    loop {
        let bracket = tokens.next_bracket()?;
        match bracket {
            b"{" => depth += 1,
            b"}" if depth == 0 => return Some(bracket),
            b"}" => depth -= 1,
            _ => {}
        }
        brackets.see(bracket);
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
        (EntryHead::Name, name) if std::str::from_utf8(name).is_ok_and(is_identifier) => {
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
