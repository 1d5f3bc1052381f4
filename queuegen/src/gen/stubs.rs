//! Handler skeletons (`--stubs`): written once per queue, with a `mod.rs`
//! declaring them, then owned by the team. A `results: postgres` queue's
//! skeleton makes its change in the job's PostgreSQL transaction.

use minijinja::context;

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
    let service = &spec.service;
    let contents = render("handlers_mod.rs", context! { service, modules })?;
    Ok(GeneratedFile::new("mod.rs", contents))
}

/// The stub's module name, also its file stem: `<queue>_handler`. A queue
/// named like a keyword (`r#type`) gives `type_handler`, which is not one.
fn stub_module(queue: &QueueContext) -> String {
    format!("{}_handler", queue.module.trim_start_matches("r#"))
}

/// Columns of the one-line `handle` signature in the stub, as rustfmt
/// counts them: `params` between `&self, ` and `ctx`, returning `returns`.
fn handle_signature_width(params: &str, returns: &str) -> usize {
    "    async fn handle(&self, ctx: &JobContext) ->  {".len() + params.len() + returns.len()
}

/// Columns of the one-line `change` signature of a `results: postgres` stub.
fn change_signature_width(envelope: &str) -> usize {
    "    async fn change(&self, job: &PgJob, event: &) -> Result<(), JobError> {".len()
        + envelope.len()
}

/// rustfmt's `max_width`: a longer signature is laid out one parameter a line.
const MAX_WIDTH: usize = 100;

/// One `<queue>_handler.rs` per queue. `module_path` is where the generated
/// module tree is mounted in the team's crate, e.g. `crate::queues`.
pub fn generate(spec: &Spec, module_path: &str) -> Result<Vec<GeneratedFile>> {
    spec.queues
        .iter()
        .map(|queue| {
            let queue = queue_context(spec, queue);
            // A transactional stub names the job's transaction `job`, so
            // the envelope is the `event`.
            let param = if queue.results_postgres && queue.stage.is_none() {
                "event"
            } else {
                "job"
            };
            // Whether `handle`'s signature fits rustfmt's 100 columns on one
            // line; the same for `change`, in a `results: postgres` stub.
            let mut params = format!("{param}: {}, ", queue.envelope);
            let returns = match &queue.stage {
                Some(stage) => {
                    if stage.join {
                        params.push_str("summary: RunSummary, ");
                    }
                    format!("Result<Step<{}::Next>, JobError>", queue.module)
                }
                None => "Result<Outcome, JobError>".to_owned(),
            };
            let one_line_signature = handle_signature_width(&params, &returns) <= MAX_WIDTH;
            let one_line_change = change_signature_width(&queue.envelope) <= MAX_WIDTH;
            let path = format!("{}.rs", stub_module(&queue));
            let context =
                context! { queue, module_path, one_line_signature, one_line_change, returns };
            let contents = render("handler_stub.rs", context)?;
            Ok(GeneratedFile::new(path, contents))
        })
        .collect()
}
