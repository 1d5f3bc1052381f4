//! The rules between a valid spec and its lock file, reported at their places in the spec.
//!
//! The current schema must be exactly as published (producers write it and
//! old workers read it); an accepted older version must still decode
//! everything it published; the schema never goes back.

use crate::compat::{self, definition, reads_all_of};
use crate::diagnostic::Severity;
use crate::model::{Envelope, Field, Spec};
use crate::v1::Ctx;
use crate::yaml::Target;

use super::Lock;

/// The rules between a valid spec and its lock, reported in the spec.
pub(crate) fn check_spec(ctx: &mut Ctx<'_>, spec: &Spec, lock: &Lock, lock_file: &str) {
    for envelope in &spec.envelopes {
        let Some(versions) = lock.envelopes.get(&envelope.name) else {
            not_yet_locked(ctx, envelope, lock_file);
            continue;
        };
        let newest = lock.newest(&envelope.name).unwrap_or(0);
        if newest > envelope.schema {
            ctx.report_at_keys(
                Severity::Error,
                &["envelopes", &envelope.name, "schema"],
                Target::Value,
                format!(
                    "schema {} is older than schema {newest}, already published ({lock_file}): producers would write a version older than one workers have seen",
                    envelope.schema
                ),
                format!(
                    "set `schema: {}` and describe the change in `changes`, or if schema {newest} never left your machine, `queuegen lock --force`",
                    newest + 1
                ),
            );
        } else if let Some(published) = versions.get(&envelope.schema) {
            current_is_unchanged(ctx, envelope, published, lock_file);
        } else {
            not_yet_locked(ctx, envelope, lock_file);
        }
        let older = envelope.older_accepted();
        for version in older {
            if let Some(published) = versions.get(&version) {
                older_version_decodes(ctx, envelope, version, published, lock_file);
            }
        }
    }
    for (name, versions) in &lock.envelopes {
        if spec.envelope(name).is_some() {
            continue;
        }
        let listed: Vec<String> = versions.keys().map(u32::to_string).collect();
        ctx.report_at_keys(
            Severity::Warning,
            &["envelopes", name],
            Target::Key,
            format!(
                "envelope `{name}` was published (schema {} in {lock_file}) and the spec no longer has it: its entries may remain in streams and dead-letter streams, and nothing can decode them",
                listed.join(", ")
            ),
            "keep it until none of its entries remain, then drop it from the lock with `queuegen lock --force`",
        );
    }
}

fn not_yet_locked(ctx: &mut Ctx<'_>, envelope: &Envelope, lock_file: &str) {
    let schema = envelope.schema;
    ctx.report_at_keys(
        Severity::Warning,
        &["envelopes", &envelope.name, "schema"],
        Target::Value,
        format!("schema {schema} is not recorded in {lock_file} yet"),
        format!("run `queuegen lock` when schema {schema} is published"),
    );
}

/// Rule: the current schema, once published, is exactly what producers
/// write and what workers of that version decode.
fn current_is_unchanged(
    ctx: &mut Ctx<'_>,
    envelope: &Envelope,
    published: &[Field],
    lock_file: &str,
) {
    let schema = envelope.schema;
    let next = schema + 1;
    let help = format!(
        "published versions are immutable: declare the change as schema {next} (schema: {next}, changes: {{{next}: ...}}), or if schema {schema} never left your machine, `queuegen lock --force`"
    );
    let name = envelope.name.as_str();
    let mut differs = false;
    for locked in published {
        let keys = ["envelopes", name, "fields", &locked.name];
        match envelope.field(&locked.name) {
            None => {
                differs = true;
                ctx.report_at_keys(
                    Severity::Error,
                    &keys,
                    Target::Key,
                    format!(
                        "schema {schema} was published with `{}: {}` ({lock_file}), and the spec no longer has it",
                        locked.name,
                        definition(locked)
                    ),
                    help.clone(),
                );
            }
            Some(field) => {
                let changes = compat::differences(locked, field);
                if !changes.is_empty() {
                    differs = true;
                    ctx.report_at_keys(
                        Severity::Error,
                        &keys,
                        Target::Key,
                        format!(
                            "differs from schema {schema} as published in {lock_file}: {}",
                            changes.join(", ")
                        ),
                        help.clone(),
                    );
                }
            }
        }
    }
    for field in &envelope.fields {
        if !published.iter().any(|f| f.name == field.name) {
            differs = true;
            ctx.report_at_keys(
                Severity::Error,
                &["envelopes", name, "fields", &field.name],
                Target::Key,
                format!(
                    "schema {schema} was published without `{}` ({lock_file})",
                    field.name
                ),
                help.clone(),
            );
        }
    }
    let order = |fields: &[Field]| fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    if !differs && order(published) != order(&envelope.fields) {
        ctx.report_at_keys(
            Severity::Error,
            &["envelopes", name, "fields"],
            Target::Key,
            format!(
                "fields are in another order than schema {schema} as published in {lock_file} ({}): the encoding of schema {schema} would change",
                order(published).join(", ")
            ),
            help,
        );
    }
}

/// Rule: entries of an accepted older version were written as the lock
/// says; the spec's reconstruction of that version must decode all of them.
fn older_version_decodes(
    ctx: &mut Ctx<'_>,
    envelope: &Envelope,
    version: u32,
    published: &[Field],
    lock_file: &str,
) {
    let rebuilt = envelope.fields_of(version);
    let name = envelope.name.as_str();
    let still: Vec<String> = envelope
        .accepts
        .iter()
        .filter(|v| **v != version)
        .map(u32::to_string)
        .collect();
    let stop = format!(
        "stop accepting schema {version} (accepts: [{}]) once none of its entries remain",
        still.join(", ")
    );
    for locked in published {
        let Some(reader) = rebuilt.iter().find(|vf| vf.field.name == locked.name) else {
            let (keys, target) = if envelope.changes.is_empty() {
                (vec!["envelopes", name, "accepts"], Target::Value)
            } else {
                (vec!["envelopes", name, "changes"], Target::Key)
            };
            ctx.report_at_keys(
                Severity::Error,
                &keys,
                target,
                format!(
                    "schema {version} was published with `{}: {}` ({lock_file}), but the spec's changes no longer give schema {version} that field: its history was rewritten",
                    locked.name,
                    definition(locked)
                ),
                format!(
                    "describe schema {version} as published: list `{}` under `removed` (or `renamed`) of the version that dropped it, or {stop}",
                    locked.name
                ),
            );
            continue;
        };
        if let Err(why) = reads_all_of(locked, &reader.field) {
            let keys = envelope.keys_of(version, reader);
            ctx.report_at_keys(
                Severity::Error,
                &keys,
                Target::Key,
                format!(
                    "schema {version} was published with `{}: {}` ({lock_file}), and workers would decode its entries as `{}`: {why}",
                    locked.name,
                    definition(locked),
                    definition(&reader.field)
                ),
                format!(
                    "a field's type never changes between versions: keep `{}` as published and add a new field for the new type, or {stop}",
                    locked.name
                ),
            );
        }
    }
    for reader in &rebuilt {
        let field = &reader.field;
        let absent_is_fine = field.optional || field.default.is_some();
        if absent_is_fine || published.iter().any(|f| f.name == field.name) {
            continue;
        }
        let keys = envelope.keys_of(version, reader);
        ctx.report_at_keys(
            Severity::Error,
            &keys,
            Target::Key,
            format!(
                "the spec's schema {version} has the required field `{}`, which schema {version} as published ({lock_file}) lacks: workers could not decode its entries",
                field.name
            ),
            format!(
                "if a later version added `{}`, list it under that version's `added`; otherwise make it optional or give it a default, or {stop}",
                field.name
            ),
        );
    }
}
