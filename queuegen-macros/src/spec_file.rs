//! Reads the spec that `#[envelope(spec = "...", queue = "...")]` names, while the struct compiles.
//!
//! A relative `spec` path is resolved against `CARGO_MANIFEST_DIR`, the
//! directory of the Cargo.toml of the crate being compiled, as
//! `sqlx::migrate!` and askama's template paths are: a derive cannot learn
//! the path of the file it is invoked in on our MSRV (`Span::local_file`
//! needs Rust 1.88), so it cannot resolve relative to it as `include_str!` does.
//!
//! trybuild compiles each UI test as a bin of a crate it generates under
//! `target/tests/trybuild/`, so there `CARGO_MANIFEST_DIR` is not the test
//! crate's directory. As trybuild's author recommends (dtolnay/trybuild#202),
//! the UI test sets [`BASE_DIR_OVERRIDE`] to its own manifest directory
//! before running trybuild, and relative paths resolve against it instead.
//! The override applies only to the crates cargo was asked to build
//! (`CARGO_PRIMARY_PACKAGE`), not to their dependencies, which keep reading
//! their specs from their own directories.

use std::path::{Path, PathBuf};

use queuegen_spec::model;

use crate::attr::{self, Container, Setting};
use crate::errors::Errors;

/// Replaces `CARGO_MANIFEST_DIR` as the base of relative spec paths, for the
/// primary crates of a build (see the module documentation).
const BASE_DIR_OVERRIDE: &str = "QUEUEGEN_SPEC_BASE_DIR";

/// How many of an invalid spec's errors the compile error repeats.
const DIAGNOSTICS_SHOWN: usize = 3;

/// The spec's envelope of the queue a struct names, with where it came from.
pub(crate) struct SpecEnvelope {
    /// The spec file as resolved, for rebuilding when it changes.
    pub(crate) path: PathBuf,
    pub(crate) queue: String,
    /// The envelope at its current schema version.
    pub(crate) envelope: model::Envelope,
}

impl SpecEnvelope {
    /// `queues.ocr envelope OcrRequested`: where a field of the spec lives, for messages.
    pub(crate) fn whereabouts(&self) -> String {
        format!("queues.{} envelope {}", self.queue, self.envelope.name)
    }
}

/// Reads the spec when the struct names one; `None` if it names none, or
/// (with the reason recorded) if the spec cannot be used.
pub(crate) fn load(attrs: &Container, errors: &mut Errors) -> Option<SpecEnvelope> {
    match (&attrs.spec, &attrs.queue) {
        (None, None) => None,
        (Some(spec), None) => errors.refuse(spec.error(
            "`spec = \"...\"` needs `queue = \"...\"` too: \
                 the queue of the spec whose envelope this struct must match",
        )),
        (None, Some(queue)) => errors.refuse(queue.error(
            "`queue = \"...\"` needs `spec = \"...\"` too: \
                 the spec file that defines the queue, relative to the crate's Cargo.toml",
        )),
        (Some(spec), Some(queue)) => read(spec, queue, errors),
    }
}

fn read(
    spec: &Setting<String>,
    queue: &Setting<String>,
    errors: &mut Errors,
) -> Option<SpecEnvelope> {
    let written = &spec.value;
    let path = resolve(written);
    // Bytes, so a spec that is not UTF-8 is a positioned diagnostic below
    // (as in `queuegen check`), not an unreadable file.
    let source = match std::fs::read(&path) {
        Ok(source) => source,
        Err(error) => {
            return errors.refuse(spec.error(format_args!(
                "cannot read the spec `{written}` at {}: {error} \
                 (a relative path starts at the directory of the crate's Cargo.toml)",
                path.display()
            )))
        }
    };

    // Diagnostics name the file as written, which is also what to give `queuegen check`.
    let checked = queuegen_spec::check_bytes(source, written);
    let Some(model) = checked.spec else {
        let problems: Vec<_> = checked
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.is_error())
            .collect();
        let mut message = format!(
            "the spec `{written}` is invalid ({} error{}):",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for problem in problems.iter().take(DIAGNOSTICS_SHOWN) {
            message.push_str(&format!("\n{problem}"));
        }
        if problems.len() > DIAGNOSTICS_SHOWN {
            message.push_str(&format!(
                "\n... and {} more",
                problems.len() - DIAGNOSTICS_SHOWN
            ));
        }
        message.push_str(&format!(
            "\nrun `queuegen check {written}` for every problem"
        ));
        return errors.refuse(spec.error(message));
    };

    let Some(found) = model.queue(&queue.value) else {
        let names: Vec<&str> = model.queues.iter().map(|q| q.name.as_str()).collect();
        let hint = match attr::did_you_mean(&queue.value, &names) {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!("its queues are {}", quoted_list(&names)),
        };
        return errors.refuse(queue.error(format_args!(
            "the spec `{written}` has no queue `{}`; {hint}",
            queue.value
        )));
    };
    let Some(envelope) = model.envelope(&found.envelope) else {
        // A valid spec names only envelopes it defines.
        return errors.refuse(queue.error(format_args!(
            "queue `{}` of `{written}` carries envelope `{}`, which the spec does not define",
            found.name, found.envelope
        )));
    };
    Some(SpecEnvelope {
        path: std::fs::canonicalize(&path).unwrap_or(path),
        queue: found.name.clone(),
        envelope: envelope.clone(),
    })
}

/// The spec path as written, made absolute from the base directory.
fn resolve(written: &str) -> PathBuf {
    let written = Path::new(written);
    if written.is_absolute() {
        return written.to_owned();
    }
    let primary = std::env::var_os("CARGO_PRIMARY_PACKAGE").is_some();
    let base = std::env::var_os(BASE_DIR_OVERRIDE)
        .filter(|_| primary)
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR"));
    match base {
        Some(base) => Path::new(&base).join(written),
        // Not built by cargo: the best guess is the working directory.
        None => written.to_owned(),
    }
}

/// `` `a`, `b`, `c` ``
pub(crate) fn quoted_list<S: AsRef<str>>(names: &[S]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|name| format!("`{}`", name.as_ref()))
        .collect();
    quoted.join(", ")
}
