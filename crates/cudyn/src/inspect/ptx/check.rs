//! The check of PTX text before a load: [`parse`](super::parse)'s verdicts in one pass over the
//! tokens, without building the module.

use super::tokens::Tokens;
use super::{line_of, text, ParseError};

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
    start: &'a str,
    /// Whether a `;` or `{` was seen: what makes a block is decided before it.
    head_done: bool,
    /// A function body or `.section`: it ends with its closing brace.
    block: bool,
    depth: usize,
    /// `.global` or `.const` outside braces.
    space: bool,
}

/// Checks that PTX reads to its end as [`parse`](super::parse) reads it (no comment, string, bracket or
/// statement left open) without building the module: one pass over the tokens, nothing
/// allocated but the stack of open brackets. The errors are [`parse`](super::parse)'s: one of the tokenizer
/// first, else the first bracket that does not pair up, else the first statement the text ends
/// inside.
pub(crate) fn check(bytes: &[u8]) -> Result<Outline, ParseError> {
    let text = text(bytes).ok_or_else(|| {
        ParseError::new(
            "PTX text",
            "it must be UTF-8 text with no NUL before its end",
        )
    })?;
    let place = |token: &str| format!("PTX line {}", line_of(text, token));
    let mut outline = Outline::default();
    let mut open: Vec<&str> = Vec::new();
    let mut bracket_error = None;
    let mut at = At::Top;
    let mut tokens = Tokens::new(text);
    // Inside braces only brackets matter, to the brackets' check and to where the statement ends.
    while let Some(token) = tokens.advance(matches!(at, At::Statement(s) if s.depth > 0)) {
        let token = token?;
        if bracket_error.is_none() {
            let expected = match token {
                "{" | "(" | "[" => {
                    open.push(token);
                    None
                }
                "}" => Some("{"),
                ")" => Some("("),
                "]" => Some("["),
                _ => None,
            };
            if expected.is_some() && open.pop() != expected {
                bracket_error = Some(ParseError::new(
                    place(token),
                    format!("`{token}` closes nothing"),
                ));
            }
        }
        step(&mut at, token, &mut outline);
    }
    if let Some(error) = bracket_error {
        return Err(error);
    }
    if let Some(first) = open.first() {
        return Err(ParseError::new(
            place(first),
            format!("`{first}` is never closed: the text ends inside it (is the file cut short?)"),
        ));
    }
    match at {
        At::Statement(statement) => Err(ParseError::new(
            place(statement.start),
            "the text ends inside this statement (is the file cut short?)",
        )),
        At::Value { version: true } => {
            // `.version` last, with no value: as `parse` reads it, the module has none.
            outline.version = false;
            Ok(outline)
        }
        _ => Ok(outline),
    }
}

/// The top-level reading of [`parse`](super::parse), one token at a time: `at` moves on past `token`.
fn step<'a>(at: &mut At<'a>, token: &'a str, outline: &mut Outline) {
    match at {
        At::Top => {
            *at = match token {
                ".version" => At::Value { version: true },
                ".address_size" => At::Value { version: false },
                ".target" => At::Target,
                ".file" => At::FileField,
                _ => {
                    let mut begun = Statement {
                        start: token,
                        head_done: false,
                        block: false,
                        depth: 0,
                        space: false,
                    };
                    if statement(&mut begun, token, outline) {
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
        At::TargetList if token == "," => *at = At::Target,
        At::FileField => *at = At::FileList,
        At::FileList if token == "," => *at = At::FileField,
        At::TargetList | At::FileList => {
            *at = At::Top;
            step(at, token, outline);
        }
        At::Statement(current) => {
            if statement(current, token, outline) {
                *at = At::Top;
            }
        }
    }
}

/// `token` inside `statement`: whether the statement ends with it (after a `;` outside braces,
/// or the closing brace of a block).
fn statement(statement: &mut Statement<'_>, token: &str, outline: &mut Outline) -> bool {
    let outside = statement.depth == 0;
    match token {
        ".entry" | ".func" | ".section" if !statement.head_done => statement.block = true,
        ".global" | ".const" if outside => statement.space = true,
        _ => {}
    }
    if matches!(token, ";" | "{") {
        statement.head_done = true;
    }
    let ended = match token {
        "{" => {
            statement.depth += 1;
            false
        }
        "}" => {
            statement.depth = statement.depth.saturating_sub(1);
            statement.depth == 0 && statement.block
        }
        ";" => outside,
        _ => false,
    };
    if ended {
        outline.variables |= statement.space && !statement.block;
    }
    ended
}
