//! `queuegen init`: write a commented starter spec.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(
    about = "Write a commented starter queues.yaml",
    after_help = "Examples:
  queuegen init                       # ./queues.yaml for a service named after this directory
  queuegen init deploy/queues.yaml --service billing"
)]
pub struct Args {
    /// Where to write the spec; an existing file is never overwritten. The JSON
    /// Schema is written beside it as queuegen.v1.json unless one exists.
    #[arg(default_value = "queues.yaml")]
    pub path: PathBuf,

    /// The service name (default: the current directory's name).
    #[arg(long)]
    pub service: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.path.exists() {
        eprintln!(
            "{}: already exists; not overwriting it",
            args.path.display()
        );
        return Ok(ExitCode::from(1));
    }
    let service = args.service.map_or_else(default_service_name, Ok)?;
    let spec = queuegen::gen::starter_spec(&service)?;
    if let Some(parent) = args.path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&args.path, spec).with_context(|| format!("writing {}", args.path.display()))?;
    println!("wrote {}", args.path.display());

    // The starter's first line points editors at the schema beside it.
    let schema = args.path.with_file_name("queuegen.v1.json");
    if !schema.exists() {
        std::fs::write(&schema, queuegen::spec::json_schema::to_pretty_string())
            .with_context(|| format!("writing {}", schema.display()))?;
        println!(
            "wrote {} (JSON Schema for editor completion)",
            schema.display()
        );
    }
    println!("next: queuegen check {}", args.path.display());
    Ok(ExitCode::SUCCESS)
}

/// The current directory's name, reduced to characters valid in a service name.
fn default_service_name() -> anyhow::Result<String> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let name: String = cwd
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    Ok(if name.is_empty() {
        "my-service".into()
    } else {
        name
    })
}
