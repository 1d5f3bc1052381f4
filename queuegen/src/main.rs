//! The `queuegen` command line: one file per subcommand under src/cli/.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let command = cli::Command::parse();
    match cli::run(command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
