//! `queuegen diff-spec`: what changing a spec from OLD to NEW does to compatibility, for code review.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use queuegen::spec::diff::{self, Impact, Summary};
use queuegen::spec::{self, Checked, Diagnostic};
use serde_json::json;

use super::common;

const AFTER_HELP: &str = "\
Each finding is `breaking` (entries would be lost, misread or mis-ordered whatever the deploy
order), `rollout` (safe only when deployed in the order it says, or once old entries are
gone) or `info`, with the dotted path it is about. A pipeline change says what it does to
the runs in flight: `rollout` when they must end first (a pipeline, stage or join removed, a
join added or its list changed, a queue newly handed jobs, a lower max_children).

Examples:
  git show origin/main:queues.yaml > /tmp/queues.old.yaml
  queuegen diff-spec /tmp/queues.old.yaml queues.yaml
  queuegen diff-spec old.yaml new.yaml --json | jq '.findings[] | select(.severity == \"breaking\")'

Exit status: 0 nothing breaking, 1 at least one breaking finding, 2 a spec cannot be read or
has errors (reported; nothing is compared).";

/// Report what changing a spec from OLD to NEW does to compatibility.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The spec before the change (e.g. from the main branch).
    #[arg(value_name = "OLD")]
    pub old: PathBuf,

    /// The spec after the change.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,

    /// Print the findings as JSON: `findings` (severity, path, message) and `summary`.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let old = check(&args.old)?;
    let new = check(&args.new)?;
    let (Some(old_spec), Some(new_spec)) = (&old.spec, &new.spec) else {
        let errors: Vec<&Diagnostic> = old
            .diagnostics
            .iter()
            .chain(&new.diagnostics)
            .filter(|d| d.is_error())
            .collect();
        if args.json {
            let out = json!({ "old": args.old, "new": args.new, "diagnostics": errors });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            for diagnostic in &errors {
                eprintln!("{diagnostic}");
            }
            eprintln!("not compared: fix the errors above first");
        }
        return Ok(ExitCode::from(2));
    };

    let findings = diff::diff(old_spec, new_spec);
    let summary = Summary::of(&findings);
    if args.json {
        let out = json!({
            "old": args.old,
            "new": args.new,
            "findings": findings,
            "summary": summary,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        // Findings come breaking first, then rollout, then info.
        for finding in &findings {
            println!(
                "{:<9} {}: {}",
                finding.severity.as_str(),
                finding.path,
                finding.message
            );
        }
        if !findings.is_empty() {
            println!();
        }
        println!("{} → {}: {summary}", args.old.display(), args.new.display());
    }
    let breaking = findings.iter().any(|f| f.severity == Impact::Breaking);
    Ok(common::exit_code(!breaking))
}

fn check(path: &Path) -> anyhow::Result<Checked> {
    // A side that is not UTF-8 is a positioned spec error, not an unreadable file.
    let source = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(spec::check_bytes(source, &path.display().to_string()))
}
