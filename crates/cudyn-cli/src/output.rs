//! What the commands that write device code share: where an output goes (a file, or standard
//! output for `-o -`), the refusal to overwrite an input, errors with their causes, JSON.

use std::collections::HashSet;
use std::error::Error;
use std::fmt;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use cudyn::inspect::Module;
use cudyn::Image;

/// An error of a command: a message of its own with an optional cause, or cudyn's.
#[derive(Debug)]
pub enum CliError {
    /// Said by the command.
    Message {
        /// What went wrong and what to do.
        message: String,
        /// The failure behind it.
        cause: Option<Box<dyn Error + Send + Sync>>,
        /// Whether the command line itself is at fault (exit status 2), not what it asked for.
        usage: bool,
    },
    /// Said by the library.
    Library(cudyn::Error),
}

impl CliError {
    /// An error with no cause behind it.
    pub fn new(message: impl Into<String>) -> Self {
        CliError::Message {
            message: message.into(),
            cause: None,
            usage: false,
        }
    }

    /// A usage error: the command line asks for something contradictory or malformed.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError::Message {
            message: message.into(),
            cause: None,
            usage: true,
        }
    }

    /// This error, caused by `cause`.
    pub fn source(self, cause: impl Error + Send + Sync + 'static) -> Self {
        match self {
            CliError::Message { message, usage, .. } => CliError::Message {
                message,
                cause: Some(Box::new(cause)),
                usage,
            },
            library => library,
        }
    }

    /// The exit status: 2 for a usage error, else 1.
    pub fn exit_code(&self) -> std::process::ExitCode {
        match self {
            CliError::Message { usage: true, .. } => std::process::ExitCode::from(2),
            _ => std::process::ExitCode::FAILURE,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Message { message, .. } => f.write_str(message),
            CliError::Library(error) => error.fmt(f),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CliError::Message { cause, .. } => cause.as_deref().map(|cause| cause as _),
            CliError::Library(error) => error.source(),
        }
    }
}

impl From<cudyn::Error> for CliError {
    fn from(error: cudyn::Error) -> Self {
        CliError::Library(error)
    }
}

/// `error`, or, when it is that no target architecture is known (no GPU, no `--arch`), the
/// fix first in the command's terms: the library's text names its own setters. `verb` says what
/// the command does for the current GPU ("compiles").
pub fn arch_fix_first(error: cudyn::Error, verb: &str) -> CliError {
    match error {
        cudyn::Error::ArchRequired { reason, .. } => CliError::new(format!(
            "no target architecture: pass one with --arch (e.g. --arch sm_90). Without it cudyn \
             {verb} for the current GPU, but {reason}; `cudyn doctor` shows what CUDA is \
             installed"
        )),
        other => other.into(),
    }
}

/// Prints `error` with its causes on standard error, headed by the command's name.
pub fn print_error(command: &str, error: &dyn Error) {
    crate::terminal::print_error(&format!("cudyn {command}"), error);
}

/// Prints `value` as pretty JSON on standard output (a failure to serialize on standard error).
pub fn print_json(command: &str, value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(json) => crate::streams::print(&(json + "\n")),
        Err(error) => print_error(command, &error),
    }
}

/// Writes `pieces` to standard output, checked as every output is (see [`crate::streams`]).
pub fn print_text(pieces: impl IntoIterator<Item = String>) {
    for piece in pieces {
        crate::streams::print(&piece);
    }
}

/// Says what was written where: on standard output, or on standard error when the code itself
/// went to standard output. `targets` are the architectures; `kernels` is `None` when the kind
/// lists none (LTO-IR, whose kernels are known once it is linked), and then goes unsaid.
pub fn print_written(
    destination: &Destination,
    bytes: usize,
    kind: &str,
    targets: &str,
    kernels: Option<usize>,
) {
    let kernels = match kernels {
        Some(1) => ", 1 kernel".to_owned(),
        Some(count) => format!(", {count} kernels"),
        None => String::new(),
    };
    let summary = format!("wrote {destination} ({bytes} bytes of {kind} for {targets}{kernels})\n");
    if *destination == Destination::Stdout {
        crate::streams::eprint(&summary);
    } else {
        crate::streams::print(&summary);
    }
}

/// Where one output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output (`-o -`).
    Stdout,
    /// A file.
    File(PathBuf),
}

impl Destination {
    /// Writes `code` there.
    pub fn write(&self, code: &[u8]) -> Result<(), CliError> {
        match self {
            Destination::Stdout => {
                crate::streams::print_bytes(code);
                Ok(())
            }
            Destination::File(path) => std::fs::write(path, code)
                .map_err(|error| CliError::new(format!("cannot write {self}")).source(error)),
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Stdout => f.write_str("standard output"),
            Destination::File(path) => path.display().fmt(f),
        }
    }
}

/// Where the outputs of a command go.
#[derive(Debug)]
pub struct Outputs {
    /// The output of each input, in order.
    pub destinations: Vec<Destination>,
    /// The folder `-o FOLDER/` named when it does not exist yet: made at the first write, so
    /// that a command that writes nothing leaves nothing behind.
    pub folder_to_make: Option<PathBuf>,
}

impl Outputs {
    /// Writes `code` to `destination`, one of these outputs, making the folder first if needed.
    pub fn write(&self, destination: &Destination, code: &[u8]) -> Result<(), CliError> {
        if let Some(folder) = &self.folder_to_make {
            std::fs::create_dir_all(folder).map_err(|error| {
                CliError::new(format!("cannot make the folder {}", folder.display())).source(error)
            })?;
        }
        destination.write(code)
    }
}

/// Where the output of each of `inputs` goes, given `-o` (`output`) and the output's
/// `extension`; `binary` output is refused on a terminal. The naming rules are those of `cudyn
/// compile --help`; an output that would overwrite an input, or another output, is refused as a
/// usage error.
pub fn destinations(
    inputs: &[PathBuf],
    output: Option<&Path>,
    extension: &str,
    binary: bool,
) -> Result<Outputs, CliError> {
    let beside = |folder: Option<&Path>, input: &Path| {
        let named = input.with_extension(extension);
        Destination::File(match (folder, named.file_name()) {
            (Some(folder), Some(name)) => folder.join(name),
            _ => named,
        })
    };
    let names_a_file = output.is_some_and(|path| !path.is_dir() && !names_a_folder(path));
    if !names_a_file && inputs.iter().any(|input| crate::input::is_stdin(input)) {
        return Err(CliError::usage(
            "standard input (-) has no name to write its output beside: name the output with \
             -o FILE, or -o - for standard output",
        ));
    }
    let mut folder_to_make = None;
    let destinations = match output {
        None => inputs.iter().map(|input| beside(None, input)).collect(),
        Some(path) if path == Path::new("-") => {
            if inputs.len() > 1 {
                return Err(CliError::usage(format!(
                    "-o - writes one output to standard output, and there are {} inputs: name \
                     a folder instead (-o build/)",
                    inputs.len()
                )));
            }
            vec![stdout(extension, binary)?]
        }
        Some(folder) if folder.is_dir() || names_a_folder(folder) => {
            if !folder.is_dir() {
                folder_to_make = Some(folder.to_owned());
            }
            inputs
                .iter()
                .map(|input| beside(Some(folder), input))
                .collect()
        }
        Some(path) if inputs.len() > 1 => {
            return Err(CliError::usage(format!(
                "-o {} is not a folder, and {} inputs make {} outputs: name a folder \
                 (-o build/, made when missing), or leave -o out to write each output beside \
                 its source",
                path.display(),
                inputs.len(),
                inputs.len()
            )))
        }
        Some(path) => vec![Destination::File(path.to_owned())],
    };
    refuse_clashes(inputs, &destinations)?;
    Ok(Outputs {
        destinations,
        folder_to_make,
    })
}

/// Whether `-o` was written as a folder: ending in a path separator (`build/`).
fn names_a_folder(path: &Path) -> bool {
    path.as_os_str()
        .to_string_lossy()
        .ends_with(std::path::MAIN_SEPARATOR)
}

/// Standard output as a destination, unless binary code would go to a terminal.
pub fn stdout(extension: &str, binary: bool) -> Result<Destination, CliError> {
    if binary && std::io::stdout().is_terminal() {
        return Err(CliError::new(format!(
            "-o - would print a binary {extension} on the terminal: redirect standard output \
             (-o - > file) or pipe it into another program"
        )));
    }
    Ok(Destination::Stdout)
}

/// Refuses an output that is one of the inputs (by any path: a link, `./x`, another spelling),
/// and two outputs that are one file.
pub fn refuse_clashes(inputs: &[PathBuf], destinations: &[Destination]) -> Result<(), CliError> {
    let mut seen: Vec<&Path> = Vec::new();
    for destination in destinations {
        let Destination::File(path) = destination else {
            continue;
        };
        if let Some(input) = inputs.iter().find(|input| same_file(input, path)) {
            return Err(CliError::usage(format!(
                "the output {} is the input {}: writing it would destroy the source; choose \
                 another output with -o",
                path.display(),
                input.display()
            )));
        }
        if let Some(earlier) = seen.iter().find(|earlier| **earlier == path) {
            return Err(CliError::usage(format!(
                "two inputs would both be written to {}: compile them into different folders, \
                 or rename one",
                earlier.display()
            )));
        }
        seen.push(path);
    }
    Ok(())
}

/// Whether `a` and `b` name one existing file: the same inode on Unix (hard links too), the
/// same canonical path elsewhere.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// How many distinct kernels device code defines (a fatbin's SASS and PTX of one kernel count
/// once); `None` when its kind does not list kernels (LTO-IR) or it cannot be read.
pub fn count_kernels(code: &[u8]) -> Option<usize> {
    let inspection = Image::new(code).ok()?.inspect().ok()?;
    let modules = inspection.modules();
    if modules.is_empty() {
        return None;
    }
    let mut names = HashSet::new();
    for module in modules {
        match module {
            Module::Cubin(cubin) => names.extend(cubin.kernels.iter().map(|k| k.name.clone())),
            Module::Ptx(ptx) => names.extend(ptx.entries.iter().map(|e| e.name.clone())),
            _ => {}
        }
    }
    Some(names.len())
}
