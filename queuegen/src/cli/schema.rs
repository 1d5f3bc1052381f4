//! `queuegen schema`: print the JSON Schema of spec format v1.

use std::process::ExitCode;

const AFTER_HELP: &str = "\
Example:
  queuegen schema > schemas/queuegen.v1.json

Editors that speak the YAML language server pick it up from the first line of queues.yaml:
  # yaml-language-server: $schema=../schemas/queuegen.v1.json
The schema checks keys and value shapes; `queuegen check` also checks the rules between them.";

/// Print the JSON Schema (draft 2020-12) of the spec format.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    print!("{}", queuegen::spec::json_schema::to_pretty_string());
    Ok(ExitCode::SUCCESS)
}
