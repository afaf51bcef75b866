//! What every subcommand prints the same way: errors on standard error with their causes, and
//! colour only where it can be seen.
//!
//! Output goes through `anstream`, which drops the styles unless the stream is a terminal, and
//! always when `NO_COLOR` is set (`CLICOLOR_FORCE` keeps them through a pipe), the rules clap's
//! own help and errors follow.

use std::error::Error;

use anstyle::{AnsiColor, Style};

/// An error's heading.
pub const ERROR: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();
/// A result that is good news.
pub const GOOD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)))
    .bold();
/// A warning's heading.
pub const WARNING: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)))
    .bold();
/// A heading or a name to pick out.
pub const STRONG: Style = Style::new().bold();

/// Prints `error` on standard error as `error: COMMAND: ...`, then each of its causes that the
/// message above does not already include, one per `caused by:` line.
pub fn print_error(command: &str, error: &dyn Error) {
    print_error_text(command, &chain(error));
}

/// Prints a message already put together (`chain` of an error) as `error: COMMAND: ...`.
pub fn print_error_text(command: &str, text: &str) {
    crate::streams::eprint(&format!("{ERROR}error{ERROR:#}: {command}: {text}\n"));
}

/// Prints `text` on standard error as `warning: COMMAND: ...`.
pub fn print_warning(command: &str, text: &str) {
    crate::streams::eprint(&format!("{WARNING}warning{WARNING:#}: {command}: {text}\n"));
}

/// `error` and each of its causes (`Error::source`) that the text before does not already hold,
/// one per indented `caused by:` line: what error messages of every command show, and what
/// `--json` reports carry.
pub fn chain(error: &dyn Error) -> String {
    let mut text = indent(&error.to_string());
    let mut cause = error.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(said.trim_end()) {
            text.push_str("\n  caused by: ");
            text.push_str(&indent(&said));
        }
        cause = next.source();
    }
    text
}

/// `text` with every line after the first indented, to sit under its heading.
fn indent(text: &str) -> String {
    text.trim_end().replace('\n', "\n    ")
}
