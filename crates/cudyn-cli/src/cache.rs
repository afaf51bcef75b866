//! `cudyn cache`: where the compile cache lives, what it holds, and its upkeep (verify, prune,
//! clear).

use std::io::{BufRead as _, IsTerminal as _};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use cudyn::cache::{EntryInfo, NotRemoved, PruneReport, RemoteStats, VerifyReport};
use cudyn::Cache;

use crate::output::{self, CliError};
use crate::remote::RemoteCheck;

/// The text after `cudyn cache --help`'s subcommands.
const AFTER_HELP: &str = "\
The cache is the folder of entries every compile uses: $CUDYN_CACHE_DIR (an absolute path),
else $XDG_CACHE_HOME/cudyn/kernels, else ~/.cache/cudyn/kernels. `path` names it without making
it; the others make it, private, when missing. CUDYN_CACHE=off turns the cache off; these
commands then fail, saying so.

Exit status:
  0  success (also `clear` answered no: nothing removed)
  1  the cache is turned off or refused, could not be read, or an entry could not be removed
     (what was removed is counted, what was not is named); `verify` found damaged entries (it
     removed them; entries of an older cudyn's format are removed too, but are no failure);
     `clear` without --yes where it cannot ask
  2  usage error (bad subcommand, option or value)

Examples:
  cudyn cache path                       # the folder of the entries
  cudyn cache stats --json               # with the remote tier's counts, when there is one
  cudyn cache list                       # key, kind, arch, kernels, size, age, newest use first
  cudyn cache verify                     # read every entry; remove damaged and outdated ones
  cudyn cache prune --max-bytes 200M     # evict least recently used entries down to 200 MiB
  cudyn cache clear --yes
  cudyn cache list --json | jq -r '.[].key'";

/// Options of `cudyn cache`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

/// What `--json` means for every subcommand.
#[derive(clap::Args)]
struct Json {
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print the folder where the entries live.
    #[command(after_help = AFTER_HELP)]
    Path(Json),
    /// Entries and bytes on disk, and the size cap.
    #[command(after_help = AFTER_HELP)]
    Stats(Json),
    /// Every entry, newest use first: key, kind, arch, kernels, size, age.
    #[command(after_help = AFTER_HELP)]
    List(Json),
    /// Read and check every entry; remove the damaged ones. Exit status 1 when any was damaged.
    #[command(after_help = AFTER_HELP)]
    Verify(Json),
    /// Evict the least recently used entries until the cache holds at most --max-bytes.
    #[command(after_help = AFTER_HELP)]
    Prune {
        /// The most bytes to keep: a number of bytes, or with a suffix K, M or G (KiB, MiB,
        /// GiB). The cache's own size cap when left out.
        #[arg(long, value_name = "N", value_parser = cudyn::cache::parse_bytes)]
        max_bytes: Option<u64>,
        #[command(flatten)]
        json: Json,
    },
    /// Remove every entry, and the toolchains remembered per environment. Asks first on a
    /// terminal; elsewhere needs --yes.
    #[command(after_help = AFTER_HELP)]
    Clear {
        /// Remove without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        json: Json,
    },
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Path(_) => "cache path",
            Action::Stats(_) => "cache stats",
            Action::List(_) => "cache list",
            Action::Verify(_) => "cache verify",
            Action::Prune { .. } => "cache prune",
            Action::Clear { .. } => "cache clear",
        }
    }
}

impl Args {
    /// The command's name with its action: `cache list`.
    pub fn name(&self) -> &'static str {
        self.action.name()
    }
}

pub fn run(args: &Args) -> ExitCode {
    let command = args.action.name();
    match act(&args.action) {
        Ok(exit) => exit,
        Err(error) => {
            output::print_error(command, &error);
            ExitCode::FAILURE
        }
    }
}

fn act(action: &Action) -> Result<ExitCode, CliError> {
    // The folder is named without making it: `path` only says where it is.
    if let Action::Path(Json { json }) = action {
        let dir = cudyn::cache::dir()?;
        if *json {
            output::print_json(action.name(), &serde_json::json!({ "path": dir }));
        } else {
            output::print_text([format!("{}\n", dir.display())]);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cache = Cache::try_global()?;
    match action {
        Action::Path(_) => {}
        Action::Stats(Json { json }) => print_stats(cache, *json)?,
        Action::List(Json { json }) => print_list(&cache.entries()?, *json),
        Action::Verify(Json { json }) => {
            let report = cache.verify()?;
            print_verify(&report, *json);
            refuse_not_removed(cache, &report.not_removed)?;
            if !report.removed.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Action::Prune {
            max_bytes,
            json: Json { json },
        } => {
            let max_bytes = match max_bytes {
                Some(max_bytes) => *max_bytes,
                None => cache.stats()?.max_bytes,
            };
            let report = cache.prune(max_bytes)?;
            print_removal(action.name(), cache, &report, *json);
            refuse_not_removed(cache, &report.not_removed)?;
        }
        Action::Clear {
            yes,
            json: Json { json },
        } => {
            if !*yes && !confirm_clear(cache)? {
                if *json {
                    output::print_json(action.name(), &serde_json::json!({ "removed": 0 }));
                } else {
                    output::print_text(["nothing removed\n".to_owned()]);
                }
                return Ok(ExitCode::SUCCESS);
            }
            let report = cache.clear()?;
            print_removal(action.name(), cache, &report, *json);
            refuse_not_removed(cache, &report.not_removed)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Fails when some entries could not be removed, naming how many, where and why.
fn refuse_not_removed(cache: &Cache, not_removed: &[NotRemoved]) -> Result<(), CliError> {
    let Some(first) = not_removed.first() else {
        return Ok(());
    };
    Err(CliError::new(format!(
        "could not remove {} of {}: {} (entry {}); they are still there: the folder must be \
         writable by you",
        entries(not_removed.len()),
        cache.path().display(),
        first.reason,
        first.key
    )))
}

/// `count` entries, in words: "1 entry", "3 entries".
fn entries(count: usize) -> String {
    match count {
        1 => "1 entry".to_owned(),
        count => format!("{count} entries"),
    }
}

fn print_stats(cache: &Cache, json: bool) -> Result<(), CliError> {
    let stats = cache.stats()?;
    let remote = RemoteCheck::from_environment();
    let totals = cache.remote_totals();
    if json {
        output::print_json(
            "cache stats",
            &serde_json::json!({
                "path": cache.path(),
                "stats": stats,
                "remote": remote,
                "remote_totals": totals,
            }),
        );
        return Ok(());
    }
    let mut text = format!(
        "folder   {}\nentries  {}\nsize     {} of {} allowed\n",
        cache.path().display(),
        stats.entries,
        human_bytes(stats.bytes),
        human_bytes(stats.max_bytes),
    );
    if let Some(remote) = &remote {
        text.push_str(&format!("remote   {}\n", remote.line()));
    }
    if remote.is_some() || totals != RemoteStats::default() {
        text.push_str(&format!(
            "remote tier, every process of this folder: {} hits, {} misses, {} waits, {} \
             published, {} errors, {} skipped after errors, {} refused (MAC), {} refused \
             (contents)\n",
            totals.hits,
            totals.misses,
            totals.waits,
            totals.published,
            totals.errors,
            totals.skipped,
            totals.refused_mac,
            totals.refused_invalid,
        ));
    }
    output::print_text([text]);
    Ok(())
}

/// One entry as `cache list --json` prints it; times in seconds since the Unix epoch.
#[derive(serde::Serialize)]
struct ListedEntry<'a> {
    key: &'a str,
    kind: cudyn::ImageKind,
    arch: &'a str,
    kernels: &'a [String],
    size: u64,
    created: u64,
    last_used: u64,
    age_seconds: u64,
}

fn print_list(entries: &[EntryInfo], json: bool) {
    let now = SystemTime::now();
    if json {
        let listed: Vec<ListedEntry> = entries
            .iter()
            .map(|entry| ListedEntry {
                key: &entry.key,
                kind: entry.kind,
                arch: &entry.arch,
                kernels: &entry.kernels,
                size: entry.size,
                created: unix_seconds(entry.created),
                last_used: unix_seconds(entry.last_used),
                age_seconds: age(now, entry.created).as_secs(),
            })
            .collect();
        output::print_json("cache list", &listed);
        return;
    }
    if entries.is_empty() {
        output::print_text(["the cache is empty\n".to_owned()]);
        return;
    }
    let mut lines = vec![format!(
        "{:<16}  {:<7}  {:<8}  {:>9}  {:>6}  KERNELS\n",
        "KEY", "KIND", "ARCH", "SIZE", "AGE"
    )];
    lines.extend(entries.iter().map(|entry| {
        format!(
            "{:<16}  {:<7}  {:<8}  {:>9}  {:>6}  {}\n",
            entry.key.get(..16).unwrap_or(&entry.key),
            format!("{:?}", entry.kind).to_lowercase(),
            entry.arch,
            human_bytes(entry.size),
            human_age(age(now, entry.created)),
            entry.kernels.join(", "),
        )
    }));
    output::print_text(lines);
}

fn print_verify(report: &VerifyReport, json: bool) {
    if json {
        output::print_json(
            "cache verify",
            &serde_json::json!({
                "checked": report.checked,
                "removed": report.removed,
                "outdated": report.outdated,
                "not_removed": report.not_removed,
            }),
        );
        return;
    }
    let checked = entries(report.checked);
    let mut lines = vec![match (report.removed.len(), report.outdated.len()) {
        (0, 0) => format!("checked {checked}: all intact\n"),
        (damaged, outdated) => format!(
            "checked {checked}: removed {damaged} damaged and {outdated} of an older cudyn's \
             format\n"
        ),
    }];
    lines.extend(
        report
            .removed
            .iter()
            .map(|key| format!("  {key} (damaged)\n")),
    );
    lines.extend(
        report
            .outdated
            .iter()
            .map(|key| format!("  {key} (older format)\n")),
    );
    output::print_text(lines);
}

/// Prints what `prune` or `clear` (the command `name`) removed from `cache`.
fn print_removal(name: &str, cache: &Cache, report: &PruneReport, json: bool) {
    if json {
        output::print_json(
            name,
            &serde_json::json!({
                "removed": report.removed,
                "freed_bytes": report.freed_bytes,
                "remaining_bytes": report.remaining_bytes,
                "not_removed": report.not_removed,
            }),
        );
    } else {
        output::print_text([format!(
            "removed {} from {}, freed {}, {} left\n",
            entries(report.removed),
            cache.path().display(),
            human_bytes(report.freed_bytes),
            human_bytes(report.remaining_bytes)
        )]);
    }
}

/// Asks on the terminal before `clear` whether to go on; where there is no terminal to ask,
/// refuses.
fn confirm_clear(cache: &Cache) -> Result<bool, CliError> {
    let folder = cache.path().display();
    if !std::io::stdin().is_terminal() {
        return Err(CliError::new(format!(
            "pass --yes to remove every entry of {folder}: standard input is not a terminal to \
             ask on"
        )));
    }
    let count = entries(cache.entries()?.len());
    crate::streams::eprint(&format!("remove all {count} of {folder}? [y/N] "));
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|error| CliError::new("cannot read the answer").source(error))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Bytes in the largest binary unit that keeps a whole number in front.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Time since `then`; zero for a time in the future (a clock set back).
fn age(now: SystemTime, then: SystemTime) -> Duration {
    now.duration_since(then).unwrap_or_default()
}

fn unix_seconds(time: SystemTime) -> u64 {
    age(time, SystemTime::UNIX_EPOCH).as_secs()
}

/// An age in its largest whole unit: 42s, 5m, 3h, 12d.
fn human_age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages_read_in_their_largest_unit() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_age(Duration::from_secs(59)), "59s");
        assert_eq!(human_age(Duration::from_secs(7200)), "2h");
        assert_eq!(human_age(Duration::from_secs(3 * 86400)), "3d");
    }
}
