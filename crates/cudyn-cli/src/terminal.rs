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
    anstream::eprintln!(
        "{ERROR}error{ERROR:#}: {command}: {}",
        indent(&error.to_string())
    );
    let mut shown = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        let text = error.to_string();
        if !shown.contains(&text) {
            anstream::eprintln!("  caused by: {}", indent(&text));
            shown.push_str(&text);
        }
        cause = error.source();
    }
}

/// `text` with every line after the first indented, to sit under its heading.
fn indent(text: &str) -> String {
    text.trim_end().replace('\n', "\n    ")
}
