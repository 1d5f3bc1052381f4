//! `changes`: what each schema version changed from the one before, checked against the fields.
//!
//! The checks walk down from the current schema: every name a change lists
//! must make sense for the fields its version has, and a field that an
//! accepted older version lacks must be optional or have a default, or a
//! worker could not decode that version's entries.

use crate::compat;
use crate::evolution::VersionField;
use crate::model::{Envelope, Field, Rename, SchemaChange, UpcastKind};

use super::envelope::{field, FieldDef};
use super::format::CHANGE;
use super::read::{entries, object, At, Ctx, Item};
use super::{names, values};

/// A change as read, with the places its names were written, for errors.
struct ChangeDef {
    change: SchemaChange,
    added: Vec<At>,
    removed: Vec<At>,
    renamed: Vec<At>,
}

/// Reads `changes` and checks it against the current `fields` of an
/// envelope whose schema is `schema`. `None` when anything is wrong.
pub(crate) fn changes(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    schema: Option<u32>,
    fields: Option<&[Field]>,
) -> Option<Vec<SchemaChange>> {
    let found = entries(
        ctx,
        item,
        "a mapping of schema versions to changes",
        "write changes as `2: { added: [pages] }`: what schema 2 changed from 1",
    )?;
    let mut defs = Vec::new();
    let mut ok = true;
    for (key, change_item) in found {
        let version = version_key(ctx, &key, &change_item, schema);
        let (mut def, well_formed) = change(ctx, &change_item);
        ok &= well_formed;
        match version {
            Some(version) => {
                def.change.version = version;
                defs.push(def);
            }
            None => ok = false,
        }
    }
    let (Some(fields), Some(schema)) = (fields, schema) else {
        return None;
    };
    // The well-formed changes are still checked when others are not, so
    // one run reports every problem.
    defs.sort_by_key(|d| d.change.version);
    let fit = names_fit_their_versions(ctx, &defs, schema, fields);
    (ok && fit).then(|| defs.into_iter().map(|d| d.change).collect())
}

fn version_key(ctx: &mut Ctx<'_>, key: &str, item: &Item<'_>, schema: Option<u32>) -> Option<u32> {
    let Ok(version) = key.parse::<u32>() else {
        return ctx.refuse(
            &item.key(),
            format!("`{key}` is not a schema version"),
            "key each change by the schema version it produced: `2:` describes what schema 2 changed from 1",
        );
    };
    if version < 2 {
        return ctx.refuse(
            &item.key(),
            format!("schema {version} has no previous version to change from"),
            "key each change by the version it produced, from 2",
        );
    }
    match schema {
        Some(schema) if version > schema => ctx.refuse(
                &item.key(),
                format!("schema {version} does not exist: the current schema is {schema}"),
                format!("describe schema {version} when producers write it (schema: {version}), or fix the key"),
            ),
        _ => Some(version),
    }
}

/// The change as far as it could be read, and whether all of it could.
fn change(ctx: &mut Ctx<'_>, item: &Item<'_>) -> (ChangeDef, bool) {
    let obj = object(ctx, item, &CHANGE);
    let mut def = ChangeDef {
        change: SchemaChange {
            version: 0,
            added: Vec::new(),
            removed: Vec::new(),
            renamed: Vec::new(),
            upcast: UpcastKind::Generated,
        },
        added: Vec::new(),
        removed: Vec::new(),
        renamed: Vec::new(),
    };
    let mut ok = true;
    // A malformed list or mapping is reported; its well-formed items are still read.
    if let Some(added) = obj.get("added") {
        let items = values::list(ctx, added, "[pages]");
        ok &= items.is_some();
        for name_item in items.into_iter().flatten() {
            match field_name(ctx, &name_item) {
                Some(name) => {
                    def.change.added.push(name);
                    def.added.push(name_item.value());
                }
                None => ok = false,
            }
        }
    }
    if let Some(removed) = obj.get("removed") {
        let found = entries(
            ctx,
            removed,
            "a mapping of field names to their definitions",
            "write removed fields as `dpi: { type: u32 }`, as they were defined",
        );
        ok &= found.is_some();
        let mut defs: Vec<FieldDef> = Vec::new();
        for (name, field_item) in found.into_iter().flatten() {
            match field(ctx, &name, &field_item, &mut defs, true) {
                Some(removed_field) => {
                    def.change.removed.push(removed_field);
                    def.removed.push(field_item.key());
                }
                None => ok = false,
            }
        }
    }
    if let Some(renamed) = obj.get("renamed") {
        let found = entries(
            ctx,
            renamed,
            "a mapping of old field names to new ones",
            "write renames as `old_name: new_name`",
        );
        ok &= found.is_some();
        for (from, to_item) in found.into_iter().flatten() {
            let from_ok = names::is_snake_case(&from);
            if !from_ok {
                ctx.error(
                    &to_item.key(),
                    format!("`{from}` is not a snake_case field name"),
                    "write renames as `old_name: new_name`",
                );
            }
            match (from_ok, field_name(ctx, &to_item)) {
                (true, Some(to)) => {
                    def.change.renamed.push(Rename { from, to });
                    def.renamed.push(to_item.key());
                }
                _ => ok = false,
            }
        }
    }
    let upcasts = [UpcastKind::Generated, UpcastKind::Manual];
    match obj
        .choice(ctx, "upcast", "upcast", &upcasts)
        .or(UpcastKind::Generated)
    {
        Some(upcast) => def.change.upcast = upcast,
        None => ok = false,
    }
    (def, ok)
}

fn field_name(ctx: &mut Ctx<'_>, item: &Item<'_>) -> Option<String> {
    let name = values::string(ctx, item)?;
    if names::is_snake_case(name) {
        Some(name.to_owned())
    } else {
        ctx.refuse(
            &item.value(),
            format!("`{name}` is not a snake_case field name"),
            format!(
                "field names are snake_case, e.g. `{}`",
                names::to_snake_case(name)
            ),
        )
    }
}

/// Walks down from the current schema: each change must name fields its
/// version has (added, renamed to) or does not have (removed, renamed from).
fn names_fit_their_versions(
    ctx: &mut Ctx<'_>,
    defs: &[ChangeDef],
    schema: u32,
    fields: &[Field],
) -> bool {
    let mut names: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    for version in (2..=schema).rev() {
        let Some(def) = defs.iter().find(|d| d.change.version == version) else {
            continue;
        };
        let change = &def.change;
        let listed = || format_names(&names);
        let mut ok = true;
        for (name, at) in change.added.iter().zip(&def.added) {
            if !names.contains(name) {
                ok = ctx.fail(
                    at,
                    format!("schema {version} has no field `{name}` to have added"),
                    format!("list only fields of schema {version}: {}", listed()),
                );
            }
        }
        for (rename, at) in change.renamed.iter().zip(&def.renamed) {
            if !names.contains(&rename.to) {
                ok = ctx.fail(
                    at,
                    format!(
                        "schema {version} has no field `{}` for `{}` to be renamed to",
                        rename.to, rename.from
                    ),
                    format!(
                        "rename to one of the fields of schema {version}: {}",
                        listed()
                    ),
                );
            } else if change.added.contains(&rename.to) {
                ok = ctx.fail(
                    at,
                    format!("`{}` is listed as both added and renamed", rename.to),
                    "a renamed field carries its values over; list it under one of them",
                );
            } else if names.contains(&rename.from) {
                ok = ctx.fail(
                    at,
                    format!(
                        "schema {version} still has a field `{}`, so it cannot be the old name of `{}`",
                        rename.from, rename.to
                    ),
                    "a rename's old name is a field the previous version had and this one has not",
                );
            }
        }
        for (removed, at) in change.removed.iter().zip(&def.removed) {
            if names.contains(&removed.name) {
                ok = ctx.fail(
                    at,
                    format!(
                        "schema {version} still has `{}`, so it was not removed",
                        removed.name
                    ),
                    format!(
                        "`removed` lists fields schema {} had and {version} dropped; remove `{}` from one of `fields` and `removed`",
                        version - 1,
                        removed.name
                    ),
                );
            }
        }
        if !ok {
            // The versions below would only repeat the confusion.
            return false;
        }
        names.retain(|n| !change.added.contains(n));
        for rename in &change.renamed {
            if let Some(name) = names.iter_mut().find(|n| **n == rename.to) {
                name.clone_from(&rename.from);
            }
        }
        names.extend(change.removed.iter().map(|f| f.name.clone()));
    }
    true
}

fn format_names(names: &[String]) -> String {
    if names.is_empty() {
        return "(none)".to_owned();
    }
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every current field that an accepted older version lacks must be
/// optional or have a default: otherwise entries of that version, still in
/// streams, retry stores and dead-letter streams, cannot be decoded.
/// `field_keys` are the places of the current fields, by name.
pub(crate) fn older_versions_decode(
    ctx: &mut Ctx<'_>,
    envelope: &Envelope,
    field_keys: &[(String, At)],
) {
    let older = envelope.older_accepted();
    for field in envelope
        .fields
        .iter()
        .filter(|f| !f.optional && f.default.is_none())
    {
        let lacking: Vec<u32> = older
            .iter()
            .copied()
            .filter(|&version| {
                !envelope
                    .fields_of(version)
                    .iter()
                    .any(|vf: &VersionField| vf.current.as_deref() == Some(field.name.as_str()))
            })
            .collect();
        let Some(&version) = lacking.iter().max() else {
            continue;
        };
        let added_in = (version + 1..=envelope.schema)
            .find(|v| {
                envelope
                    .change(*v)
                    .is_some_and(|c| c.added.contains(&field.name))
            })
            .unwrap_or(version + 1);
        let Some((_, at)) = field_keys.iter().find(|(name, _)| *name == field.name) else {
            continue;
        };
        let still: Vec<String> = envelope
            .accepts
            .iter()
            .filter(|v| !lacking.contains(v))
            .map(u32::to_string)
            .collect();
        let lacking = and_list(&lacking);
        ctx.error(
            at,
            format!(
                "`{}` is required, but schema {added_in} added it and accepts still lists {lacking}, whose entries lack it: workers could not decode them",
                field.name
            ),
            format!(
                "give `{}` a default, make it `optional: true`, or stop accepting {lacking} (accepts: [{}])",
                field.name,
                still.join(", ")
            ),
        );
    }
}

/// `1`, `1 and 2`, `1, 2 and 3`.
fn and_list(versions: &[u32]) -> String {
    let mut sorted = versions.to_vec();
    sorted.sort_unstable();
    compat::and_list(sorted.iter().map(u32::to_string).collect())
}
