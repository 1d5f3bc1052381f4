//! Checks that the derive inputs describe a wire format that can work, before any code is generated.

use std::collections::HashMap;

use crate::ast::{Envelope, FieldEnum};
use crate::attr::FieldDefault;
use crate::errors::Errors;
use crate::field_type;

/// Header field names the runtime writes before the body of every entry:
/// the spec's list, which the runtime's `envelope::header_fields` is. The UI
/// test `header_name_collision` uses every name here.
const HEADER_FIELDS: &[&str] = queuegen_spec::limits::header_fields::ALL;

pub(crate) fn envelope(envelope: &Envelope<'_>, errors: &mut Errors) {
    container(envelope, errors);

    let mut wire_names: HashMap<String, &syn::Ident> = HashMap::new();
    for field in &envelope.fields {
        let wire_name = field.wire_name();
        if wire_name.is_empty() {
            errors.push(field.wire_name_error("the wire name of a field must not be empty"));
        } else if HEADER_FIELDS.contains(&wire_name.as_str()) {
            let message = if field.attrs.rename.is_some() {
                format!(
                    "`{wire_name}` is an envelope header field, which the runtime writes itself; \
                     choose another wire name"
                )
            } else {
                format!(
                    "`{wire_name}` is an envelope header field, which the runtime writes itself; \
                     rename the field, or give it another wire name with \
                     `#[envelope(rename = \"...\")]`"
                )
            };
            errors.push(field.wire_name_error(message));
        } else if let Some(first) = wire_names.get(&wire_name) {
            errors.push(field.wire_name_error(format_args!(
                "fields `{first}` and `{}` would both be written as `{wire_name}`; \
                 give one of them another wire name with `#[envelope(rename = \"...\")]`",
                field.ident
            )));
        } else {
            wire_names.insert(wire_name, field.ident);
        }

        if let Some(max_bytes) = &field.attrs.max_bytes {
            if max_bytes.value == 0 {
                errors.push(max_bytes.error(
                    "`max_bytes` must be at least 1; leave it out for a field without a limit",
                ));
            }
        }
        if let Some(default) = &field.attrs.default {
            let option_inner = field_type::option_inner(field.ty);
            match &default.value {
                FieldDefault::Trait if option_inner.is_some() => errors.push(default.error(
                    "`default` is redundant on an `Option` field: \
                     an absent `Option` field already decodes as `None`",
                )),
                FieldDefault::Text(_) if option_inner.is_some() => errors.push(default.error(
                    "`default = \"...\"` does not apply to an `Option` field: \
                     an absent `Option` field decodes as `None`; \
                     drop the `Option` to decode an absent field as the default",
                )),
                FieldDefault::Text(text) => {
                    if let Some(problem) = field_type::default_text_problem(field.ty, text) {
                        errors.push(default.error(problem));
                    }
                }
                FieldDefault::Trait => {}
            }
        }
    }
}

/// `name`, `schema` and `accepts` of the struct.
fn container(envelope: &Envelope<'_>, errors: &mut Errors) {
    let attrs = &envelope.attrs;
    if let Some(name) = &attrs.name {
        if name.value.is_empty() {
            errors.push(name.error("the envelope name must not be empty"));
        }
    }

    let schema_is_valid = match &attrs.schema {
        Some(schema) if schema.value == 0 => {
            errors.push(schema.error("schema versions start at 1"));
            false
        }
        _ => true,
    };

    let Some(accepts) = &attrs.accepts else {
        return;
    };
    let mut seen = Vec::with_capacity(accepts.value.len());
    for version in &accepts.value {
        if version.value == 0 {
            errors.push(version.error("schema versions start at 1"));
        } else if seen.contains(&version.value) {
            errors.push(version.error(format_args!(
                "schema version {} is listed twice",
                version.value
            )));
        } else {
            seen.push(version.value);
        }
    }
    // With `spec` and no `schema`, the schema comes from the spec, which
    // `drift` compares `accepts` with instead.
    let schema_from_spec = attrs.spec.is_some() && attrs.schema.is_none();
    let schema = envelope.schema();
    if schema_is_valid && !schema_from_spec && !seen.contains(&schema) {
        errors.push(accepts.error(format_args!(
            "`accepts` must include the schema version this struct is written with ({schema}): \
             a worker must decode what its own producer writes"
        )));
    }
}

pub(crate) fn field_enum(field_enum: &FieldEnum<'_>, errors: &mut Errors) {
    let mut wire_values: HashMap<String, &syn::Ident> = HashMap::new();
    for variant in &field_enum.variants {
        let wire_value = variant.wire_value();
        if wire_value.is_empty() {
            errors.push(variant.wire_value_error("the wire value of a variant must not be empty"));
        } else if let Some(first) = wire_values.get(&wire_value) {
            errors.push(variant.wire_value_error(format_args!(
                "variants `{first}` and `{}` would both be written as `{wire_value}`; \
                 give one of them another value with `#[field(rename = \"...\")]`",
                variant.ident
            )));
        } else {
            wire_values.insert(wire_value, variant.ident);
        }
    }
}
