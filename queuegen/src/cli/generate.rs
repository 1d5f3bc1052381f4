//! `queuegen generate`: write the Rust module tree (and handler stubs) and the
//! deploy artefacts (the Redis Function library), or check them for drift.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use queuegen::gen::{self, files};

use super::common;

#[derive(Debug, clap::Args)]
#[command(
    about = "Generate the Rust module tree and the deploy artefacts for a spec",
    after_help = "At least one of --out and --deploy-out is required.

Examples:
  queuegen generate queues.yaml --out src/queues --deploy-out deploy
  queuegen generate queues.yaml --out src/queues --deploy-out deploy --check   # in CI: fail on drift
  queuegen generate queues.yaml --out src/queues --stubs src/handlers"
)]
pub struct Args {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    /// Directory of the generated Rust module (mount it with `mod queues;`).
    #[arg(long, value_name = "DIR", required_unless_present = "deploy_out")]
    pub out: Option<PathBuf>,

    /// Directory of the deploy artefacts: `functions.lua`, the service's
    /// versioned Redis Function library (`queuegen apply` loads it), the
    /// Redis, Prometheus and Kubernetes files, `RUNBOOK.md`, and when a queue
    /// uses PostgreSQL the migrations of its tables in `sql/`.
    #[arg(long, value_name = "DIR")]
    pub deploy_out: Option<PathBuf>,

    /// Write nothing; exit 1 listing files that differ, are missing, or are
    /// stale (marked generated but no longer produced by the spec).
    #[arg(long)]
    pub check: bool,

    /// Also write a handler skeleton per queue into DIR, only where none exists
    /// yet, and DIR/mod.rs declaring them when DIR has no mod.rs.
    #[arg(long, value_name = "DIR", requires = "out")]
    pub stubs: Option<PathBuf>,

    /// Rust path of the generated module inside your crate, used by the stubs.
    #[arg(long, value_name = "PATH", default_value = "crate::queues")]
    pub module_path: String,

    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,

    /// The lock file of published schema versions the spec must keep
    /// (default: the spec's name with `.lock`, beside it, when it exists).
    #[arg(long, value_name = "PATH")]
    pub lock: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(spec) = common::valid_spec_with_lock(&args.spec, args.lock.as_deref(), "generating")?
    else {
        return Ok(ExitCode::from(1));
    };
    if let (Some(out), Some(deploy_out)) = (&args.out, &args.deploy_out) {
        refuse_overlap(out, deploy_out)?;
    }

    // Each target directory with the files the spec produces in it.
    let mut targets = Vec::new();
    if let Some(out) = &args.out {
        let spec_file = files::relative_path(out, &args.spec);
        targets.push(Target {
            dir: out,
            files: gen::rust::generate(&spec, &spec_file.to_string_lossy())?,
        });
    }
    if let Some(deploy_out) = &args.deploy_out {
        let spec_file = files::relative_path(deploy_out, &args.spec);
        let source = std::fs::read_to_string(&args.spec)
            .with_context(|| format!("reading {}", args.spec.display()))?;
        targets.push(Target {
            dir: deploy_out,
            files: gen::deploy::generate(&spec, &spec_file.to_string_lossy(), &source)?,
        });
    }

    if args.check {
        let drifts = targets
            .iter()
            .map(|t| Ok((t.dir, files::check(t.dir, &t.files)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        return report_drift(&args, &drifts);
    }

    let reports = targets
        .iter()
        .map(|t| Ok((t.dir, files::write(t.dir, &t.files)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stubs = match (&args.stubs, &args.out) {
        (Some(dir), Some(_)) => write_stubs(
            dir,
            gen::stubs::generate(&spec, &args.module_path)?,
            gen::stubs::module_list(&spec)?,
        )?,
        _ => StubReport::default(),
    };

    if args.json {
        let (rust, deploy) = (
            of_dir(&reports, &args.out),
            of_dir(&reports, &args.deploy_out),
        );
        let json = serde_json::json!({
            "out": args.out,
            "written": rust.written,
            "unchanged": rust.unchanged,
            "stubs": args.stubs,
            "stubs_written": stubs.written,
            "stubs_kept": stubs.kept,
            "deploy_out": args.deploy_out,
            "deploy_written": deploy.written,
            "deploy_unchanged": deploy.unchanged,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for (dir, report) in &reports {
            for path in &report.written {
                println!("wrote     {}", dir.join(path).display());
            }
        }
        for path in &stubs.written {
            println!("wrote     {} (stub; yours to edit)", path.display());
        }
        for (dir, report) in &reports {
            println!(
                "{}: {} written, {} unchanged",
                dir.display(),
                report.written.len(),
                report.unchanged.len()
            );
        }
        if let (Some(dir), Some(_)) = (&args.stubs, &args.out) {
            println!(
                "{}: {} stub(s) written, {} already there (yours: never overwritten)",
                dir.display(),
                stubs.written.len(),
                stubs.kept.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What was done in `dir` (`--out` or `--deploy-out`); nothing when not given.
fn of_dir<T: Clone + Default>(per_dir: &[(&Path, T)], dir: &Option<PathBuf>) -> T {
    dir.as_deref()
        .and_then(|dir| per_dir.iter().find(|(d, _)| *d == dir))
        .map(|(_, done)| done.clone())
        .unwrap_or_default()
}

/// One output directory and what the spec generates into it.
struct Target<'a> {
    dir: &'a Path,
    files: Vec<gen::GeneratedFile>,
}

/// `--out` and `--deploy-out` must not be the same directory or nest: each
/// directory's `--check` would report the other's files as stale.
fn refuse_overlap(out: &Path, deploy_out: &Path) -> anyhow::Result<()> {
    if is_inside(out, deploy_out) || is_inside(deploy_out, out) {
        anyhow::bail!(
            "--out {} and --deploy-out {} overlap: give the Rust module and the deploy \
             artefacts separate directories",
            out.display(),
            deploy_out.display()
        );
    }
    Ok(())
}

/// Whether `dir` is `other` or inside it (compared after making both absolute).
fn is_inside(dir: &Path, other: &Path) -> bool {
    let path = files::relative_path(other, dir);
    !matches!(path.components().next(), Some(Component::ParentDir))
}

fn report_drift(args: &Args, drifts: &[(&Path, files::Drift)]) -> anyhow::Result<ExitCode> {
    let clean = drifts.iter().all(|(_, drift)| drift.is_clean());
    if args.json {
        let (rust, deploy) = (of_dir(drifts, &args.out), of_dir(drifts, &args.deploy_out));
        let json = serde_json::json!({
            "out": args.out,
            "clean": clean,
            "differ": rust.differ,
            "missing": rust.missing,
            "stale": rust.stale,
            "deploy_out": args.deploy_out,
            "deploy_differ": deploy.differ,
            "deploy_missing": deploy.missing,
            "deploy_stale": deploy.stale,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for (dir, drift) in drifts {
            let out = |path: &PathBuf| dir.join(path).display().to_string();
            for path in &drift.differ {
                println!("differs:  {}", out(path));
            }
            for path in &drift.missing {
                println!("missing:  {}", out(path));
            }
            for path in &drift.stale {
                let why = "generated, no longer produced by the spec";
                println!("stale:    {} ({why})", out(path));
            }
        }
        for (dir, drift) in drifts {
            let state = if drift.is_clean() {
                "up to date"
            } else {
                "out of date"
            };
            println!("{}: {state}", dir.display());
        }
        if !clean {
            println!("run `{}` and commit the result", regenerate_command(args));
        }
    }
    Ok(common::exit_code(clean))
}

/// The `queuegen generate` command line that brings the directories up to date.
fn regenerate_command(args: &Args) -> String {
    let mut command = format!("queuegen generate {}", args.spec.display());
    if let Some(out) = &args.out {
        command.push_str(&format!(" --out {}", out.display()));
    }
    if let Some(deploy_out) = &args.deploy_out {
        command.push_str(&format!(" --deploy-out {}", deploy_out.display()));
    }
    command
}

/// What `--stubs` did: the files it wrote, and those it left because they
/// were already there (the team's own).
#[derive(Debug, Default)]
struct StubReport {
    written: Vec<PathBuf>,
    kept: Vec<PathBuf>,
}

/// Writes each stub whose file does not exist yet, and `mod.rs` declaring
/// them all when the directory has none; never overwrites. A new stub that an
/// existing `mod.rs` does not declare is pointed out, since it would not compile in.
fn write_stubs(
    dir: &Path,
    stubs: Vec<gen::GeneratedFile>,
    module_list: gen::GeneratedFile,
) -> anyhow::Result<StubReport> {
    let module_list_path = dir.join(&module_list.path);
    let existing_module_list = std::fs::read_to_string(&module_list_path).ok();
    let mut written = Vec::new();
    let mut kept = Vec::new();
    for stub in stubs {
        let path = dir.join(&stub.path);
        if path.exists() {
            kept.push(path);
            continue;
        }
        write_new(dir, &path, &stub.contents)?;
        if let (Some(declared), Some(module)) = (&existing_module_list, stub.path.file_stem()) {
            let module = module.to_string_lossy();
            if !declares_module(declared, &module) {
                eprintln!(
                    "note: {} does not declare the new stub: add `pub mod {module};` to it",
                    module_list_path.display()
                );
            }
        }
        written.push(path);
    }
    if existing_module_list.is_none() && !module_list_path.exists() {
        write_new(dir, &module_list_path, &module_list.contents)?;
        written.push(module_list_path);
    } else {
        kept.push(module_list_path);
    }
    Ok(StubReport { written, kept })
}

fn write_new(dir: &Path, path: &Path, contents: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// Whether Rust source `text` has a `mod <module>;` line (any visibility).
fn declares_module(text: &str, module: &str) -> bool {
    text.lines().any(|line| {
        line.trim()
            .strip_suffix(';')
            .and_then(|decl| decl.split_whitespace().last().map(|last| last == module))
            .unwrap_or(false)
            && line.split_whitespace().any(|word| word == "mod")
    })
}
