//! Helpers for subcommands that read a spec: load it valid (against its lock
//! file when there is one), find a queue by name.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use queuegen::spec::{self, lock, model, Checked, Lock, LockError};

/// The arguments most commands that work on Redis open with: the spec, the
/// server, and which of the spec's queues.
#[derive(Debug, clap::Args)]
pub struct SpecQueuesOnRedis {
    /// The spec file (queues.yaml).
    pub spec: PathBuf,

    #[command(flatten)]
    pub redis: super::connection::RedisArgs,

    /// Only these queues (repeatable); default all.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
}

/// Exit 0 when a check passed, 1 when it found something.
pub fn exit_code(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Reads and validates the spec, printing every diagnostic on stderr. `None`
/// when there were errors: the caller, which is about to `doing` something
/// ("generating", "applying"), exits 1 without touching anything.
pub fn valid_spec(path: &Path, doing: &str) -> anyhow::Result<Option<model::Spec>> {
    let checked = spec::check_file(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(reported(checked, path, doing))
}

/// Like [`valid_spec`], and also checked against the lock file: `lock` when
/// given, else the one beside the spec when it exists.
pub fn valid_spec_with_lock(
    path: &Path,
    lock: Option<&Path>,
    doing: &str,
) -> anyhow::Result<Option<model::Spec>> {
    let checked = check_with_lock(path, lock)?;
    Ok(reported(checked, path, doing))
}

/// Prints every diagnostic on stderr, and why nothing will be done when
/// there were errors; the spec when there were none.
fn reported(checked: Checked, path: &Path, doing: &str) -> Option<model::Spec> {
    for diagnostic in &checked.diagnostics {
        eprintln!("{diagnostic}");
    }
    if checked.spec.is_none() {
        eprintln!(
            "{}: not {doing}: fix the errors above first",
            path.display()
        );
    }
    checked.spec
}

/// Where the lock of `spec` is: `given` (`--lock PATH`), else beside the spec.
pub fn lock_path(spec: &Path, given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = given.map_or_else(|| lock::path_beside(spec), Path::to_path_buf);
    if path == spec {
        anyhow::bail!(
            "{}: the lock file would be the spec itself; name the spec *.yaml or pass --lock PATH",
            spec.display()
        );
    }
    Ok(path)
}

/// Reads and checks the spec, against its lock when there is one. A
/// malformed lock is reported as an error diagnostic in the lock file; a
/// `--lock` file that does not exist is an error.
pub fn check_with_lock(path: &Path, lock: Option<&Path>) -> anyhow::Result<Checked> {
    // Bytes, not a String: a spec that is not UTF-8 is a positioned error
    // (exit 1, like any spec error), not an unreadable file (exit 2).
    let source = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = path.display().to_string();
    let lock_path = lock_path(path, lock)?;
    let lock_file = lock_path.display().to_string();
    match Lock::read(&lock_path) {
        Ok(Some(lock)) => Ok(spec::check_bytes_with_lock(
            source,
            &file,
            Some((&lock, &lock_file)),
        )),
        Ok(None) if lock.is_some() => {
            anyhow::bail!("cannot read {lock_file}: no such file (given with --lock)")
        }
        Ok(None) => Ok(spec::check_bytes(source, &file)),
        Err(err @ LockError::Malformed { .. }) => {
            let mut checked = spec::check_bytes(source, &file);
            checked.diagnostics.extend(err.to_diagnostic());
            checked.spec = None;
            Ok(checked)
        }
        Err(err) => Err(err.into()),
    }
}

/// The spec's queues named in `names` (every queue when none is named), in
/// the spec's order; an unknown name is an error listing the spec's queues.
pub fn selected_queues<'a>(
    spec: &'a model::Spec,
    path: &Path,
    names: &[String],
) -> anyhow::Result<Vec<&'a model::Queue>> {
    for name in names {
        queue(spec, path, name)?;
    }
    Ok(spec
        .queues
        .iter()
        .filter(|queue| names.is_empty() || names.contains(&queue.name))
        .collect())
}

/// A listener on `addr` (port 0: any free one) and the address it got.
pub async fn listen(
    addr: std::net::SocketAddr,
) -> anyhow::Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let local = listener
        .local_addr()
        .with_context(|| format!("listening on {addr}"))?;
    Ok((listener, local))
}

/// The queue named `name`, or an error listing the spec's queues.
pub fn queue<'a>(
    spec: &'a model::Spec,
    path: &Path,
    name: &str,
) -> anyhow::Result<&'a model::Queue> {
    spec.queue(name).with_context(|| {
        let known: Vec<&str> = spec.queues.iter().map(|q| q.name.as_str()).collect();
        format!(
            "{}: no queue named {name:?} (queues: {})",
            path.display(),
            known.join(", ")
        )
    })
}
