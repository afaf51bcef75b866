//! Output that cannot be written: every subcommand with standard output on a full disk
//! (`/dev/full`) and into a pipe whose reader has gone (`| head` after its lines), and with
//! standard error on a full disk. The conventions of ripgrep and coreutils: a closed pipe ends
//! the command quietly with status 0; any other failure to write is one line of error and status
//! 1; and no case panics. Needs NVRTC and nvJitLink (scripts/cuda-wheels, then activate the venv).

mod common;
mod hostile;

use hostile::{assert_no_panic, run_into, stderr, words, Fixture, Sink};

/// One command line of every subcommand that prints on standard output, in the fixture's folder.
const PRINTING: &[&str] = &[
    "doctor",
    "doctor --json",
    "demo --elements 16",
    "compile k.cu --arch sm_90 -o written.cubin",
    "compile k.cu --arch sm_90 --json -o json.cubin",
    "compile k.cu --arch sm_90 --emit ptx -o -",
    "compile k.cu --arch sm_90 -o -",
    "link kernel.ltoir step.ltoir --lto --arch sm_90 -o l.cubin",
    "link kernel.ltoir step.ltoir --lto --arch sm_90 --json -o j.cubin",
    "link kernel.ltoir step.ltoir --lto --arch sm_90 -o -",
    "inspect k.cubin",
    "inspect --json k.cubin k.ptx",
    "run k.cubin k --check --grid 1 --block 1 --arg buf:f32:1",
    "run k.cubin k --check --json --grid 1 --block 1 --arg buf:f32:1",
    "cache path",
    "cache path --json",
    "cache stats",
    "cache stats --json",
    "cache list",
    "cache list --json",
    "cache verify",
    "cache verify --json",
    "cache prune --max-bytes 1G",
    "cache prune --max-bytes 1G --json",
    "cache clear --yes",
    "cache clear --yes --json",
    "completions bash",
    "completions zsh",
    "completions fish",
    "completions elvish",
    "completions powershell",
    "--help",
    "--version",
    "help compile",
    "doctor --help",
    "demo --help",
    "compile --help",
    "link --help",
    "inspect --help",
    "run --help",
    "cache --help",
    "cache prune --help",
    "completions --help",
];

#[test]
fn every_subcommand_on_a_full_disk_says_so_in_one_line_and_fails() {
    let fixture = Fixture::new();
    for line in PRINTING {
        let args = words(line);
        let case = format!("{args:?} > /dev/full");
        let output = run_into(fixture.cudyn(&args), Sink::Full);
        assert_no_panic(&output, &case);
        assert_eq!(output.status.code(), Some(1), "{case}: {output:?}");
        let text = stderr(&output);
        let last = text.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("error: cudyn")
                && last.ends_with(
                    "cannot write to standard output: No space left on device (os error 28)"
                ),
            "{case}:\n{text}"
        );
        if let [command, ..] = args.as_slice() {
            if !command.starts_with('-') && *command != "help" {
                assert!(
                    last.starts_with(&format!("error: cudyn {command}")),
                    "{case}: {last}"
                );
            }
        }
    }
}

#[test]
fn every_subcommand_into_a_closed_pipe_ends_quietly_with_status_0() {
    let fixture = Fixture::new();
    for line in PRINTING {
        let case = format!("{line} | (closed)");
        let output = run_into(fixture.cudyn(&words(line)), Sink::ClosedPipe);
        assert_no_panic(&output, &case);
        assert_eq!(output.status.code(), Some(0), "{case}: {output:?}");
        let text = stderr(&output);
        assert!(
            !text.contains("error") && !text.contains("Broken pipe"),
            "{case}: a closed pipe is no error:\n{text}"
        );
    }
}

/// Command lines that fail, or warn, on standard error, with their exit status.
const ON_STDERR: &[(&str, i32)] = &[
    ("compile nope.cu --arch sm_90", 1),
    ("compile k.cu --arch sm_90 -X=--no-such-option -o x", 1),
    ("inspect k.cu", 1),
    ("inspect nope.cubin --json", 1),
    ("link k.cu --arch sm_90", 1),
    ("run k.cubin nope --check --grid 1 --block 1", 4),
    ("run k.cubin k --grid 1 --block 1 --arg f33:1", 2),
    ("cache clear", 1),
    ("completions tcsh", 2),
    ("bogus", 2),
    ("", 2),
    ("compile", 2),
];

#[test]
fn errors_into_a_full_disk_keep_their_exit_status_and_never_panic() {
    let fixture = Fixture::new();
    for (line, status) in ON_STDERR {
        let args = words(line);
        let case = format!("{line} 2> /dev/full");
        let output = fixture
            .cudyn(&args)
            .stderr(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_no_panic(&output, &case);
        assert_eq!(output.status.code(), Some(*status), "{case}: {output:?}");
        // Both streams broken at once.
        let both = fixture
            .cudyn(&args)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .stderr(std::fs::File::create("/dev/full").unwrap())
            .status()
            .unwrap();
        assert_ne!(both.code(), Some(101), "{case} and > /dev/full");
        assert!(both.code().is_some(), "{case}: ended by a signal");
    }
}

#[test]
fn the_hidden_worker_modes_are_in_no_completion_and_no_suggestion() {
    let fixture = Fixture::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = fixture.output(&["completions", shell]);
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(
            !script.contains("compile-server") && !script.contains("compile-worker"),
            "{shell} completes a hidden mode"
        );
    }
    for typo in ["__compile-serve", "compile-server", "__compile-workers"] {
        let output = fixture.output(&[typo]);
        assert_eq!(output.status.code(), Some(2), "{typo}");
        let text = stderr(&output);
        let suggested: String = text.lines().filter(|line| line.contains("tip")).collect();
        assert!(
            !suggested.contains("__compile"),
            "{typo} suggests a hidden mode:\n{text}"
        );
    }
}
