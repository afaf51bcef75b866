//! Standard output and standard error as every command writes them, the way ripgrep and
//! coreutils do:
//!
//! - Every write to standard output is checked, and the stream is flushed before the command
//!   ends. A closed pipe (`cudyn inspect ... | head -1`: the reader has all it wanted) ends the
//!   command at once and quietly, with status 0, as ripgrep does. Any other failure (a full disk,
//!   `> /dev/full`, a device's error) ends it at once with a one-line error on standard error
//!   and status 1: output that was asked for and not delivered is a failure.
//! - A write to standard error never fails the command: where standard error cannot be written
//!   there is no one to tell, and the exit status still says how the command ended.
//!
//! Styles (colour, bold) are dropped where they cannot be seen: see [`crate::terminal`].

use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::OnceLock;

use anstream::ColorChoice;

/// The name of the command running (`cudyn compile`), for the error about standard output.
static COMMAND: OnceLock<String> = OnceLock::new();

/// Names the command whose output this is, for the error when it cannot be written.
pub fn set_command(command: &str) {
    let _ = COMMAND.set(format!("cudyn {command}"));
}

/// Whether styles are shown on standard output: decided once, as `anstream` decides.
fn stdout_choice() -> ColorChoice {
    static CHOICE: OnceLock<ColorChoice> = OnceLock::new();
    *CHOICE.get_or_init(|| anstream::AutoStream::choice(&io::stdout()))
}

/// Whether styles are shown on standard error.
fn stderr_choice() -> ColorChoice {
    static CHOICE: OnceLock<ColorChoice> = OnceLock::new();
    *CHOICE.get_or_init(|| anstream::AutoStream::choice(&io::stderr()))
}

/// Writes `text` to standard output, its styles dropped where they cannot be seen. A failure
/// ends the command (see the module documentation).
pub fn print(text: &str) {
    write_stdout(|stdout| {
        anstream::AutoStream::new(stdout, stdout_choice()).write_all(text.as_bytes())
    });
}

/// Writes `bytes` to standard output as they are (device code for `-o -`). A failure ends the
/// command (see the module documentation).
pub fn print_bytes(bytes: &[u8]) {
    write_stdout(|stdout| stdout.write_all(bytes).and_then(|()| stdout.flush()));
}

/// Writes `text` to standard error, its styles dropped where they cannot be seen; a failure is
/// ignored (see the module documentation).
pub fn eprint(text: &str) {
    let mut stream = anstream::AutoStream::new(io::stderr().lock(), stderr_choice());
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

/// Flushes standard output, then gives `status`; a failure ends the command as a failed write
/// does. Every command ends through here.
pub fn finish(status: ExitCode) -> ExitCode {
    write_stdout(|stdout| stdout.flush());
    status
}

/// Runs `write` on standard output, and ends the command if it fails.
fn write_stdout(write: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) {
    if let Err(error) = write(&mut io::stdout().lock()) {
        stdout_failed(&error);
    }
}

/// Ends the command because standard output failed with `error`.
fn stdout_failed(error: &io::Error) -> ! {
    if error.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let command = COMMAND.get().map_or("cudyn", String::as_str);
    crate::terminal::print_error_text(
        command,
        &format!("cannot write to standard output: {error}"),
    );
    std::process::exit(1);
}

/// Prints a line on standard output, `format!`-style, styles as [`print`] shows them.
macro_rules! outln {
    () => {
        $crate::streams::print("\n")
    };
    ($($arg:tt)*) => {
        $crate::streams::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Prints a line on standard error, `format!`-style; never fails.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::streams::eprint(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, outln};
