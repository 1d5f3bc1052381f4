//! Older schema versions in generated code: a struct per version, a `From` per step, one `Upcast`.
//!
//! A worker decodes an entry of an older accepted version into that
//! version's struct, then converts it step by step up to the current
//! struct, each step as the spec's `changes.N` declares it. Chaining steps
//! (rather than converting each version directly) keeps every conversion
//! small and lets a team write one step by hand (`upcast: manual`).

use serde::Serialize;

use super::naming::{field_name, upper_camel};
use super::prose_list;
use super::rust::{enum_type, field_context, EnumContext, FieldContext};
use crate::error::{Error, Result};
use crate::spec::evolution::{FieldSource, VersionField};
use crate::spec::model::{Envelope, Field, FieldType, UpcastKind};
use queuegen_runtime::{FieldValue, Timestamp};

/// Everything an envelope with older accepted versions adds to envelopes.rs.
#[derive(Serialize)]
pub(super) struct OlderVersions {
    structs: Vec<OlderStruct>,
    conversions: Vec<Conversion>,
    arms: Vec<UpcastArm>,
}

/// The struct of one older version.
#[derive(Serialize)]
struct OlderStruct {
    name: String,
    schema: u32,
    /// Accepted versions are decoded (`#[derive(Envelope)]`); the others
    /// are only steps on the way up.
    accepted: bool,
    fields: Vec<FieldContext>,
    /// Enums of fields a later version removed.
    enums: Vec<EnumContext>,
}

/// `impl From<{from}> for {to}`: the step to schema `version`.
#[derive(Serialize)]
struct Conversion {
    from: String,
    to: String,
    version: u32,
    /// What the step changes, for its doc comment.
    summary: String,
    /// `upcast: manual`: the team writes this impl.
    manual: bool,
    /// The parameter, named after the version it holds: `v2`.
    binding: String,
    assignments: Vec<Assignment>,
}

#[derive(Serialize)]
struct Assignment {
    ident: String,
    expr: String,
    /// The spec's text of a default the expression does not show (a
    /// timestamp's), for the conversion's doc.
    default_text: Option<String>,
}

/// One `match` arm of `Upcast::decode_older`: decode `version` as its
/// struct `decoded`, convert through `steps`, then from `last` to the current.
#[derive(Serialize)]
struct UpcastArm {
    version: u32,
    decoded: String,
    steps: Vec<UpcastStep>,
    last: u32,
}

/// `let v{version} = {name}::from(v{version - 1});`
#[derive(Serialize)]
struct UpcastStep {
    version: u32,
    name: String,
}

/// Whether the envelope accepts a version older than the one it writes.
pub(super) fn has_older(envelope: &Envelope) -> bool {
    envelope.oldest_accepted() < envelope.schema
}

/// The struct name of `version`: the current one is the envelope's name.
fn struct_name(envelope: &Envelope, version: u32) -> String {
    if version == envelope.schema {
        envelope.name.clone()
    } else {
        format!("{}V{version}", envelope.name)
    }
}

pub(super) fn older_versions(envelope: &Envelope) -> Result<Option<OlderVersions>> {
    if !has_older(envelope) {
        return Ok(None);
    }
    let oldest = envelope.oldest_accepted();
    let structs = (oldest..envelope.schema)
        .rev()
        .map(|version| older_struct(envelope, version))
        .collect::<Result<Vec<_>>>()?;
    let conversions = (oldest + 1..=envelope.schema)
        .map(|version| conversion(envelope, version))
        .collect::<Result<Vec<_>>>()?;
    let accepted = envelope.older_accepted();
    let arms = accepted
        .into_iter()
        .map(|version| upcast_arm(envelope, version))
        .collect();
    Ok(Some(OlderVersions {
        structs,
        conversions,
        arms,
    }))
}

fn older_struct(envelope: &Envelope, version: u32) -> Result<OlderStruct> {
    let mut fields = Vec::new();
    let mut enums = Vec::new();
    for vf in envelope.fields_of(version) {
        let (enum_name, owns_enum) = older_enum_type(envelope, version, &vf);
        let (context, enum_context) = field_context(&vf.field, &enum_name)?;
        fields.push(context);
        if owns_enum {
            enums.extend(enum_context);
        }
    }
    Ok(OlderStruct {
        name: struct_name(envelope, version),
        schema: version,
        accepted: envelope.accepts.contains(&version),
        fields,
        enums,
    })
}

/// The enum type of a field of an older version, and whether this
/// version's struct declares it. A field the current schema still has
/// shares the current enum (a field's type never changes); a removed one
/// gets its own, declared beside the last version that had it.
fn older_enum_type(envelope: &Envelope, version: u32, vf: &VersionField) -> (String, bool) {
    if let Some(current) = envelope.field(vf.current.as_deref().unwrap_or_default()) {
        return (enum_type(envelope, current), false);
    }
    let removed_in = envelope
        .changes
        .iter()
        .filter(|c| c.version > version)
        .find(|c| c.removed.iter().any(|f| f.name == vf.field.name))
        .map_or(version + 1, |c| c.version);
    let last = removed_in - 1;
    (
        format!("{}V{last}{}", envelope.name, upper_camel(&vf.field.name)),
        last == version,
    )
}

fn conversion(envelope: &Envelope, version: u32) -> Result<Conversion> {
    let change = envelope.change(version);
    let binding = format!("v{}", version - 1);
    let mut assignments = Vec::new();
    for (field, source) in envelope.step(version) {
        let expr = match &source {
            FieldSource::Carried { previous } => format!("{binding}.{}", field_name(previous)),
            FieldSource::Added => match added_value(envelope, &field)? {
                Some(expr) => expr,
                None if change.is_some_and(|c| c.upcast == UpcastKind::Manual) => String::new(),
                None => {
                    return Err(Error::Unsupported(format!(
                        "envelope {}: schema {version} added the required field `{}` without a default, \
                         so entries of schema {} cannot be converted; give it a default, or write the \
                         conversion yourself (changes.{version}.upcast: manual)",
                        envelope.name,
                        field.name,
                        version - 1
                    )))
                }
            },
        };
        let default_text = match (&source, &field.ty) {
            (FieldSource::Added, FieldType::Timestamp) if !field.optional => field.default.clone(),
            _ => None,
        };
        assignments.push(Assignment {
            ident: field_name(&field.name),
            expr,
            default_text,
        });
    }
    Ok(Conversion {
        from: struct_name(envelope, version - 1),
        to: struct_name(envelope, version),
        version,
        summary: summary(envelope, version),
        manual: change.is_some_and(|c| c.upcast == UpcastKind::Manual),
        binding,
        assignments,
    })
}

/// "Schema 3 renamed `document_ref` to `subject_ref`, added `language` and removed `dpi`."
fn summary(envelope: &Envelope, version: u32) -> String {
    let Some(change) = envelope.change(version) else {
        return format!("Schema {version} changed no fields.");
    };
    let names =
        |names: Vec<&str>| prose_list(&names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>());
    let mut parts = Vec::new();
    if !change.renamed.is_empty() {
        let renames: Vec<String> = change
            .renamed
            .iter()
            .map(|r| format!("`{}` to `{}`", r.from, r.to))
            .collect();
        parts.push(format!("renamed {}", renames.join(", ")));
    }
    if !change.added.is_empty() {
        let added = names(change.added.iter().map(String::as_str).collect());
        parts.push(format!("added {added}"));
    }
    if !change.removed.is_empty() {
        let removed = names(change.removed.iter().map(|f| f.name.as_str()).collect());
        parts.push(format!("removed {removed}"));
    }
    if parts.is_empty() {
        return format!("Schema {version} changed no fields.");
    }
    let last = parts.pop().expect("not empty");
    match parts.len() {
        0 => format!("Schema {version} {last}."),
        1 => format!("Schema {version} {} and {last}.", parts[0]),
        _ => format!("Schema {version} {}, and {last}.", parts.join(", ")),
    }
}

/// The value a field added in a later version takes: its default, or
/// `None` when it is optional; `None` (no expression) when it has neither.
fn added_value(envelope: &Envelope, field: &Field) -> Result<Option<String>> {
    if field.optional {
        return Ok(Some("None".to_owned()));
    }
    let Some(default) = &field.default else {
        return Ok(None);
    };
    let expr = match &field.ty {
        FieldType::Enum { .. } => match envelope.field(&field.name) {
            Some(current) => format!("{}::{}", enum_type(envelope, current), upper_camel(default)),
            None => {
                return Err(Error::Unsupported(format!(
                    "envelope {}: the enum field `{}` was added and removed again; \
                     write that conversion yourself (upcast: manual)",
                    envelope.name, field.name
                )))
            }
        },
        FieldType::String => format!("{default:?}.to_owned()"),
        FieldType::Bool | FieldType::U32 | FieldType::U64 | FieldType::I32 | FieldType::I64 => {
            default.clone()
        }
        FieldType::Timestamp => {
            let at = Timestamp::decode_field(Some(default)).map_err(|problem| {
                Error::Unsupported(format!(
                    "envelope {}: default of `{}`: {problem}",
                    envelope.name, field.name
                ))
            })?;
            format!("Timestamp::from_unix_millis({})", at.unix_millis())
        }
    };
    Ok(Some(expr))
}

/// Decode the version's own struct, then convert one step at a time.
fn upcast_arm(envelope: &Envelope, version: u32) -> UpcastArm {
    UpcastArm {
        version,
        decoded: struct_name(envelope, version),
        steps: (version + 1..envelope.schema)
            .map(|next| UpcastStep {
                version: next,
                name: struct_name(envelope, next),
            })
            .collect(),
        last: envelope.schema - 1,
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::check_str;

    #[test]
    fn a_timestamp_default_added_by_a_step_is_named_in_the_conversion_doc() {
        let source = "\
version: 1
service: shop
envelopes:
  Order:
    schema: 2
    accepts: [1, 2]
    fields:
      order_ref: { type: string, max_bytes: 64 }
      not_before: { type: timestamp, default: \"2026-01-01T00:00:00.000Z\" }
    changes:
      2:
        added: [not_before]
queues:
  orders:
    envelope: Order
    dead_letter: { owner: shop-oncall }
";
        let checked = check_str(source, "queues.yaml");
        let spec = checked.spec.expect("valid");
        let files = crate::gen::rust::generate(&spec, "queues.yaml").unwrap();
        let envelopes = &files
            .iter()
            .find(|f| f.path.ends_with("envelopes.rs"))
            .unwrap()
            .contents;
        assert!(
            envelopes.contains(
                "/// `not_before` takes its default, `2026-01-01T00:00:00.000Z`.\n\
                 impl From<OrderV1> for Order {"
            ),
            "{envelopes}"
        );
        assert!(
            envelopes.contains("not_before: Timestamp::from_unix_millis(1767225600000),"),
            "{envelopes}"
        );
    }
}
