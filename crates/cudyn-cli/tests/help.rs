//! Every subcommand's `--help` ends with examples of its use and documents its exit status.

mod common;

/// The subcommands held to this so far.
const SUBCOMMANDS: [&str; 3] = ["compile", "link", "inspect"];

#[test]
fn help_ends_with_examples_and_says_the_exit_status() {
    for subcommand in SUBCOMMANDS {
        let run = common::cudyn()
            .args([subcommand, "--help"])
            .output()
            .unwrap();
        assert!(run.status.success(), "{subcommand}: {run:?}");
        let help = String::from_utf8(run.stdout).unwrap();
        assert!(help.contains("\nExit status:\n"), "{subcommand}:\n{help}");
        let (_, examples) = help
            .rsplit_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("{subcommand} has no examples:\n{help}"));
        let lines: Vec<&str> = examples.trim().lines().collect();
        assert!(lines.len() >= 3, "{subcommand}: {examples}");
        let prefix = format!("cudyn {subcommand} ");
        assert!(
            lines
                .iter()
                .any(|line| line.trim_start().starts_with(&prefix)),
            "{subcommand}: {examples}"
        );
        assert!(
            lines
                .iter()
                .all(|line| line.trim_start().starts_with("cudyn ")),
            "{subcommand}: every line after Examples: is a command\n{examples}"
        );
    }
}
