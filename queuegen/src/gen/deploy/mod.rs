//! Deploy artefacts: everything `generate --deploy-out DIR` writes beside the Function library.
//!
//! One module per artefact kind, each a pure function of the validated spec,
//! each file opening with the generated header in its own comment syntax so
//! that `--check` finds drift and stale files in every one of them.

pub mod acl;
pub mod conf;
pub mod k8s;
pub mod prometheus;
pub mod runbook;
pub mod sql;

use sha2::{Digest, Sha256};

use super::{functions, GeneratedFile};
use crate::error::Result;
use crate::spec::model::Spec;

/// Every deploy artefact of `spec`, paths relative to the deploy directory;
/// `source` is the spec's text (the Kubernetes ConfigMap carries it).
pub fn generate(spec: &Spec, spec_file: &str, source: &str) -> Result<Vec<GeneratedFile>> {
    let mut files = vec![
        functions::generate(spec, spec_file)?,
        acl::generate(spec, spec_file)?,
        conf::generate(spec, spec_file)?,
        prometheus::generate(spec, spec_file)?,
        runbook::generate(spec, spec_file)?,
    ];
    files.extend(k8s::generate(spec, spec_file, source)?);
    files.extend(sql::generate(spec, spec_file));
    Ok(files)
}

/// The SHA-256 of `text`, as lowercase hex.
fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `text` as a double-quoted YAML scalar: a JSON string is one, and quoting
/// every value from the spec spares YAML any reading of `{`, `:` or `"` in it.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string always serializes")
}
