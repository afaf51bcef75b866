//! What `cudyn run` prints: the launch, its timing and every buffer's summary, as text or as
//! JSON (the schema is in docs/CLI.md).

use std::path::PathBuf;
use std::time::Duration;

use cudyn::{Device, ParamLayout};
use serde::Serialize;

use super::arguments::{host_buffers, Argument, HostBuffer};
use super::values::{self, Summary};
use super::{Args, Failure, Status};
use crate::streams::outln;
use crate::terminal::STRONG;

/// One buffer after the launch.
#[derive(Debug, Serialize)]
pub struct BufferReport {
    /// The argument's position, from 0.
    argument: usize,
    #[serde(rename = "type")]
    ty: &'static str,
    /// Whether the launch changed any byte.
    changed: bool,
    #[serde(flatten)]
    summary: Summary,
}

/// The summary of each buffer argument, from its bytes `after` the launch (indexed like
/// `arguments`).
pub fn summarize(
    arguments: &[Argument<HostBuffer>],
    after: &[Option<Vec<u8>>],
) -> Vec<BufferReport> {
    host_buffers(arguments)
        .filter_map(|(index, host)| {
            let bytes = after.get(index)?.as_deref()?;
            Some(BufferReport {
                argument: index,
                ty: host.ty.name(),
                changed: bytes != host.bytes,
                summary: values::summarize(host.ty, bytes),
            })
        })
        .collect()
}

#[derive(Serialize)]
struct Timing {
    median: f64,
    min: f64,
    max: f64,
}

#[derive(Serialize)]
struct DeviceReport {
    ordinal: usize,
    name: String,
    arch: String,
}

#[derive(Serialize)]
struct RunReport<'a> {
    file: &'a PathBuf,
    kernel: &'a str,
    device: DeviceReport,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    launches: usize,
    time_us: Timing,
    buffers: &'a [BufferReport],
    written: Vec<Written<'a>>,
}

#[derive(Serialize)]
struct Written<'a> {
    argument: usize,
    path: &'a PathBuf,
}

fn json_failure(error: serde_json::Error) -> Failure {
    Failure::new(Status::Failure, "cannot write JSON").caused_by(error)
}

/// Prints what the launches did.
pub fn print_run(
    args: &Args,
    device: &Device,
    times: &[Duration],
    buffers: &[BufferReport],
) -> Result<(), Failure> {
    let cuda = |error| Failure::from_cuda("cannot describe GPU 0", error);
    let (major, minor) = device.compute_capability().map_err(cuda)?;
    let report = RunReport {
        file: &args.file,
        kernel: &args.kernel,
        device: DeviceReport {
            ordinal: device.ordinal(),
            name: device.name().map_err(cuda)?,
            arch: format!("sm_{major}{minor}"),
        },
        grid: [args.grid.0.x, args.grid.0.y, args.grid.0.z],
        block: [args.block.0.x, args.block.0.y, args.block.0.z],
        shared_mem_bytes: args.shared,
        launches: times.len(),
        time_us: timing(times),
        buffers,
        written: args
            .out
            .iter()
            .map(|out| Written {
                argument: out.argument,
                path: &out.path,
            })
            .collect(),
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(json_failure)?;
        outln!("{text}");
        return Ok(());
    }
    outln!(
        "{STRONG}{}{STRONG:#} on GPU {} ({}, {}): grid {}, block {}, {} bytes of dynamic shared \
         memory",
        report.kernel,
        report.device.ordinal,
        report.device.name,
        report.device.arch,
        args.grid,
        args.block,
        report.shared_mem_bytes
    );
    let Timing { median, min, max } = report.time_us;
    let launches = match times.len() {
        1 => "1 launch".to_owned(),
        n => format!("{n} launches"),
    };
    outln!("time over {launches}: median {median:.2} us, min {min:.2} us, max {max:.2} us");
    for buffer in buffers {
        outln!("{}", render_buffer(buffer));
    }
    for written in &report.written {
        outln!(
            "wrote argument {} to {}",
            written.argument,
            written.path.display()
        );
    }
    Ok(())
}

/// Median, minimum and maximum in microseconds.
fn timing(times: &[Duration]) -> Timing {
    let mut us: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let middle = us.len() / 2;
    let median = match us.len() {
        0 => 0.0,
        n if n % 2 == 1 => us[middle],
        _ => (us[middle - 1] + us[middle]) / 2.0,
    };
    Timing {
        median,
        min: us.first().copied().unwrap_or_default(),
        max: us.last().copied().unwrap_or_default(),
    }
}

fn render_buffer(buffer: &BufferReport) -> String {
    let summary = &buffer.summary;
    let first: Vec<String> = summary.first.iter().map(ToString::to_string).collect();
    let more = if summary.elements > first.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "argument {} {}[{}] {}: [{}{more}] min {} max {} sum {} NaN {}",
        buffer.argument,
        buffer.ty,
        summary.elements,
        if buffer.changed {
            "changed"
        } else {
            "unchanged"
        },
        first.join(", "),
        summary.min,
        summary.max,
        summary.sum,
        summary.nan
    )
}

#[derive(Serialize)]
struct CheckReport<'a> {
    file: &'a PathBuf,
    kernel: &'a str,
    parameters: &'a [ParamLayout],
    matches: bool,
}

/// Prints that the arguments match the kernel's parameters, which the caller checked.
pub fn print_check(args: &Args, params: &[ParamLayout]) -> Result<(), Failure> {
    if args.json {
        let report = CheckReport {
            file: &args.file,
            kernel: &args.kernel,
            parameters: params,
            matches: true,
        };
        let text = serde_json::to_string_pretty(&report).map_err(json_failure)?;
        outln!("{text}");
    } else {
        let parameters = match params.len() {
            1 => "the 1 parameter".to_owned(),
            count => format!("the {count} parameters"),
        };
        outln!(
            "the arguments match {parameters} of {STRONG}{}{STRONG:#} in {}, and the grid, \
             block and shared memory its limits",
            args.kernel,
            args.file.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let us = |values: &[u64]| -> Vec<Duration> {
            values.iter().map(|&v| Duration::from_micros(v)).collect()
        };
        let odd = timing(&us(&[9, 1, 5]));
        assert_eq!((odd.median, odd.min, odd.max), (5.0, 1.0, 9.0));
        let even = timing(&us(&[4, 1, 2, 100]));
        assert_eq!((even.median, even.min, even.max), (3.0, 1.0, 100.0));
    }

    #[test]
    fn a_buffer_line_shows_its_first_values_and_totals() {
        let before = HostBuffer {
            ty: super::super::spec::ElemType::I32,
            bytes: bytemuck::cast_slice(&[0i32; 10]).to_vec(),
        };
        let after: Vec<i32> = (0..10).collect();
        let arguments = [
            Argument::Scalar(values::ScalarBits::B1(1)),
            Argument::Buffer(before),
        ];
        let reports = summarize(
            &arguments,
            &[None, Some(bytemuck::cast_slice(&after).to_vec())],
        );
        assert_eq!(
            render_buffer(&reports[0]),
            "argument 1 i32[10] changed: [0, 1, 2, 3, 4, 5, 6, 7, ...] min 0 max 9 sum 45 NaN 0"
        );
        let json = serde_json::to_value(&reports[0]).unwrap();
        assert_eq!(json["argument"], 1);
        assert_eq!(json["type"], "i32");
        assert_eq!(json["changed"], true);
        assert_eq!(json["elements"], 10);
        assert_eq!(json["first"].as_array().unwrap().len(), values::FIRST_SHOWN);
    }
}
