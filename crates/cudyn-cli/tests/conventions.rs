//! What every subcommand does the same way: help that ends with examples, shell completions,
//! colour only where it can be seen.

mod common;

use std::process::{Command, Output};

use common::cudyn;

/// The subcommands `cudyn --help` lists (without `help`).
fn subcommands() -> Vec<String> {
    let help = cudyn().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let commands = help
        .split("Commands:\n")
        .nth(1)
        .expect("--help lists the commands");
    let names: Vec<String> = commands
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    for expected in ["doctor", "demo", "run", "completions"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    names
}

#[test]
fn completions_name_every_subcommand() {
    let subcommands = subcommands();
    // How each shell's script offers a subcommand, and an option of `run`.
    type Offer = fn(&str) -> String;
    let offers: [(&str, Offer, &str); 3] = [
        ("bash", |name| format!("cudyn,{name})"), "--repeat"),
        ("zsh", |name| format!("'{name}:"), "'--repeat=["),
        ("fish", |name| format!("-a \"{name}\""), "-l repeat"),
    ];
    for (shell, offer, option) in offers {
        let output = cudyn().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = String::from_utf8(output.stdout).unwrap();
        for name in &subcommands {
            assert!(
                script.contains(&offer(name)),
                "{shell}'s script does not offer `{name}`"
            );
        }
        assert!(script.contains(option), "{shell}'s script lacks {option}");
    }
    let unknown = cudyn().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn help_ends_with_exit_status_and_examples() {
    // The subcommands whose help this file vouches for; compile, inspect and link document
    // theirs in their own tests.
    for command in [&[][..], &["doctor"], &["demo"], &["run"], &["completions"]] {
        let output = cudyn().args(command).arg("--help").output().unwrap();
        assert!(output.status.success(), "{command:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        let examples = help
            .rfind("\nExamples:\n")
            .unwrap_or_else(|| panic!("{command:?}: no examples:\n{help}"));
        let exit_status = help
            .find("Exit status")
            .unwrap_or_else(|| panic!("{command:?}: no exit status:\n{help}"));
        assert!(exit_status < examples, "{command:?}: examples come last");
        let invocation = format!("cudyn {}", command.join(" "));
        let example_lines: Vec<&str> = help[examples..]
            .lines()
            .skip(2)
            .filter(|line| !line.trim_start().starts_with('#'))
            .collect();
        assert!(
            example_lines
                .iter()
                .all(|line| line.starts_with("  ") && !line.trim().is_empty()),
            "{command:?}: the examples run to the end:\n{help}"
        );
        assert!(
            example_lines
                .iter()
                .any(|line| line.trim_start().starts_with(invocation.trim_end())),
            "{command:?}: no example runs `{invocation}`:\n{help}"
        );
    }
}

/// Runs `args`, with `colour` as CLICOLOR_FORCE and `no_colour` as NO_COLOR (unset if `None`),
/// and returns standard output and standard error together.
fn styled(args: &[&str], force: Option<&str>, no_colour: Option<&str>) -> (Output, String) {
    let empty = tempfile::tempdir().unwrap();
    let mut command: Command = cudyn();
    command
        .args(args)
        .env_remove("CLICOLOR")
        // Doctor fails, so that its report has a problem to show.
        .env("CUDYN_LIBRARY_PATH", empty.path());
    for (name, value) in [("CLICOLOR_FORCE", force), ("NO_COLOR", no_colour)] {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, text)
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let cases: [&[&str]; 4] = [
        &["doctor"],
        &[
            "run",
            "/nonexistent.cubin",
            "k",
            "--grid",
            "1",
            "--block",
            "1",
        ],
        &["run", "x.cubin", "k", "--grid", "0", "--block", "1"],
        &["--help"],
    ];
    for args in cases {
        // Through a pipe, as here: plain text.
        let (_, plain) = styled(args, None, None);
        assert!(
            !plain.contains('\u{1b}'),
            "{args:?} styled a pipe:\n{plain}"
        );
        // CLICOLOR_FORCE stands in for a terminal: styled, which shows the test can see it.
        let (_, forced) = styled(args, Some("1"), None);
        assert!(
            forced.contains("\u{1b}["),
            "{args:?} has no style to test:\n{forced}"
        );
        // NO_COLOR wins even then.
        let (output, no_colour) = styled(args, Some("1"), Some("1"));
        assert!(
            !no_colour.contains('\u{1b}'),
            "{args:?} ignored NO_COLOR:\n{no_colour}"
        );
        let (plain_output, _) = styled(args, None, None);
        assert_eq!(output.status.code(), plain_output.status.code(), "{args:?}");
    }
}
