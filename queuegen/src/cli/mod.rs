//! Subcommand definitions and dispatch; each subcommand lives in its own file.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod acl;
pub mod apply;
pub mod check;
mod common;
mod connection;
pub mod dashboard;
pub mod diff_spec;
pub mod dlq;
pub mod generate;
pub mod init;
pub mod lock;
pub mod monitor;
pub mod pause;
pub mod pending;
pub mod resume;
pub mod runs;
pub mod schedules;
pub mod schema;
pub mod status;
mod table;
pub mod trim;

/// Validate a queues.yaml spec and generate typed Rust and Redis artefacts for
/// Redis Streams work queues.
#[derive(Debug, Parser)]
#[command(name = "queuegen", version, about, long_about = None)]
pub struct Command {
    #[command(subcommand)]
    pub subcommand: Subcommands,
}

#[derive(Debug, Subcommand)]
pub enum Subcommands {
    Check(check::Args),
    Schema(schema::Args),
    Generate(generate::Args),
    Lock(lock::Args),
    DiffSpec(diff_spec::Args),
    Init(init::Args),
    Apply(apply::Args),
    Dlq(dlq::Args),
    Status(status::Args),
    Pending(pending::Args),
    Runs(runs::Args),
    Monitor(monitor::Args),
    Trim(trim::Args),
    Pause(pause::Args),
    Resume(resume::Args),
    Acl(acl::Args),
    Schedules(schedules::Args),
    Dashboard(dashboard::Args),
}

/// Runs one subcommand. Exit codes: 0 success, 1 the spec or the generated
/// code has problems (reported), 2 queuegen itself could not run.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command.subcommand {
        Subcommands::Check(args) => check::run(args),
        Subcommands::Schema(args) => schema::run(args),
        Subcommands::Generate(args) => generate::run(args),
        Subcommands::Lock(args) => lock::run(args),
        Subcommands::DiffSpec(args) => diff_spec::run(args),
        Subcommands::Init(args) => init::run(args),
        Subcommands::Apply(args) => apply::run(args),
        Subcommands::Dlq(args) => dlq::run(args),
        Subcommands::Status(args) => status::run(args),
        Subcommands::Pending(args) => pending::run(args),
        Subcommands::Runs(args) => runs::run(args),
        Subcommands::Monitor(args) => monitor::run(args),
        Subcommands::Trim(args) => trim::run(args),
        Subcommands::Pause(args) => pause::run(args),
        Subcommands::Resume(args) => resume::run(args),
        Subcommands::Acl(args) => acl::run(args),
        Subcommands::Schedules(args) => schedules::run(args),
        Subcommands::Dashboard(args) => dashboard::run(args),
    }
}
