//! Warnings the library prints on standard error. They never fail or panic the program they run
//! in: where standard error cannot be written (a full disk, a closed pipe), the warning is lost
//! and the call goes on.

use std::io::Write as _;

/// Prints `message` and a line end on standard error, ignoring a failure to write it.
pub(crate) fn print(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// [`print`] with `format!`'s arguments: `eprintln!` that cannot panic.
macro_rules! warning {
    ($($arg:tt)*) => {
        $crate::warn::print(format_args!($($arg)*))
    };
}

pub(crate) use warning;
