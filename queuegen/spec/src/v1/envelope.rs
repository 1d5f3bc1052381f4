//! Envelopes and their fields: names, types, enum values, defaults and bounds.

use crate::limits::{library, HEADER_FIELDS};
use crate::model::{Envelope, Field, FieldType};
use crate::suggest;
use crate::yaml::Node;

use super::changes::{changes, older_versions_decode};
use super::format::{ENVELOPE, FIELD, FIELD_TYPES};
use super::names;
use super::read::{entries, object, At, Ctx, Item, Object, Read};
use super::values;

/// An envelope as far as it could be read; `model` only if it is valid.
pub(crate) struct EnvelopeDef {
    pub name: String,
    /// The envelope's key in `envelopes`.
    pub at: At,
    /// Every field by name, for partition_by; `None` when `fields` itself
    /// is malformed, so nothing can be said about them.
    pub fields: Option<Vec<FieldDef>>,
    /// Fields some version removed, with that version, for partition_by.
    pub removed: Vec<(String, u32)>,
    pub model: Option<Envelope>,
}

pub(crate) struct FieldDef {
    pub name: String,
    /// `None` when `optional` is malformed.
    pub optional: Option<bool>,
}

const U32_MAX: u64 = u32::MAX as u64;

pub(crate) fn envelope(ctx: &mut Ctx<'_>, name: &str, item: &Item<'_>) -> EnvelopeDef {
    let name_ok = names::is_upper_camel(name);
    if !name_ok {
        ctx.error(
            &item.key(),
            format!("envelope name `{name}` is not UpperCamelCase"),
            format!(
                "rename it to `{}`; it is also the generated struct's name",
                names::to_upper_camel(name)
            ),
        );
    }
    let obj = object(ctx, item, &ENVELOPE);
    let schema = obj
        .count(ctx, "schema", "schema versions are whole numbers from 1")
        .or(0)
        .filter(|s| *s > 0)
        .map(|s| s as u32);
    let accepts = accepts(ctx, &obj, schema);
    let mut defs = Some(Vec::new());
    let mut field_keys = Vec::new();
    let fields = match obj.get("fields") {
        None => Some(Vec::new()),
        Some(fields_item) => fields(ctx, fields_item, &mut defs, &mut field_keys),
    };
    let changes = match obj.get("changes") {
        None => Some(Vec::new()),
        Some(changes_item) => changes(ctx, changes_item, schema, fields.as_deref()),
    };
    let removed = changes
        .iter()
        .flatten()
        .flat_map(|c| c.removed.iter().map(|f| (f.name.clone(), c.version)))
        .collect();
    let model = match (name_ok, schema, accepts, fields, changes) {
        (true, Some(schema), Some(accepts), Some(fields), Some(changes)) => Some(Envelope {
            name: name.to_owned(),
            schema,
            accepts: accepts.unwrap_or_else(|| vec![schema]),
            fields,
            changes,
        }),
        _ => None,
    };
    if let Some(model) = &model {
        older_versions_decode(ctx, model, &field_keys);
    }
    EnvelopeDef {
        name: name.to_owned(),
        at: item.key(),
        fields: defs,
        removed,
        model,
    }
}

/// `accepts`: `Some(None)` when absent (defaults to `[schema]`).
fn accepts(ctx: &mut Ctx<'_>, obj: &Object<'_>, schema: Option<u32>) -> Option<Option<Vec<u32>>> {
    let read = obj.read(ctx, "accepts", |ctx, it| {
        let items = values::list(ctx, it, "[1, 2]")?;
        let mut versions: Vec<u32> = Vec::new();
        let mut ok = true;
        for version in items {
            match values::count(
                ctx,
                &version,
                1,
                U32_MAX,
                "schema versions are whole numbers from 1",
            ) {
                Some(v) if versions.contains(&(v as u32)) => {
                    ok = ctx.fail(
                        &version.value(),
                        format!("schema version {v} is listed twice"),
                        "list each accepted version once",
                    )
                }
                Some(v) => versions.push(v as u32),
                None => ok = false,
            }
        }
        ok.then_some(versions)
    });
    if let (Read::Ok(versions), Some(schema)) = (&read, schema) {
        if let Some(newer) = versions.iter().find(|v| **v > schema) {
            return ctx.refuse(
                &obj.at("accepts"),
                format!("lists {newer}, newer than the current schema {schema}"),
                format!("a worker cannot know the fields of a version this spec does not describe: remove {newer}, and add it when schema {newer} is written here"),
            );
        }
        if !versions.contains(&schema) {
            let mut fixed = versions.clone();
            fixed.push(schema);
            fixed.sort_unstable();
            let fixed: Vec<String> = fixed.iter().map(u32::to_string).collect();
            return ctx.refuse(
                &obj.at("accepts"),
                format!("does not contain the current schema {schema}"),
                format!(
                    "workers must decode what producers write: accepts: [{}]",
                    fixed.join(", ")
                ),
            );
        }
    }
    read.optional()
}

fn fields(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    defs: &mut Option<Vec<FieldDef>>,
    keys: &mut Vec<(String, At)>,
) -> Option<Vec<Field>> {
    let Some(found) = entries(
        ctx,
        item,
        "a mapping of field names to field definitions",
        "write fields as `name: { type: string, max_bytes: 200 }`",
    ) else {
        *defs = None;
        return None;
    };
    let list = defs.get_or_insert_with(Vec::new);
    let mut out = Vec::new();
    let mut ok = true;
    let most = library::MAX_ENVELOPE_FIELDS as usize - HEADER_FIELDS.len();
    if found.len() > most {
        ok = ctx.fail(
            &item.key(),
            format!(
                "{} fields; with the {} header fields an entry would have more than the Function library's MAX_ENVELOPE_FIELDS ({}), and every transition of it would be refused",
                found.len(),
                HEADER_FIELDS.len(),
                library::MAX_ENVELOPE_FIELDS
            ),
            format!("keep an envelope to at most {most} fields: group related values into one field"),
        );
    }
    for (name, field_item) in found {
        keys.push((name.clone(), field_item.key()));
        match field(ctx, &name, &field_item, list, false) {
            Some(field) => out.push(field),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// One field definition; `historic` for a field a later version removed,
/// which is only described, so the warnings about payloads do not apply.
pub(crate) fn field(
    ctx: &mut Ctx<'_>,
    name: &str,
    item: &Item<'_>,
    defs: &mut Vec<FieldDef>,
    historic: bool,
) -> Option<Field> {
    let name_ok = field_name(ctx, name, item);
    let obj = object(ctx, item, &FIELD);
    let ty_name = obj.read(ctx, "type", |ctx, it| {
        values::choice(ctx, it, FIELD_TYPES, "field type")
    });
    let values = enum_values(ctx, &obj, &ty_name);
    let ty = match (&ty_name, values) {
        (Read::Ok(ty), Some(values)) => FieldType::from_spec_name(ty, values),
        _ => None,
    };
    let optional = obj.read(ctx, "optional", values::boolean).or(false);
    let max_bytes = obj.read(ctx, "max_bytes", values::size);
    let max_bytes = match (&ty, max_bytes) {
        (Some(ty), Read::Ok(_)) if *ty != FieldType::String => {
            let bound = ty.max_encoded_bytes().map_or(String::new(), |b| {
                format!("; a {} is at most {b} bytes anyway", ty.spec_name())
            });
            ctx.refuse(
                &obj.at("max_bytes"),
                format!(
                    "max_bytes applies only to string fields, not {}",
                    ty.spec_name()
                ),
                format!("remove max_bytes{bound}"),
            )
        }
        (_, read) => read.optional(),
    };
    if let (false, Some(FieldType::String), Some(None)) = (historic, &ty, &max_bytes) {
        ctx.warning(
            &item.key(),
            "string field has no max_bytes, so the payload.max_bytes of queues carrying this envelope cannot be checked statically",
            "add max_bytes (e.g. max_bytes: 256); producers still reject an entry over payload.max_bytes when publishing",
        );
    }
    if let (true, false, Some(FieldType::String)) = (name_ok, historic, &ty) {
        if let Some(word) = names::credential_word(name) {
            ctx.error(
                &item.key(),
                format!("field name looks like a credential (contains `{word}`); stream entries are replicated, persisted and readable with XRANGE"),
                "carry a reference (e.g. secret_ref) instead of the value",
            );
        }
    }
    let default = match (&ty, obj.get("default")) {
        (_, None) => Some(None),
        (None, Some(_)) => None,
        (Some(ty), Some(default_item)) => {
            let flat_max = max_bytes.flatten();
            default_value(ctx, default_item, ty, flat_max).map(Some)
        }
    };
    if let (Some(true), Some(Some(_))) = (optional, &default) {
        return ctx.refuse(
            &obj.at("default"),
            "a field with a default is never absent, so `optional: true` and `default` contradict each other",
            "remove `optional: true` (absent values take the default) or remove the default",
        );
    }
    defs.push(FieldDef {
        name: name.to_owned(),
        optional,
    });
    if !name_ok {
        return None;
    }
    Some(Field {
        name: name.to_owned(),
        ty: ty?,
        optional: optional?,
        default: default?,
        max_bytes: max_bytes?,
    })
}

fn field_name(ctx: &mut Ctx<'_>, name: &str, item: &Item<'_>) -> bool {
    if !names::is_snake_case(name) {
        return ctx.fail(
            &item.key(),
            format!("field name `{name}` is not a snake_case identifier"),
            format!(
                "rename it to `{}` (lowercase words joined by `_`, starting with a letter)",
                names::to_snake_case(name)
            ),
        );
    }
    if names::is_header_field(name) {
        let all: Vec<_> = HEADER_FIELDS.iter().map(|h| h.name).collect();
        return ctx.fail(
            &item.key(),
            format!("field `{name}` collides with the header field of the same name"),
            format!(
                "every envelope already carries {}; rename this field",
                all.join(", ")
            ),
        );
    }
    true
}

/// `values` of an enum field; `Some(vec![])` for other types.
fn enum_values(
    ctx: &mut Ctx<'_>,
    obj: &Object<'_>,
    ty: &Read<&'static str>,
) -> Option<Vec<String>> {
    let is_enum = matches!(ty, Read::Ok("enum"));
    if !is_enum {
        if let (Read::Ok(ty), Some(item)) = (ty, obj.get("values")) {
            return ctx.refuse(
                &item.key(),
                format!("`values` applies only to enum fields, not {ty}"),
                "remove `values`, or set `type: enum`",
            );
        }
        return Some(Vec::new());
    }
    let Some(item) = obj.get("values") else {
        return ctx.refuse(
            &obj.anchor().about(format!("{}.values", obj.anchor().path)),
            "enum field has no `values`",
            "list the allowed values, e.g. values: [low, normal, high]",
        );
    };
    let items = values::list(ctx, item, "[low, normal, high]")?;
    if items.is_empty() {
        return ctx.refuse(
            &item.value(),
            "an enum needs at least one value",
            "list the allowed values, e.g. values: [low, normal, high]",
        );
    }
    let mut out: Vec<String> = Vec::new();
    let mut ok = true;
    for value in items {
        let text = match value.node {
            Node::Str(text) => text.clone(),
            other => {
                ok = ctx.fail(
                    &value.value(),
                    format!("expected a snake_case name, found {}", other.kind()),
                    "enum values are snake_case names such as `high`",
                );
                continue;
            }
        };
        if !names::is_snake_case(&text) {
            ok = ctx.fail(
                &value.value(),
                format!("enum value `{text}` is not snake_case"),
                format!("write it as `{}`", names::to_snake_case(&text)),
            );
        } else if out.contains(&text) {
            ok = ctx.fail(
                &value.value(),
                format!("enum value `{text}` is listed twice"),
                "list each value once",
            );
        } else {
            out.push(text);
        }
    }
    ok.then_some(out)
}

/// A default normalized to its canonical text, checked against the type.
fn default_value(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    ty: &FieldType,
    max_bytes: Option<u64>,
) -> Option<String> {
    constant_value(ctx, item, ty, max_bytes, "default")
}

/// A constant of a field's type (a default, a schedule's body value)
/// normalized to its canonical text, which is also its encoding in a stream
/// entry. `what` names it in messages.
pub(crate) fn constant_value(
    ctx: &mut Ctx<'_>,
    item: &Item<'_>,
    ty: &FieldType,
    max_bytes: Option<u64>,
    what: &str,
) -> Option<String> {
    let at = item.value();
    let scalar = match item.node {
        Node::Null | Node::Seq(_) | Node::Map(_) => {
            return ctx.refuse(
                &at,
                format!(
                    "expected a {} value, found {}",
                    ty.spec_name(),
                    item.node.kind()
                ),
                format!("a {what} is a single value of the field's type, e.g. false, 3 or normal"),
            )
        }
        Node::Float(_) if *ty == FieldType::String => {
            return ctx.refuse(
                &at,
                format!("a decimal number as a string {what} is ambiguous"),
                format!("quote it: {what}: \"{}\"", item.node.key_text()),
            )
        }
        other => other.key_text(),
    };
    let (normalized, expected): (Option<String>, String) = match ty {
        FieldType::String => (Some(scalar.clone()), String::new()),
        FieldType::Bool => (
            matches!(scalar.as_str(), "true" | "false").then(|| scalar.clone()),
            "true or false".to_owned(),
        ),
        FieldType::U32 | FieldType::U64 | FieldType::I32 | FieldType::I64 => {
            let (min, max) = ty.int_range().expect("an integer type");
            let n = match item.node {
                Node::Int(n) => Some(*n),
                Node::Str(text) => text.parse::<i128>().ok(),
                _ => None,
            };
            let article = if min < 0 { "an" } else { "a" };
            (
                n.filter(|n| (min..=max).contains(n)).map(|n| n.to_string()),
                format!("{article} {} ({min} to {max})", ty.spec_name()),
            )
        }
        FieldType::Timestamp => (
            is_timestamp(&scalar).then(|| scalar.clone()),
            "an RFC 3339 UTC timestamp with milliseconds, e.g. 2024-01-31T09:30:00.000Z".to_owned(),
        ),
        FieldType::Enum { values } => {
            if values.contains(&scalar) {
                (Some(scalar.clone()), String::new())
            } else {
                return ctx.refuse(
                    &at,
                    format!("{what} `{scalar}` is not one of the enum's values"),
                    suggest::help(&scalar, values.iter().map(String::as_str), "the values are"),
                );
            }
        }
    };
    let Some(normalized) = normalized else {
        return ctx.refuse(
            &at,
            format!("{what} `{scalar}` is not {expected}"),
            format!("give a {what} of the field's type: {expected}"),
        );
    };
    if let Some(max) = max_bytes {
        if normalized.len() as u64 > max {
            return ctx.refuse(
                &at,
                format!(
                    "{what} is {} bytes, more than the field's max_bytes of {max}",
                    normalized.len()
                ),
                format!("shorten the {what} or raise max_bytes"),
            );
        }
    }
    Some(normalized)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` with a real calendar date.
fn is_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 24 {
        return false;
    }
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let shaped = b.iter().zip(shape).all(|(c, s)| {
        if *s == b'd' {
            c.is_ascii_digit()
        } else {
            c == s
        }
    });
    if !shaped {
        return false;
    }
    let num = |range: std::ops::Range<usize>| text[range].parse::<u32>().unwrap_or(u32::MAX);
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day) && num(11..13) < 24 && num(14..16) < 60 && num(17..19) < 60
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert!(is_timestamp("2024-01-31T09:30:00.000Z"));
        assert!(is_timestamp("2024-02-29T23:59:59.999Z"));
        assert!(!is_timestamp("2023-02-29T00:00:00.000Z"));
        assert!(!is_timestamp("2024-01-31T09:30:00Z"));
        assert!(!is_timestamp("2024-01-31 09:30:00.000Z"));
        assert!(!is_timestamp("2024-13-01T00:00:00.000Z"));
        assert!(!is_timestamp("2024-01-01T24:00:00.000Z"));
    }
}
