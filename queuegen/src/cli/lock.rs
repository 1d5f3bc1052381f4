//! `queuegen lock`: record the published schema versions of a spec in its lock file, or check it is current.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use queuegen::spec::lock::{LockEntry, LockStatus};
use queuegen::spec::{self, Diagnostic, Lock, LockError};
use serde_json::json;

use super::common;

const AFTER_HELP: &str = "\
The lock file (queues.lock beside queues.yaml) records every schema version of every
envelope as published. `queuegen check` and `queuegen generate` then refuse a spec that
changes a published version: entries of that version stay in streams, retry schedules and
dead letters. Versions not yet recorded are added (older ones as reconstructed from
`changes`); recorded versions are never rewritten unless --force. The file is written only
when it changes.

Examples:
  queuegen lock queues.yaml                 # after publishing a new schema; commit queues.lock
  queuegen lock queues.yaml --check         # in CI: fail when the lock is missing or stale
  queuegen lock queues.yaml --force         # schema 3 never left your machine: re-record it

Exit status: 0 written or up to date, 1 the spec or lock has errors or (--check) the lock
would change, 2 a file cannot be read or written.";

/// Record the published schema versions of a spec in its lock file.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The spec file (queues.yaml).
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,

    /// The lock file (default: the spec's name with `.lock`, beside it).
    #[arg(long, value_name = "PATH")]
    pub lock: Option<PathBuf>,

    /// Write nothing; exit 1 when the lock is missing or would change.
    #[arg(long)]
    pub check: bool,

    /// Make the lock exactly the spec: rewrite recorded versions that differ,
    /// drop what the spec no longer has (for versions never published).
    #[arg(long)]
    pub force: bool,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Bytes: a spec that is not UTF-8 is a positioned spec error.
    let source = std::fs::read(&args.spec)
        .with_context(|| format!("cannot read {}", args.spec.display()))?;
    let file = args.spec.display().to_string();
    let lock_path = common::lock_path(&args.spec, args.lock.as_deref())?;
    let lock_file = lock_path.display().to_string();
    let existing_text = match std::fs::read_to_string(&lock_path) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => return Err(err).with_context(|| format!("cannot read {lock_file}")),
    };
    let existing = match existing_text.as_deref().map(|t| Lock::parse(t, &lock_file)) {
        None => None,
        Some(Ok(lock)) => Some(lock),
        Some(Err(err)) if args.force => {
            eprintln!("{err}\n  note: --force replaces it");
            None
        }
        Some(Err(err)) => {
            let diagnostics: Vec<Diagnostic> = err.to_diagnostic().into_iter().collect();
            return refuse(
                &args,
                &lock_file,
                &diagnostics,
                "the lock file is malformed",
            );
        }
    };

    // --force records the spec as it is, so only the spec's own errors stop it.
    let checked = if args.force {
        spec::check_bytes(source, &file)
    } else {
        spec::check_bytes_with_lock(source, &file, existing.as_ref().map(|l| (l, &*lock_file)))
    };
    let Some(valid) = checked.spec.as_ref() else {
        let errors: Vec<Diagnostic> = checked
            .diagnostics
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect();
        return refuse(&args, &lock_file, &errors, "fix the errors above first");
    };

    let (next, entries) = existing.unwrap_or_default().updated(valid, args.force);
    let text = next.to_yaml();
    let up_to_date = existing_text.as_deref() == Some(text.as_str());

    if args.check {
        let changing: Vec<&LockEntry> = entries.iter().filter(|e| changes(e.status)).collect();
        if args.json {
            let out = json!({ "lock": lock_file, "up_to_date": up_to_date, "versions": changing });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            for entry in &changing {
                println!("{}", line(entry, true));
            }
            if up_to_date {
                println!("{lock_file}: up to date");
            } else {
                let state = match &existing_text {
                    None => "missing",
                    Some(_) if changing.is_empty() => "not in canonical form",
                    Some(_) => "out of date",
                };
                println!("{lock_file}: {state}: run `{}`", lock_command(&args));
            }
        }
        return Ok(common::exit_code(up_to_date));
    }

    if !up_to_date {
        if let Some(parent) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&lock_path, &text).map_err(|source| LockError::Write {
            path: lock_path.clone(),
            source,
        })?;
    }
    if args.json {
        let out = json!({ "lock": lock_file, "written": !up_to_date, "versions": entries });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for entry in &entries {
            println!("{}", line(entry, false));
        }
        let count = |status| entries.iter().filter(|e| e.status == status).count();
        let mut counts = Vec::new();
        for status in [
            LockStatus::Recorded,
            LockStatus::Rewritten,
            LockStatus::Dropped,
            LockStatus::Kept,
            LockStatus::Unchanged,
        ] {
            let n = count(status);
            if n > 0 {
                counts.push(format!("{n} {}", status.as_str()));
            }
        }
        let done = if up_to_date { "unchanged" } else { "written" };
        println!("{lock_file}: {done} ({})", counts.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether an entry means the lock file changes.
fn changes(status: LockStatus) -> bool {
    matches!(
        status,
        LockStatus::Recorded | LockStatus::Rewritten | LockStatus::Dropped
    )
}

/// `recorded   OcrRequested schema 3`, or with `would`, `would record   …`.
fn line(entry: &LockEntry, would: bool) -> String {
    let note = if entry.status == LockStatus::Kept {
        " (no longer in the spec; its entries may remain: `--force` drops it)"
    } else {
        ""
    };
    let (envelope, schema) = (&entry.envelope, entry.schema);
    if would {
        let verb = match entry.status {
            LockStatus::Recorded => "record",
            LockStatus::Rewritten => "rewrite",
            LockStatus::Dropped => "drop",
            LockStatus::Kept | LockStatus::Unchanged => "keep",
        };
        format!("would {verb:<8} {envelope} schema {schema}{note}")
    } else {
        let status = entry.status.as_str();
        format!("{status:<10} {envelope} schema {schema}{note}")
    }
}

/// Reports why nothing was written and exits 1.
fn refuse(
    args: &Args,
    lock_file: &str,
    diagnostics: &[Diagnostic],
    reason: &str,
) -> anyhow::Result<ExitCode> {
    if args.json {
        let key = if args.check { "up_to_date" } else { "written" };
        let out = json!({ "lock": lock_file, key: false, "diagnostics": diagnostics });
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    for diagnostic in diagnostics {
        eprintln!("{diagnostic}");
    }
    let not = if args.check { "checked" } else { "written" };
    eprintln!("{lock_file}: not {not}: {reason}");
    Ok(ExitCode::from(1))
}

/// The `queuegen lock` command line that brings the lock up to date.
fn lock_command(args: &Args) -> String {
    let mut command = format!("queuegen lock {}", args.spec.display());
    if let Some(lock) = &args.lock {
        command.push_str(&format!(" --lock {}", lock.display()));
    }
    command
}
