//! Helpers for subcommands that read a spec: load it valid, find a queue by name.

use std::path::Path;

use anyhow::Context;
use queuegen::spec::{self, model};

/// Reads and validates the spec, printing every diagnostic on stderr. `None`
/// when there were errors: the caller, which is about to `doing` something
/// ("generating", "applying"), exits 1 without touching anything.
pub fn valid_spec(path: &Path, doing: &str) -> anyhow::Result<Option<model::Spec>> {
    let checked = spec::check_file(path).with_context(|| format!("reading {}", path.display()))?;
    for diagnostic in &checked.diagnostics {
        eprintln!("{diagnostic}");
    }
    if checked.spec.is_none() {
        eprintln!(
            "{}: not {doing}: fix the errors above first",
            path.display()
        );
    }
    Ok(checked.spec)
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
