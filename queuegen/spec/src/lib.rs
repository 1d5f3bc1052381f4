//! The queues.yaml spec: the normalized model, parsing of format v1, and validation.
//!
//! [`check_str`], [`check_bytes`] and [`check_file`] read a spec and report every problem at
//! once as positioned [`Diagnostic`]s; the model ([`model::Spec`]) is handed
//! out only when there is no error. [`check_str_with_lock`] also compares the
//! spec with its lock file ([`lock`]), the schema versions already published;
//! [`diff`] compares two specs for review.

pub mod compat;
pub mod diagnostic;
pub mod diff;
pub mod evolution;
pub mod json_schema;
pub mod limits;
pub mod lock;
pub mod model;
pub mod naming;
pub mod source;
pub mod suggest;
pub mod v1;
pub mod yaml;

pub use queuegen_core::{cadence, units};

use std::path::Path;

pub use diagnostic::{Diagnostic, Severity};
pub use lock::{Lock, LockError};
use model::Spec;

/// The outcome of checking a spec.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The normalized model; `Some` if and only if there is no error.
    pub spec: Option<Spec>,
    /// Every error and warning, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.count(Severity::Error)
    }

    pub fn warning_count(&self) -> usize {
        self.count(Severity::Warning)
    }

    fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
}

/// Checks a spec held in memory; `file` is the name diagnostics carry.
pub fn check_str(source: &str, file: &str) -> Checked {
    check_str_with_lock(source, file, None)
}

/// Checks a spec held in memory and, when it is valid on its own, against
/// `lock` (the lock and its file name, for messages): a published version
/// changed in place, an accepted older version that no longer decodes what
/// was published, or a schema older than a published one is an error; an
/// envelope gone from the spec and a schema not yet locked are warnings.
pub fn check_str_with_lock(source: &str, file: &str, lock: Option<(&Lock, &str)>) -> Checked {
    let mut ctx = v1::Ctx::new(source, file);
    let spec = match yaml::parse(source) {
        Ok(root) => v1::load(&mut ctx, &root),
        Err(err) => {
            let pos = err.pos.unwrap_or(yaml::Pos { line: 1, column: 1 });
            let (message, help) = if err.is_tag() {
                (err.message, "remove the tag and write the plain value")
            } else {
                let help = err.help.unwrap_or(if err.message.contains("more than one document") {
                    "a spec is a single YAML document: remove the `---` separators"
                } else {
                    "fix the YAML: check indentation, and quote values that contain `: ` or ` #` or start with `{`, `[`, `*`, `&`, `!`, `%` or `@`"
                });
                (format!("YAML syntax error: {}", err.message), help)
            };
            ctx.push_at(
                Severity::Error,
                pos,
                String::new(),
                message,
                Some(help.to_owned()),
            );
            None
        }
    };
    if let (Some(spec), Some((lock, lock_file)), false) = (&spec, lock, ctx.has_errors()) {
        lock::check::check_spec(&mut ctx, spec, lock, lock_file);
    }
    let has_errors = ctx.has_errors();
    Checked {
        spec: if has_errors { None } else { spec },
        diagnostics: ctx.finish(),
    }
}

/// Checks a spec read as bytes: one that is not UTF-8 is an error at its
/// first invalid byte ([`source::decode`]), like any other spec error.
pub fn check_bytes(bytes: Vec<u8>, file: &str) -> Checked {
    check_bytes_with_lock(bytes, file, None)
}

/// [`check_bytes`], then [`check_str_with_lock`].
pub fn check_bytes_with_lock(bytes: Vec<u8>, file: &str, lock: Option<(&Lock, &str)>) -> Checked {
    match source::decode(bytes, file) {
        Ok(text) => check_str_with_lock(&text, file, lock),
        Err(diagnostic) => Checked {
            spec: None,
            diagnostics: vec![*diagnostic],
        },
    }
}

/// Reads and checks a spec file; diagnostics carry the path as given. Only
/// a file that cannot be read is an `Err`; one that is not UTF-8 is a diagnostic.
pub fn check_file(path: &Path) -> std::io::Result<Checked> {
    let bytes = std::fs::read(path)?;
    Ok(check_bytes(bytes, &path.display().to_string()))
}
