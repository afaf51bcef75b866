//! PTX: version, target, address size, entries with their typed parameters, and module-scope
//! variables.
//!
//! A small tokenizer skips comments and strings, then the module is read statement by statement at
//! the top level; function bodies are skipped by matching braces. Unknown directives are skipped,
//! so a newer PTX version still lists its entries; a parameter or variable of a type cudyn does
//! not know is listed with an unknown size. Text that ends inside a comment, a string, a
//! bracket or a statement (a file cut short) is an error.

mod check;
mod detect;
mod tokens;

pub(crate) use check::{validate, validate_text};
use detect::text;
pub(crate) use detect::{looks_like_ptx, recognized_text};
use tokens::tokenize;

use crate::ctype::CType;
use crate::param::ParamLayout;
use crate::parse_error::{ParseError, Problem};
use crate::symbols::demangle;

/// What a PTX module declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PtxModule {
    /// The PTX ISA version (`.version`), e.g. "9.0".
    pub version: Option<String>,
    /// The `.target` list, e.g. `["sm_90"]`.
    pub target: Vec<String>,
    /// `.address_size`, 32 or 64.
    pub address_size: Option<u32>,
    /// Kernels (`.entry`), in order.
    pub entries: Vec<PtxEntry>,
    /// Module-scope `.global` and `.const` variables.
    pub variables: Vec<PtxVariable>,
}

/// A kernel of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PtxEntry {
    /// The entry's name (mangled for C++ kernels).
    pub name: String,
    /// The C++ name, when `name` is mangled.
    pub demangled: Option<String>,
    /// Its parameters, in order.
    pub params: Vec<PtxParam>,
}

/// One `.param` of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PtxParam {
    /// The parameter's name.
    pub name: String,
    /// Its element type, e.g. ".u64" or ".b8" (or one cudyn does not know, e.g. ".texref").
    pub ty: String,
    /// The array length for `name[N]`, else 1; `None` when it is not a number.
    pub count: Option<u64>,
    /// An explicit `.align`.
    pub align: Option<u32>,
    /// Size in bytes, when the type and count are known.
    pub size: Option<u64>,
    /// The state space a `.ptr` parameter points into (e.g. ".global").
    pub pointee_space: Option<String>,
}

/// A module-scope variable.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PtxVariable {
    /// Its name.
    pub name: String,
    /// ".global" or ".const".
    pub space: String,
    /// Its element type.
    pub ty: String,
    /// Size in bytes, when known.
    pub size: Option<u64>,
}

impl PtxParam {
    /// What the declaration says of the parameter's C type: a width and float or integer,
    /// never signedness (see [`CType::from_ptx`]).
    pub fn c_type(&self) -> Option<CType> {
        CType::from_ptx(&self.ty, self.count, self.pointee_space.as_deref())
    }
}

impl PtxModule {
    /// The entry named `name`, if the module declares it.
    pub fn entry(&self, name: &str) -> Option<&PtxEntry> {
        self.entries.iter().find(|entry| entry.name == name)
    }
}

impl PtxEntry {
    /// The parameter buffer layout the PTX ABI gives these parameters: each at the next offset
    /// aligned to its `.align` (or its element size). `None` when a type's size is unknown;
    /// [`PtxEntry::param_layout`] says which.
    pub fn layout(&self) -> Option<Vec<ParamLayout>> {
        self.param_layout().ok()
    }

    /// [`PtxEntry::layout`], or an error naming the first parameter whose size or alignment
    /// cudyn does not know (a type it does not know, an array length that is not a number).
    pub fn param_layout(&self) -> Result<Vec<ParamLayout>, ParseError> {
        let mut offset: u64 = 0;
        let mut out = Vec::with_capacity(self.params.len());
        for (index, param) in self.params.iter().enumerate() {
            let error = |problem: Problem, message: String| {
                let place = format!(
                    "PTX entry {}, parameter {index} ({})",
                    self.name, param.name
                );
                ParseError::new(place, problem, message)
            };
            let unknown = || {
                error(
                    Problem::Unsupported,
                    format!(
                        "the size of its type `{}` is not known, so neither is the layout of the \
                     parameters",
                        param.ty
                    ),
                )
            };
            let size = param.size.ok_or_else(unknown)?;
            let align =
                u64::from(param.align.unwrap_or(0)).max(type_size(&param.ty).ok_or_else(unknown)?);
            let placed = offset
                .checked_next_multiple_of(align.max(1))
                .and_then(|start| Some((start, start.checked_add(size)?)))
                .and_then(|(start, end)| {
                    let layout = ParamLayout {
                        offset: usize::try_from(start).ok()?,
                        size: usize::try_from(size).ok()?,
                    };
                    Some((layout, end))
                });
            let (layout, end) = placed.ok_or_else(|| {
                error(
                    Problem::Damaged,
                    "its offset or size does not fit in memory".to_owned(),
                )
            })?;
            out.push(layout);
            offset = end;
        }
        Ok(out)
    }
}

/// Reads a PTX module.
pub fn parse(bytes: &[u8]) -> Result<PtxModule, ParseError> {
    let text = text(bytes).ok_or_else(not_text)?;
    let tokens = tokenize(text)?;
    check_brackets(text, &tokens)?;
    let mut module = PtxModule::default();
    let mut at = 0;
    while at < tokens.len() {
        let start = at;
        match tokens[at] {
            ".version" => {
                module.version = tokens.get(at + 1).map(|v| v.to_string());
                at += 2;
            }
            ".target" => {
                at += 1;
                while let Some(target) = tokens.get(at) {
                    module.target.push(target.to_string());
                    at += 1;
                    if tokens.get(at) != Some(&",") {
                        break;
                    }
                    at += 1;
                }
            }
            ".address_size" => {
                module.address_size = tokens.get(at + 1).and_then(|v| v.parse().ok());
                at += 2;
            }
            // `.file 1 "name"[, timestamp, size]` (debug information), with no `;`; the
            // tokenizer has dropped the string.
            ".file" => {
                at += 2;
                while tokens.get(at) == Some(&",") {
                    at += 2;
                }
            }
            _ => {
                let end = statement_end(&tokens, at).ok_or_else(|| {
                    ParseError::new(
                        format!("PTX line {}", line_of(text, tokens[at])),
                        Problem::Truncated,
                        ENDS_INSIDE_STATEMENT,
                    )
                })?;
                read_statement(&tokens[at..end], &mut module).map_err(|problem| {
                    let place = format!("PTX line {}", line_of(text, tokens[at]));
                    ParseError::new(place, Problem::Damaged, problem)
                })?;
                at = end;
            }
        }
        at = at.max(start + 1);
    }
    Ok(module)
}

/// The line (from 1) where `token`, a slice of `text`, starts.
fn line_of(text: &str, token: &(impl AsRef<[u8]> + ?Sized)) -> usize {
    let offset = (token.as_ref().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Checks that braces, parentheses and square brackets pair up: a file cut inside a function
/// body still has its opening brace.
fn check_brackets(text: &str, tokens: &[&str]) -> Result<(), ParseError> {
    let mut open: Vec<&str> = Vec::new();
    for &token in tokens {
        let expected = match token {
            "{" | "(" | "[" => {
                open.push(token);
                continue;
            }
            "}" => "{",
            ")" => "(",
            "]" => "[",
            _ => continue,
        };
        if open.pop() != Some(expected) {
            return Err(ParseError::new(
                format!("PTX line {}", line_of(text, token)),
                Problem::Damaged,
                format!("`{token}` closes nothing"),
            ));
        }
    }
    match open.first() {
        Some(first) => Err(ParseError::new(
            format!("PTX line {}", line_of(text, first)),
            Problem::Truncated,
            format!("`{first}` is never closed: the text ends inside it (is the file cut short?)"),
        )),
        None => Ok(()),
    }
}

/// Where the top-level statement starting at `at` ends: after its `;`, or after the balanced
/// body of a function or of a `.section` (debug information); a variable's `= { ... }`
/// initializer does not end it. `None` when the
/// tokens end first.
fn statement_end(tokens: &[&str], mut at: usize) -> Option<usize> {
    let is_block = tokens[at..]
        .iter()
        .take_while(|&&t| t != ";" && t != "{")
        .any(|&t| matches!(t, ".entry" | ".func" | ".section"));
    let mut depth = 0usize;
    while let Some(&token) = tokens.get(at) {
        at += 1;
        match token {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 && is_block {
                    return Some(at);
                }
            }
            ";" if depth == 0 => return Some(at),
            _ => {}
        }
    }
    None
}

/// Why text cannot be PTX, as [`parse`] and the check say it.
fn not_text() -> ParseError {
    ParseError::new(
        "PTX text",
        Problem::Damaged,
        "it must be UTF-8 text with no NUL before its end",
    )
}

/// Where the text ends, as [`parse`] and the check say it, when that is inside a statement.
const ENDS_INSIDE_STATEMENT: &str = "the text ends inside this statement (is the file cut short?)";

/// Why an `.entry` declaration cannot be read, as [`parse`] and the check say it.
const ENTRY_WITHOUT_NAME: &str = ".entry is not followed by the kernel's name";
const ENTRY_PARAMS_OPEN: &str =
    "the parameter list of this .entry does not close before the statement ends";

/// Reads one top-level statement into `module`: an entry (`.entry` in its head, before the first
/// `;` or `{`), or variables; other statements are skipped. An error when an entry's
/// declaration cannot be read, which would leave it out.
fn read_statement(statement: &[&str], module: &mut PtxModule) -> Result<(), &'static str> {
    let head = statement.iter().take_while(|&&t| t != ";" && t != "{");
    if let Some(entry) = head.into_iter().position(|&t| t == ".entry") {
        module.entries.push(read_entry(&statement[entry + 1..])?);
        return Ok(());
    }
    let statement = without_attributes(statement);
    let declarators = split_declarators(&statement);
    let Some(first) = declarators.first() else {
        return Ok(());
    };
    let Some(space) = first
        .iter()
        .find(|&&t| t == ".global" || t == ".const")
        .filter(|_| !first.contains(&".func") && !first.contains(&"("))
    else {
        return Ok(());
    };
    // `.global .u32 a, b[4];` declares each name with the first one's qualifiers and type.
    let qualifiers = first
        .iter()
        .position(|t| !t.starts_with('.') && is_identifier(t))
        .map_or(&first[..], |name| &first[..name]);
    for (index, declarator) in declarators.iter().enumerate() {
        let tokens = if index == 0 {
            declarator.clone()
        } else {
            [qualifiers, declarator].concat()
        };
        if let Some(declared) = read_declaration(&tokens) {
            module.variables.push(PtxVariable {
                name: declared.name,
                space: space.to_string(),
                size: declared.size,
                ty: declared.ty,
            });
        }
    }
    Ok(())
}

/// `statement` without its `.attribute(...)` groups (`.global .attribute(.managed) .u32 flag;`
/// declares a `__managed__` variable), whose parentheses would read as a function's.
fn without_attributes<'a>(statement: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(statement.len());
    let mut tokens = statement.iter().copied().peekable();
    while let Some(token) = tokens.next() {
        if token == ".attribute" && tokens.peek() == Some(&"(") {
            tokens.by_ref().find(|&t| t == ")");
        } else {
            out.push(token);
        }
    }
    out
}

/// The declarators of a declaration, split at its top-level commas, each without its
/// initializer or the closing `;`.
fn split_declarators<'a>(statement: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0usize;
    let mut initializer = false;
    for &token in statement {
        match token {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push(Vec::new());
                initializer = false;
                continue;
            }
            ";" if depth == 0 => break,
            "=" if depth == 0 => initializer = true,
            _ => {}
        }
        if !initializer && depth == 0 {
            if let Some(last) = out.last_mut() {
                last.push(token);
            }
        }
    }
    out
}

/// Reads `.entry name(params)`; every declared parameter is kept, one of an unknown type with an
/// unknown size.
fn read_entry(tokens: &[&str]) -> Result<PtxEntry, &'static str> {
    let name = tokens
        .first()
        .filter(|&&name| is_identifier(name))
        .ok_or(ENTRY_WITHOUT_NAME)?
        .to_string();
    let mut params = Vec::new();
    if tokens.get(1) == Some(&"(") {
        let close = tokens
            .iter()
            .position(|&t| t == ")")
            .ok_or(ENTRY_PARAMS_OPEN)?;
        let declarations = tokens[2..close]
            .split(|&t| t == ",")
            .filter(|param| !param.is_empty());
        for param in declarations {
            let Some(declared) = read_declaration(param) else {
                // No name at all: a declaration cudyn cannot read; its size is unknown.
                params.push(PtxParam {
                    name: String::new(),
                    ty: String::new(),
                    count: None,
                    align: None,
                    size: None,
                    pointee_space: None,
                });
                continue;
            };
            let pointee_space = param
                .iter()
                .position(|&t| t == ".ptr")
                .and_then(|i| param.get(i + 1))
                .filter(|t| is_space(t))
                .map(|t| t.to_string());
            params.push(PtxParam {
                name: declared.name,
                ty: declared.ty,
                count: declared.count,
                align: declared.align,
                size: declared.size,
                pointee_space,
            });
        }
    }
    Ok(PtxEntry {
        demangled: demangle(&name),
        name,
        params,
    })
}

struct Declaration {
    name: String,
    ty: String,
    count: Option<u64>,
    align: Option<u32>,
    size: Option<u64>,
}

/// Directives of a declaration that are not its type.
const QUALIFIERS: [&str; 12] = [
    ".param", ".global", ".const", ".shared", ".local", ".align", ".ptr", ".visible", ".extern",
    ".weak", ".common", ".reg",
];

/// `[.param|.global|...] [.align N] [.ptr .space .align N] .type name[N]`; `None` without a
/// name. A type cudyn does not know is kept, with no size.
fn read_declaration(tokens: &[&str]) -> Option<Declaration> {
    let mut align = None;
    let mut ty = None;
    let mut name = None;
    let mut count = Some(1u64);
    let mut at = 0;
    while let Some(&token) = tokens.get(at) {
        match token {
            ".align" => {
                // A `.ptr`'s own `.align` is the pointee's, not the parameter's.
                let pointee = tokens[..at].contains(&".ptr");
                let value = tokens.get(at + 1).and_then(|v| v.parse().ok());
                if !pointee {
                    align = value;
                }
                at += 1;
            }
            "[" => {
                count = tokens.get(at + 1).and_then(|v| v.parse().ok());
                at += 2;
            }
            // A known type wins over other directives (e.g. `.v4` before `.f32`).
            _ if token.starts_with('.')
                && !QUALIFIERS.contains(&token)
                && ty.is_none_or(|found| type_size(found).is_none()) =>
            {
                ty = Some(token)
            }
            _ if !token.starts_with('.') && is_identifier(token) => name = Some(token),
            _ => {}
        }
        at += 1;
    }
    let ty = ty.unwrap_or_default();
    Some(Declaration {
        name: name?.to_string(),
        ty: ty.to_string(),
        count,
        align,
        size: type_size(ty).and_then(|size| size.checked_mul(count?)),
    })
}

fn is_space(token: &str) -> bool {
    matches!(
        token,
        ".global" | ".const" | ".shared" | ".local" | ".param"
    )
}

fn is_identifier(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%'))
}

/// Size in bytes of a fundamental PTX type.
fn type_size(ty: &str) -> Option<u64> {
    let (base, lanes) = match ty.rsplit_once('x') {
        Some((base, "2")) => (base, 2),
        Some((base, "4")) => (base, 4),
        _ => (ty, 1),
    };
    let bits: u64 = match base {
        ".f16" | ".bf16" => 16,
        ".e4m3" | ".e5m2" => 8,
        _ => base
            .strip_prefix(".b")
            .or_else(|| base.strip_prefix(".u"))
            .or_else(|| base.strip_prefix(".s"))
            .or_else(|| base.strip_prefix(".f"))?
            .parse()
            .ok()
            .filter(|bits| matches!(bits, 8 | 16 | 32 | 64 | 128))?,
    };
    Some(bits / 8 * lanes)
}

#[cfg(test)]
mod tests {
    use super::check::check;
    use super::*;

    const PTX: &str = "//\n// a comment with .entry fake(\n.version 8.5\n.target sm_80, debug\n\
        .address_size 64\n.global .align 4 .b8 table[12] = {1, 2, 3};\n\
        .const .align 8 .f64 scale;\n\
        .visible .entry k(\n  .param .u8 k_param_0,\n  .param .align 8 .b8 k_param_1[24],\n\
        .param .u64 .ptr .global .align 16 k_param_2\n)\n{\n  ret;\n}\n";

    #[test]
    fn reads_directives_entries_and_variables() {
        let module = parse(PTX.as_bytes()).unwrap();
        assert_eq!(module.version.as_deref(), Some("8.5"));
        assert_eq!(module.target, ["sm_80", "debug"]);
        assert_eq!(module.address_size, Some(64));
        assert_eq!(module.entries.len(), 1);
        let entry = &module.entries[0];
        assert_eq!(entry.name, "k");
        assert_eq!(entry.params[2].pointee_space.as_deref(), Some(".global"));
        let layout: Vec<_> = entry
            .layout()
            .unwrap()
            .iter()
            .map(|p| (p.offset, p.size))
            .collect();
        assert_eq!(layout, [(0, 1), (8, 24), (32, 8)]);
        let variables: Vec<_> = module
            .variables
            .iter()
            .map(|v| (v.name.as_str(), v.space.as_str(), v.size))
            .collect();
        assert_eq!(
            variables,
            [("table", ".global", Some(12)), ("scale", ".const", Some(8))]
        );
    }

    #[test]
    fn managed_variables_are_listed_despite_their_attribute() {
        let ptx = ".version 9.0\n.target sm_90\n.address_size 64\n\
            .global .attribute(.managed) .align 4 .u32 flag;\n";
        let module = parse(ptx.as_bytes()).unwrap();
        let variables: Vec<_> = module
            .variables
            .iter()
            .map(|v| (v.name.as_str(), v.space.as_str(), v.size))
            .collect();
        assert_eq!(variables, [("flag", ".global", Some(4))]);
    }

    const HELLO: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\
        .visible .entry helloWorld()\n{\n  ret;\n}\n";

    #[test]
    fn an_entry_without_parameters_is_listed() {
        let module = parse(HELLO.as_bytes()).unwrap();
        let names: Vec<&str> = module.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["helloWorld"]);
        assert!(module.entries[0].params.is_empty());
        assert_eq!(module.entries[0].layout(), Some(Vec::new()));
    }

    #[test]
    fn a_parameter_of_an_unknown_type_keeps_its_entry_with_an_unknown_layout() {
        let ptx = ".version 9.0\n.target sm_90\n\
            .entry sample(.param .texref tex, .param .u32 n)\n{\n  ret;\n}\n\
            .global .texref table;\n";
        let module = parse(ptx.as_bytes()).unwrap();
        assert_eq!(module.entries.len(), 1, "{module:?}");
        let params = &module.entries[0].params;
        let described: Vec<(&str, &str, Option<u64>)> = params
            .iter()
            .map(|p| (p.name.as_str(), p.ty.as_str(), p.size))
            .collect();
        assert_eq!(
            described,
            [("tex", ".texref", None), ("n", ".u32", Some(4))]
        );
        assert_eq!(module.entries[0].layout(), None);
        let error = module.entries[0].param_layout().unwrap_err();
        assert_eq!(error.place, "PTX entry sample, parameter 0 (tex)");
        assert!(error.message.contains("`.texref` is not known"), "{error}");
        // The same for module-scope variables.
        assert_eq!(module.variables.len(), 1, "{module:?}");
        assert_eq!(module.variables[0].size, None);
    }

    #[test]
    fn every_name_of_a_declaration_list_is_a_variable() {
        let ptx = ".version 9.0\n.target sm_90\n\
            .global .align 4 .u32 first = 1, second[4] = {1, 2, 3, 4}, third;\n";
        let module = parse(ptx.as_bytes()).unwrap();
        let variables: Vec<(&str, Option<u64>)> = module
            .variables
            .iter()
            .map(|v| (v.name.as_str(), v.size))
            .collect();
        assert_eq!(
            variables,
            [("first", Some(4)), ("second", Some(16)), ("third", Some(4))]
        );
    }

    #[test]
    fn ptx_cut_inside_an_entry_is_an_error() {
        let cut = &PTX[..PTX.find("ret;").unwrap()];
        let error = parse(cut.as_bytes()).unwrap_err();
        assert!(error.message.contains("never closed"), "{error}");
        assert_eq!(error.place, "PTX line 13", "{error}");
        let cut = &PTX[..PTX.find("k_param_1").unwrap()];
        assert!(parse(cut.as_bytes()).is_err());
        let cut = &PTX[..PTX.find("scale;").unwrap()];
        let error = parse(cut.as_bytes()).unwrap_err();
        assert!(error.message.contains("inside this statement"), "{error}");
    }

    #[test]
    fn an_entry_declaration_that_cannot_be_read_is_an_error_not_a_missing_entry() {
        for (ptx, expected) in [
            (
                ".version 9.0\n.target sm_90\n.entry first() { ret; }\n.entry ;\n",
                ("PTX line 4", "not followed by the kernel's name"),
            ),
            (
                ".version 9.0\n.target sm_90\n.entry k(.param .u32 n; ) { ret; }\n",
                ("PTX line 3", "does not close"),
            ),
        ] {
            let error = parse(ptx.as_bytes()).unwrap_err();
            assert_eq!(error.place, expected.0, "{error}");
            assert!(error.message.contains(expected.1), "{error}");
            // The check before a load says the same.
            assert_eq!(check(ptx.as_bytes()).unwrap_err(), error);
        }
        // Only an `.entry` in a statement's head declares one.
        let ptx = ".version 9.0\n.target sm_90\n.func f() { .entry ; }\n.entry e() { ret; }\n";
        let names: Vec<String> = parse(ptx.as_bytes())
            .unwrap()
            .entries
            .into_iter()
            .map(|entry| entry.name)
            .collect();
        assert_eq!(names, ["e"]);
    }

    #[test]
    fn debug_information_directives_are_whole_statements() {
        let ptx = ".version 9.0\n.target sm_90\n.visible .entry k()\n{\n  ret;\n}\n\
            .file 1 \"/src/k.cu\", 1700000000, 1234\n\
            .section .debug_abbrev\n{\n.b8 17\n.b8 0\n}\n\
            .section .debug_macinfo { .b8 0 }\n";
        let module = parse(ptx.as_bytes()).unwrap();
        assert_eq!(module.entries.len(), 1);
        let cut = &ptx[..ptx.find(".b8 0\n}").unwrap()];
        assert!(parse(cut.as_bytes()).is_err());
    }

    #[test]
    fn ptx_ending_inside_a_comment_is_an_error() {
        let error = parse(b".version 9.0\n.target sm_90\n/* cut").unwrap_err();
        assert!(error.message.contains("comment"), "{error}");
    }

    /// `check` reads as `parse` does: the same verdict and error on every prefix of `text`, and
    /// an outline that agrees with the module.
    fn check_agrees_with_parse_on_every_cut(text: &str) {
        for end in 0..=text.len() {
            let Some(cut) = text.get(..end) else {
                continue;
            };
            match (check(cut.as_bytes()), parse(cut.as_bytes())) {
                (Ok(outline), Ok(module)) => {
                    assert_eq!(outline.version, module.version.is_some(), "{cut:?}");
                    assert_eq!(outline.target, !module.target.is_empty(), "{cut:?}");
                    assert_eq!(outline.variables, !module.variables.is_empty(), "{cut:?}");
                }
                (Err(checked), Err(parsed)) => assert_eq!(checked, parsed, "{cut:?}"),
                (checked, parsed) => panic!("{cut:?}: check {checked:?}, parse {parsed:?}"),
            }
        }
    }

    #[test]
    fn the_check_before_a_load_reads_ptx_as_the_parser_does() {
        let texts = [
            PTX,
            HELLO,
            ".version 9.0\n.target sm_90\n.address_size 64\n\
             .global .attribute(.managed) .align 4 .u32 flag;\n",
            ".version 9.0\n.target sm_90\n.visible .entry k()\n{\n  ret;\n}\n\
             .file 1 \"/src/k.cu\", 1700000000, 1234\n\
             .section .debug_abbrev\n{\n.b8 17\n.b8 0\n}\n\
             .section .debug_macinfo { .b8 0 }\n",
            ".version 9.0\n.target sm_90, debug\n/* a comment */\n\
             .extern .func (.param .b32 r) helper (.param .b64 p);\n\
             .global .align 4 .u32 first = 1, second[4] = {1, 2, 3, 4};\n\
             .visible .func (.param .b32 r) helper (.param .b64 p)\n{\n  ld.global.u32 %r1, [p];\n}\n",
            ".target sm_90\n.version",
            "{ ( } )\n.version 9.0 .target sm_90",
            // Entries whose declaration cannot be read, then one that can.
            ".version 9.0\n.target sm_90\n.entry ;\n.entry k(.param .u32 n; ) { ret; }\n\
             .entry { }\n.entry j .maxntid 1 { ret; }\n.entry m( [ { } ] )\n",
            ".version 9.0\n.target sm_90\n.entry k(.param .u32 n; ) { ret; }\n.entry ;\n",
            ".version 9.0\n.target sm_90\n.func f() { .entry ; }\n.visible .entry e(.param .u32 n)\n{\n ret;\n}\n",
        ];
        for text in texts {
            check_agrees_with_parse_on_every_cut(text);
        }
        // And NVRTC's own output, with variables, a device function and debug information.
        let nvrtc = crate::Program::new(
            "__device__ float total; __constant__ int scale[4];\n\
             __device__ float twice(float x) { return 2 * x + scale[1]; }\n\
             extern \"C\" __global__ void k(const float *x) { atomicAdd(&total, twice(x[0])); }",
        )
        .arch(crate::compile::Arch::new(9, 0))
        .output(crate::Output::Ptx)
        .option("-lineinfo")
        .compile()
        .expect("NVRTC compiles (run the tests with the CUDA wheels' venv)");
        let nvrtc = std::str::from_utf8(nvrtc.code())
            .unwrap()
            .trim_end_matches('\0');
        check_agrees_with_parse_on_every_cut(nvrtc);
        assert!(check(nvrtc.as_bytes()).unwrap().variables);
        // Functions, entries and debug sections are not variables; `.global` inside braces
        // neither.
        let outline = check(texts[4].as_bytes()).unwrap();
        assert!(outline.variables && outline.version && outline.target);
        assert!(!check(HELLO.as_bytes()).unwrap().variables);
        assert!(!check(texts[3].as_bytes()).unwrap().variables);
    }

    #[test]
    fn text_with_a_nul_inside_is_not_ptx() {
        assert!(looks_like_ptx(b".version 9.0\n.target sm_90\n\0"));
        assert!(!looks_like_ptx(b".version 9.0\0\n.target sm_90\n"));
    }
}
