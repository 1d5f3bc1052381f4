//! `queuegen check`: validate a spec and report every problem at once, each
//! with file:line:col, the key's path and a fix.

use std::path::PathBuf;
use std::process::ExitCode;

use queuegen::spec::Checked;

use super::common;

const AFTER_HELP: &str = "\
Examples:
  queuegen check queues.yaml
  queuegen check queues.yaml --lock deploy/queues.lock
  queuegen check queues.yaml --format json | jq '.[] | select(.severity == \"error\")'

When the lock file of published schema versions exists (queues.lock beside queues.yaml, or
--lock PATH), the spec is also checked against it: a published version must not change.

Each problem is printed as FILE:LINE:COL: error|warning: PATH: MESSAGE, then a help line.
Exit status: 0 when the spec is valid (warnings may be printed), 1 when it has errors,
2 when the file cannot be read.";

/// Validate a queues.yaml spec and explain every problem.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The spec to check.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// `human`: one diagnostic per line with a help line, then a summary;
    /// `json`: a JSON array of diagnostics.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// The lock file of published schema versions to check against
    /// (default: the spec's name with `.lock`, beside it, when it exists).
    #[arg(long, value_name = "PATH")]
    pub lock: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let checked = common::check_with_lock(&args.spec, args.lock.as_deref())?;
    match args.format {
        Format::Human => {
            for diagnostic in &checked.diagnostics {
                println!("{diagnostic}");
            }
            println!("{}", summary(&args.spec.display().to_string(), &checked));
        }
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&checked.diagnostics)?);
        }
    }
    Ok(common::exit_code(!checked.has_errors()))
}

/// `queues.yaml: 2 errors, 1 warning`, or what was checked when all is well.
fn summary(file: &str, checked: &Checked) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    match &checked.spec {
        Some(spec) if checked.diagnostics.is_empty() => format!(
            "{file}: ok, {} and {}",
            plural(spec.queues.len(), "queue"),
            plural(spec.envelopes.len(), "envelope")
        ),
        _ => format!(
            "{file}: {}, {}",
            plural(checked.error_count(), "error"),
            plural(checked.warning_count(), "warning")
        ),
    }
}
