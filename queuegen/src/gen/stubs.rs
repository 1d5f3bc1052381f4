//! Handler skeletons (`--stubs`): written once per queue, then owned by the team.

use std::path::PathBuf;

use serde::Serialize;

use super::rust::{queue_context, QueueContext};
use super::templates::render;
use super::GeneratedFile;
use crate::error::Result;
use crate::spec::model::Spec;

/// One `<queue>_handler.rs` per queue. `module_path` is where the generated
/// module tree is mounted in the team's crate, e.g. `crate::queues`.
pub fn generate(spec: &Spec, module_path: &str) -> Result<Vec<GeneratedFile>> {
    #[derive(Serialize)]
    struct StubContext<'a> {
        queue: &'a QueueContext,
        module_path: &'a str,
    }
    spec.queues
        .iter()
        .map(|queue| {
            let queue = queue_context(spec, queue);
            Ok(GeneratedFile {
                path: PathBuf::from(format!(
                    "{}_handler.rs",
                    queue.module.trim_start_matches("r#")
                )),
                contents: render(
                    "handler_stub.rs",
                    StubContext {
                        queue: &queue,
                        module_path,
                    },
                )?,
            })
        })
        .collect()
}
