//! `cudyn doctor`: what CUDA this machine offers cudyn.

use std::process::ExitCode;

use cudyn::locate::CudaHeaders;
use cudyn::toolchain::ToolchainReport;

use crate::remote::RemoteCheck;
use crate::streams::outln;
use crate::terminal::{self, ERROR, GOOD, STRONG, WARNING};

const AFTER_HELP: &str = "\
With CUDYN_CACHE_REMOTE set, it also says whether the compile cache's remote tier is usable and
answers; one that is not is a warning, not a failure: compiles go on with the local cache.

Exit status:
  0  the runtime, NVRTC and nvJitLink are usable and any driver present works (a machine
     without a driver or GPU is fine: it compiles, links and inspects)
  1  something required is missing or broken, or with --require-gpu there is no usable GPU
  2  usage error

Examples:
  cudyn doctor                        # what was found where, GPUs, problems
  cudyn doctor --require-gpu          # in a script: is this a machine to launch on?
  cudyn doctor --json | jq '.problems'
  CUDYN_LIBRARY_PATH=/opt/cuda/lib64 cudyn doctor   # use only the libraries in one folder";

/// Options of `cudyn doctor`.
#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Fail (exit 1) unless a driver and at least one GPU are usable.
    #[arg(long)]
    require_gpu: bool,
}

pub fn run(args: &Args) -> ExitCode {
    let report = ToolchainReport::probe();
    let problems = report.problems(args.require_gpu);
    let remote = RemoteCheck::from_environment();
    if args.json {
        let json = serde_json::json!({ "report": report, "problems": problems, "remote": remote });
        match serde_json::to_string_pretty(&json) {
            Ok(text) => outln!("{text}"),
            Err(error) => {
                terminal::print_error("cudyn doctor", &error);
                return ExitCode::FAILURE;
            }
        }
    } else {
        print_text(&report, &problems, remote.as_ref());
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// CUDA's headers as every compile searches them; the places looked in when some are missing.
fn print_headers(headers: &CudaHeaders) {
    outln!();
    outln!("{STRONG}CUDA headers{STRONG:#} (searched by every compile after its own -I folders)");
    let cccl_version = headers
        .cccl_version
        .as_ref()
        .map(|version| format!("CCCL {version}"));
    for (name, found, version) in [
        ("CUDA", &headers.cuda, None),
        ("CCCL", &headers.cccl, cccl_version),
    ] {
        match found {
            Some(found) => {
                outln!("  {name:<13} {}", found.folder.display());
                let cuda = found
                    .cuda_version
                    .map(|version| format!(", CUDA {version}"))
                    .unwrap_or_default();
                let version = version.map(|v| format!(", {v}")).unwrap_or_default();
                outln!("  {:<13} found by: {}{cuda}{version}", "", found.origin);
                if let Some(note) = &found.note {
                    outln!("  {:<13} {note}", "");
                }
            }
            None => outln!("  {name:<13} - not found"),
        }
    }
    if headers.cuda.is_none() || headers.cccl.is_none() {
        outln!("  searched, beside NVRTC first:");
        for place in &headers.searched {
            outln!("    {place}");
        }
    }
}

fn print_text(report: &ToolchainReport, problems: &[String], remote: Option<&RemoteCheck>) {
    outln!("{STRONG}CUDA libraries{STRONG:#}");
    for component in &report.components {
        let name = component.component.name();
        match &component.found {
            Some(found) => {
                outln!("  {name:<13} {:<6} {}", found.version, found.path.display());
                outln!("  {:<13} {:<6} found by: {}", "", "", found.origin);
                for note in &found.notes {
                    outln!("  {:<13} {:<6} {note}", "", "");
                }
            }
            None => {
                let optional = if component.required {
                    ""
                } else {
                    " (optional)"
                };
                let error = component.error.as_deref().unwrap_or("not probed");
                // The folders searched are the same for every library and printed once below.
                let lines: Vec<&str> = if component.not_found {
                    let first = error.lines().next().into_iter();
                    let loader = component.loader_errors.iter().map(String::as_str);
                    first
                        .chain(loader)
                        .chain([component.component.install_hint()])
                        .collect()
                } else {
                    error.lines().collect()
                };
                let (first, rest) = lines.split_first().unwrap_or((&"", &[]));
                outln!("  {name:<13} {:<6} {first}{optional}", "-");
                for line in rest {
                    outln!("  {:<13} {:<6} {line}", "", "");
                }
            }
        }
    }
    outln!();
    outln!("{STRONG}Search order{STRONG:#} (the same for every library)");
    for place in &report.search_order {
        outln!("  {place}");
    }
    print_headers(&report.headers);
    outln!();
    outln!("{STRONG}GPUs{STRONG:#}");
    if report.devices.is_empty() {
        let why = report.devices_error.as_deref().unwrap_or("none");
        outln!("  none: {}", why.lines().next().unwrap_or_default());
    }
    for device in &report.devices {
        let (major, minor) = device.compute_capability;
        outln!(
            "  {}: {}, compute capability {major}.{minor} (sm_{major}{minor}), {:.1} GiB",
            device.ordinal,
            device.name,
            device.total_memory as f64 / f64::from(1u32 << 30)
        );
    }
    if let Some(remote) = remote {
        outln!();
        outln!("{STRONG}Remote compile cache{STRONG:#} ($CUDYN_CACHE_REMOTE)");
        let mark = if remote.problem.is_some() {
            WARNING
        } else {
            GOOD
        };
        outln!("  {mark}{}{mark:#}", remote.line());
    }
    if !report.warnings.is_empty() {
        outln!();
        outln!("{WARNING}Warnings{WARNING:#}");
        for warning in &report.warnings {
            outln!("  [{}] {}", warning.id, warning.message);
        }
    }
    outln!();
    if problems.is_empty() {
        outln!("{GOOD}OK{GOOD:#}: cudyn can compile, link and inspect device code here.");
        if report.devices.is_empty() {
            outln!("    No GPU: loading and launching are not available on this machine.");
        }
    } else {
        outln!("{ERROR}Problems{ERROR:#}");
        for problem in problems {
            outln!("  {problem}");
        }
    }
}
