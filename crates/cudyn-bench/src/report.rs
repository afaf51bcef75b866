//! The table: rows of medians, each with its ratio to the raw CUDA API, printed for people and
//! written as JSON for scripts/bench-peers (which adds CuPy's and cuda.core's columns).

use std::time::Duration;

use serde_json::{json, Value};

/// One row of the table: the same work done by each implementation, lower is better.
#[derive(Debug, Clone)]
pub struct Row {
    /// A stable key, shared with peers/bench_peers.py (`launch.empty`, `load.cubin`, ...).
    pub id: &'static str,
    /// What the row measures, for the table.
    pub label: String,
    /// `ns`, `µs`, `ms` or `MiB`.
    pub unit: &'static str,
    /// The raw CUDA C API called in the same process; `None` where it has no equivalent.
    pub raw: Option<f64>,
    /// cudyn.
    pub cudyn: Option<f64>,
    /// cudarc; `None` where it has no equivalent.
    pub cudarc: Option<f64>,
    /// How the row was measured, or what its raw column stands for.
    pub note: String,
}

impl Row {
    /// A row with a unit, the raw and cudyn figures; no cudarc column and no note yet.
    pub fn new(id: &'static str, label: impl Into<String>, unit: &'static str) -> Row {
        Row {
            id,
            label: label.into(),
            unit,
            raw: None,
            cudyn: None,
            cudarc: None,
            note: String::new(),
        }
    }

    /// Sets the three figures.
    pub fn figures(mut self, raw: Option<f64>, cudyn: Option<f64>, cudarc: Option<f64>) -> Row {
        (self.raw, self.cudyn, self.cudarc) = (raw, cudyn, cudarc);
        self
    }

    /// Sets the note.
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

/// A group of rows that could not be measured, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// The group's name.
    pub group: &'static str,
    /// Why: what is missing, or the error that stopped it.
    pub reason: String,
}

/// `value / raw`, when both exist.
fn ratio(value: Option<f64>, raw: Option<f64>) -> Option<f64> {
    Some(value? / raw?)
}

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or("—".to_owned(), |v| format!("{v:.decimals$}"))
}

fn figure(value: Option<f64>) -> String {
    match value {
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        other => cell(other, 3),
    }
}

/// Prints the table's header and column names, before any row is measured.
pub fn print_header(header: &str) {
    println!("{header}");
    println!();
    println!(
        "{:<52} {:>4} {:>10} {:>10} {:>7} {:>10} {:>7}",
        "row", "unit", "raw", "cudyn", "x raw", "cudarc", "x raw"
    );
}

/// Prints `rows` under the columns of [`print_header`]: a group's rows as soon as it is
/// measured, so that a run stopped part way still shows what it measured.
pub fn print_rows(rows: &[Row]) {
    for row in rows {
        println!(
            "{:<52} {:>4} {:>10} {:>10} {:>7} {:>10} {:>7}",
            row.label,
            row.unit,
            figure(row.raw),
            figure(row.cudyn),
            cell(ratio(row.cudyn, row.raw), 3),
            figure(row.cudarc),
            cell(ratio(row.cudarc, row.raw), 3),
        );
        if !row.note.is_empty() {
            println!("    {}", row.note);
        }
    }
}

/// Prints the groups that did not run, and why.
pub fn print_skipped(skipped: &[Skipped]) {
    for skipped in skipped {
        println!("{}: not measured: {}", skipped.group, skipped.reason);
    }
}

/// The table as JSON: `{"header", "device", "rows": [...], "skipped": [...]}`.
pub fn to_json(header: &str, device: &Value, rows: &[Row], skipped: &[Skipped]) -> Value {
    json!({
        "header": header,
        "device": device,
        "rows": rows.iter().map(|row| json!({
            "id": row.id,
            "label": row.label,
            "unit": row.unit,
            "raw": row.raw,
            "cudyn": row.cudyn,
            "cudarc": row.cudarc,
            "note": row.note,
        })).collect::<Vec<_>>(),
        "skipped": skipped.iter().map(|s| json!({"group": s.group, "reason": s.reason})).collect::<Vec<_>>(),
    })
}

/// The median of `samples`; `None` for none.
pub fn median(mut samples: Vec<f64>) -> Option<f64> {
    (!samples.is_empty()).then(|| crate::launch_timing::median(&mut samples))
}

/// Milliseconds of a duration.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}
