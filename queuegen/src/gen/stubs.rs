//! Handler skeletons (`--stubs`): written once per queue, with a `mod.rs`
//! declaring them, then owned by the team.

use std::path::PathBuf;

use serde::Serialize;

use super::rust::{queue_context, QueueContext};
use super::templates::render;
use super::GeneratedFile;
use crate::error::Result;
use crate::spec::model::Spec;

/// The file that declares the stub modules of [`generate`], `mod.rs` of the
/// stubs directory, so that `mod handlers;` in the team's crate mounts them.
pub fn module_list(spec: &Spec) -> Result<GeneratedFile> {
    let mut modules: Vec<String> = spec
        .queues
        .iter()
        .map(|queue| stub_module(&queue_context(spec, queue)))
        .collect();
    // The order rustfmt keeps `mod` declarations in.
    modules.sort_unstable();
    Ok(GeneratedFile {
        path: PathBuf::from("mod.rs"),
        contents: render(
            "handlers_mod.rs",
            minijinja::context! { service => &spec.service, modules => modules },
        )?,
    })
}

/// The stub's module name, also its file stem: `<queue>_handler`. A queue
/// named like a keyword (`r#type`) gives `type_handler`, which is not one.
fn stub_module(queue: &QueueContext) -> String {
    format!("{}_handler", queue.module.trim_start_matches("r#"))
}

/// Columns of the one-line `handle` signature in the stub, as rustfmt counts them.
fn handle_signature_width(envelope: &str) -> usize {
    "    async fn handle(&self, job: , ctx: &JobContext) -> Result<Outcome, JobError> {".len()
        + envelope.len()
}

/// One `<queue>_handler.rs` per queue. `module_path` is where the generated
/// module tree is mounted in the team's crate, e.g. `crate::queues`.
pub fn generate(spec: &Spec, module_path: &str) -> Result<Vec<GeneratedFile>> {
    #[derive(Serialize)]
    struct StubContext<'a> {
        queue: &'a QueueContext,
        module_path: &'a str,
        /// Whether `handle`'s signature fits rustfmt's 100 columns on one line.
        one_line_signature: bool,
    }
    spec.queues
        .iter()
        .map(|queue| {
            let queue = queue_context(spec, queue);
            Ok(GeneratedFile {
                path: PathBuf::from(format!("{}.rs", stub_module(&queue))),
                contents: render(
                    "handler_stub.rs",
                    StubContext {
                        one_line_signature: handle_signature_width(&queue.envelope) <= 100,
                        queue: &queue,
                        module_path,
                    },
                )?,
            })
        })
        .collect()
}
