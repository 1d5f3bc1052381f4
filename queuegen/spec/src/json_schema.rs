//! The JSON Schema (draft 2020-12) of format v1, built from the key table in
//! `v1::format` so that editors validate exactly the keys the checker accepts.
//!
//! The schema covers structure and value shapes; semantic rules (claim
//! margin, retention floor, payload size, partition keys, ...) are only
//! enforced by `queuegen check`.

use serde_json::{json, Map, Value};

use super::v1::format::{all_objects, Obj, Prop, StrKind, Ty, SPEC};

const DURATION_PATTERN: &str = "^0*[1-9][0-9]*(ms|s|m|h|d)$";
const SIZE_PATTERN: &str = "^0*[1-9][0-9]*(B|kB|KiB|MB|MiB|GB|GiB)?$";
const STREAM_ID_PATTERN: &str = "^[0-9]+(-[0-9]+)?$";

/// The schema as a JSON value.
pub fn json_schema() -> Value {
    let mut root = object_schema(&SPEC);
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    root["title"] = json!("queuegen spec, format version 1");
    let mut defs = Map::new();
    for obj in all_objects().into_iter().skip(1) {
        defs.insert(obj.name.into(), object_schema(obj));
    }
    defs.insert(
        "Duration".into(),
        json!({
            "description": "A positive whole number and one unit: ms, s, m, h or d (250ms, 120s, 10m, 2h, 3d).",
            "type": "string",
            "pattern": DURATION_PATTERN,
        }),
    );
    defs.insert(
        "Size".into(),
        json!({
            "description": "A positive number of bytes: an integer, or a number and a unit: B, KiB, MiB, GiB (1024-based) or kB, MB, GB (1000-based).",
            "anyOf": [
                { "type": "integer", "minimum": 1 },
                { "type": "string", "pattern": SIZE_PATTERN },
            ],
        }),
    );
    root["$defs"] = Value::Object(defs);
    canonical(root)
}

/// The schema as committed in schemas/queuegen.v1.json: pretty, with a
/// trailing newline.
pub fn to_pretty_string() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).expect("JSON values serialize");
    text.push('\n');
    text
}

fn object_schema(obj: &Obj) -> Value {
    let mut properties = Map::new();
    for prop in obj.props {
        properties.insert(prop.key.into(), prop_schema(prop));
    }
    let required: Vec<&str> = obj
        .props
        .iter()
        .filter(|p| p.required)
        .map(|p| p.key)
        .collect();
    let mut schema = json!({
        "description": obj.doc,
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
    });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    if obj.name == "Field" {
        schema["allOf"] = field_rules();
    }
    schema
}

/// Rules between the keys of a field that plain properties cannot say.
fn field_rules() -> Value {
    let type_is =
        |ty: &str| json!({ "properties": { "type": { "const": ty } }, "required": ["type"] });
    json!([
        { "if": type_is("enum"), "then": { "required": ["values"] }, "else": { "not": { "required": ["values"] } } },
        { "if": type_is("string"), "else": { "not": { "required": ["max_bytes"] } } },
        { "not": { "properties": { "optional": { "const": true } }, "required": ["optional", "default"] } },
    ])
}

fn prop_schema(prop: &Prop) -> Value {
    let mut schema = ty_schema(&prop.ty);
    let description = match prop.default {
        Some(default) => format!("{} Default: {default}.", prop.doc),
        None => format!("{} Required.", prop.doc),
    };
    schema["description"] = json!(description);
    schema
}

fn ty_schema(ty: &Ty) -> Value {
    match ty {
        Ty::Version => json!({ "const": 1 }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Str(kind) => str_schema(*kind),
        Ty::Choice(options) => json!({ "type": "string", "enum": options }),
        Ty::Int { min, max } => json!({ "type": "integer", "minimum": min, "maximum": max }),
        Ty::Factor => json!({ "type": "number", "minimum": 1 }),
        Ty::Duration => json!({ "$ref": "#/$defs/Duration" }),
        Ty::Size => json!({ "$ref": "#/$defs/Size" }),
        Ty::GroupStart => json!({
            "anyOf": [
                { "const": "$" },
                { "type": "string", "pattern": STREAM_ID_PATTERN },
                { "type": "integer", "minimum": 0 },
            ]
        }),
        // A default of the field's type; decimals are ambiguous and refused.
        Ty::Scalar => json!({ "type": ["string", "boolean", "integer"] }),
        Ty::List(item) => {
            let mut schema = json!({
                "type": "array",
                "items": ty_schema(item),
                "minItems": 1,
                "uniqueItems": true,
            });
            // One lane is the same as none; `check` refuses both, and more than 16.
            if matches!(item, Ty::Object(obj) if obj.name == "Lane") {
                schema["minItems"] = json!(2);
                schema["maxItems"] = json!(16);
            }
            schema
        }
        Ty::Object(obj) => json!({ "$ref": format!("#/$defs/{}", obj.name) }),
        Ty::Renames => json!({
            "type": "object",
            "propertyNames": str_schema(StrKind::Snake),
            "additionalProperties": str_schema(StrKind::Snake),
        }),
        Ty::Constants => json!({
            "type": "object",
            "propertyNames": str_schema(StrKind::Snake),
            "additionalProperties": { "type": ["string", "boolean", "integer"] },
        }),
        Ty::Map { names, value } => {
            let mut schema = json!({
                "type": "object",
                "propertyNames": str_schema(*names),
                "additionalProperties": { "$ref": format!("#/$defs/{}", value.name) },
            });
            // A spec without queues generates nothing; `check` rejects it too.
            if value.name == "Queue" {
                schema["minProperties"] = json!(1);
            }
            schema
        }
    }
}

fn str_schema(kind: StrKind) -> Value {
    if kind == StrKind::SchemaVersion {
        // YAML reads `2:` as an integer key; JSON Schema sees property names
        // only as strings.
        return json!({ "type": "string", "pattern": kind.pattern() });
    }
    let mut schema = json!({ "type": "string", "minLength": 1 });
    if let Some(pattern) = kind.pattern() {
        schema["pattern"] = json!(pattern);
    }
    schema
}

/// Rebuilds every object with its keys inserted in sorted order, so the
/// output is the same whether or not serde_json preserves insertion order
/// (a feature another crate in the build may switch on).
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::format::FIELD_TYPES;

    #[test]
    fn every_property_has_a_description() {
        fn walk(value: &Value, path: &str) {
            if let Some(props) = value.get("properties").and_then(Value::as_object) {
                for (key, prop) in props {
                    assert!(
                        prop.get("description").and_then(Value::as_str).is_some(),
                        "{path}.{key} has no description"
                    );
                }
            }
            if let Value::Object(map) = value {
                for (key, child) in map {
                    walk(child, &format!("{path}.{key}"));
                }
            }
        }
        walk(&json_schema(), "");
    }

    #[test]
    fn objects_reject_unknown_keys() {
        let schema = json_schema();
        assert_eq!(schema["additionalProperties"], json!(false));
        for obj in all_objects().into_iter().skip(1) {
            assert_eq!(
                schema["$defs"][obj.name]["additionalProperties"],
                json!(false)
            );
        }
    }

    #[test]
    fn field_types_are_an_enum() {
        let schema = json_schema();
        assert_eq!(
            schema["$defs"]["Field"]["properties"]["type"]["enum"],
            json!(FIELD_TYPES)
        );
    }
}
