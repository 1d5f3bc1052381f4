//! `queuegen generate`: write the Rust module tree (and handler stubs), or check it for drift.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use queuegen::gen::{self, files};
use queuegen::spec;

#[derive(Debug, clap::Args)]
#[command(
    about = "Generate the Rust module tree for a spec",
    after_help = "Examples:
  queuegen generate queues.yaml --out src/queues
  queuegen generate queues.yaml --out src/queues --check     # in CI: fail on drift
  queuegen generate queues.yaml --out src/queues --stubs src/handlers"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// Directory of the generated Rust module (mount it with `mod queues;`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Write nothing; exit 1 listing files that differ, are missing, or are
    /// stale (marked generated but no longer produced by the spec).
    #[arg(long)]
    pub check: bool,

    /// Also write a handler skeleton per queue into DIR, only where none exists yet.
    #[arg(long, value_name = "DIR")]
    pub stubs: Option<PathBuf>,

    /// Rust path of the generated module inside your crate, used by the stubs.
    #[arg(long, value_name = "PATH", default_value = "crate::queues")]
    pub module_path: String,

    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let checked =
        spec::check_file(&args.spec).with_context(|| format!("reading {}", args.spec.display()))?;
    for diagnostic in &checked.diagnostics {
        eprintln!("{diagnostic}");
    }
    let Some(spec) = checked.spec else {
        eprintln!(
            "{}: not generating: fix the errors above first",
            args.spec.display()
        );
        return Ok(ExitCode::from(1));
    };

    let spec_file = files::relative_path(&args.out, &args.spec);
    let generated = gen::rust::generate(&spec, &spec_file.to_string_lossy())?;

    if args.check {
        return report_drift(&args, &files::check(&args.out, &generated)?);
    }

    let report = files::write(&args.out, &generated)?;
    let stubs = match &args.stubs {
        Some(dir) => write_stubs(dir, gen::stubs::generate(&spec, &args.module_path)?)?,
        None => Vec::new(),
    };

    if args.json {
        let json = serde_json::json!({
            "out": args.out,
            "written": report.written,
            "unchanged": report.unchanged,
            "stubs_written": stubs,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for path in &report.written {
            println!("wrote     {}", args.out.join(path).display());
        }
        for path in &stubs {
            println!("wrote     {} (stub; yours to edit)", path.display());
        }
        println!(
            "{}: {} written, {} unchanged",
            args.out.display(),
            report.written.len() + stubs.len(),
            report.unchanged.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn report_drift(args: &Args, drift: &files::Drift) -> anyhow::Result<ExitCode> {
    if args.json {
        let json = serde_json::json!({
            "out": args.out,
            "clean": drift.is_clean(),
            "differ": drift.differ,
            "missing": drift.missing,
            "stale": drift.stale,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        let out = |path: &PathBuf| args.out.join(path).display().to_string();
        drift
            .differ
            .iter()
            .for_each(|p| println!("differs:  {}", out(p)));
        drift
            .missing
            .iter()
            .for_each(|p| println!("missing:  {}", out(p)));
        drift.stale.iter().for_each(|p| {
            println!(
                "stale:    {} (generated, no longer produced by the spec)",
                out(p)
            )
        });
        if drift.is_clean() {
            println!("{}: up to date", args.out.display());
        } else {
            println!(
                "{}: out of date; run `queuegen generate {} --out {}` and commit the result",
                args.out.display(),
                args.spec.display(),
                args.out.display()
            );
        }
    }
    Ok(if drift.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes each stub whose file does not exist yet; never overwrites.
fn write_stubs(dir: &Path, stubs: Vec<gen::GeneratedFile>) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for stub in stubs {
        let path = dir.join(&stub.path);
        if path.exists() {
            continue;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&path, stub.contents)
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
