//! Running a workspace binary from a test, and reading what it printed.
//!
//! Only the crate that builds a binary knows its path
//! (`env!("CARGO_BIN_EXE_queuegen")`), so its tests pass it in.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `binary` with `args` in the directory `cwd`; how it exited and what it printed.
pub fn run_in(binary: &str, args: &[&str], cwd: &Path) -> Output {
    Command::new(binary)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|err| panic!("{binary} runs: {err}"))
}

/// What the command printed on stdout, as text (invalid UTF-8 replaced).
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the command printed on stderr, as text (invalid UTF-8 replaced).
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
