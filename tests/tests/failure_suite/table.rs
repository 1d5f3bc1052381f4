//! The summary table: one row per scenario and target, over all its runs.

use std::time::Duration;

use queuegen_tests::suite::Target;

use crate::scenarios::Scenario;
use crate::verdict::Verdict;

/// One line of the table.
pub struct Row {
    row: String,
    scenario: String,
    target: String,
    runs: usize,
    jobs: u64,
    lost: String,
    duplicates: String,
    pub passed: bool,
    notes: String,
    took: Duration,
}

impl Row {
    /// The row of `scenario` on `target` from all its runs' verdicts.
    pub fn of(scenario: &Scenario, target: Target, verdicts: &[&Verdict], took: Duration) -> Row {
        let sum = |field: fn(&Verdict) -> u64| verdicts.iter().map(|v| field(v)).sum::<u64>();
        // A run that stopped before counting makes the row's count unknown.
        let counted = |field: fn(&Verdict) -> Option<u64>| {
            verdicts
                .iter()
                .map(|v| field(v))
                .sum::<Option<u64>>()
                .map_or_else(|| "-".to_owned(), |n| n.to_string())
        };
        let lost = counted(|v| v.lost);
        let expected_lost = sum(|v| v.expected_lost);
        let notes = verdicts
            .first()
            .map(|verdict| verdict.notes.join("; "))
            .unwrap_or_default();
        Row {
            row: scenario.row.map_or_else(String::new, |row| row.to_string()),
            scenario: scenario.title.to_owned(),
            target: target.name(),
            runs: verdicts.len(),
            jobs: sum(|v| v.jobs),
            lost: if expected_lost > 0 {
                format!("{lost} ({expected_lost} deleted by the outsider)")
            } else {
                lost.to_string()
            },
            duplicates: counted(|v| v.duplicates),
            passed: !verdicts.is_empty() && verdicts.iter().all(|verdict| verdict.passed()),
            notes,
            took,
        }
    }
}

/// The table as Markdown, so that docs/reliability.md can show it as printed.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "#",
        "scenario",
        "target",
        "runs",
        "jobs",
        "lost",
        "duplicate effects",
        "result",
        "time",
        "what it exercised",
    ];
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|row| {
            [
                row.row.clone(),
                row.scenario.clone(),
                row.target.clone(),
                row.runs.to_string(),
                row.jobs.to_string(),
                row.lost.clone(),
                row.duplicates.clone(),
                if row.passed { "pass" } else { "FAIL" }.to_owned(),
                format!("{:.1}s", row.took.as_secs_f64()),
                row.notes.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for line in &cells {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        out.push('|');
        for (cell, width) in cells.iter().zip(widths) {
            out.push_str(&format!(" {cell:<width$} |"));
        }
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    line(&widths.map(|width| "-".repeat(width)));
    for cells in &cells {
        line(cells);
    }
    out
}
