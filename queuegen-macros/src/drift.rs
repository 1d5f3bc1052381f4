//! Compares a struct with the spec's envelope of its queue, reporting every difference where the struct says it.
//!
//! Struct fields are matched with spec fields by wire name. The struct may
//! leave out `name`, `schema`, `accepts`, `max_bytes` and `default` (the
//! expansion takes them from the spec); whatever it does say must agree.

use queuegen_spec::model::{Field as SpecField, FieldType};

use crate::ast::{Envelope, Field};
use crate::attr::{self, FieldDefault};
use crate::errors::Errors;
use crate::field_type::{self, ValueKind};
use crate::spec_file::{quoted_list, SpecEnvelope};

pub(crate) fn check(envelope: &Envelope<'_>, spec: &SpecEnvelope, errors: &mut Errors) {
    container(envelope, spec, errors);

    let spec_fields = &spec.envelope.fields;
    let exact: Vec<Option<&SpecField>> = envelope
        .fields
        .iter()
        .map(|field| spec.envelope.field(&field.wire_name()))
        .collect();
    let unmatched: Vec<&str> = spec_fields
        .iter()
        .filter(|spec_field| !exact.iter().flatten().any(|f| f.name == spec_field.name))
        .map(|spec_field| spec_field.name.as_str())
        .collect();

    // Spec fields the struct has (under their name or, wrongly, another), or
    // that an error already suggested: not reported as missing.
    let mut accounted: Vec<&str> = Vec::new();
    for (field, spec_field) in envelope.fields.iter().zip(exact) {
        match spec_field.or_else(|| renamed_away(field, spec)) {
            Some(spec_field) => {
                accounted.push(&spec_field.name);
                compare(field, spec_field, spec, errors);
            }
            None => {
                let suggestion = attr::did_you_mean(&field.wire_name(), &unmatched);
                accounted.extend(suggestion);
                errors.push(extra_field(field, suggestion, spec));
            }
        }
    }

    for spec_field in spec_fields {
        if !accounted.contains(&spec_field.name.as_str()) {
            errors.spanned(
                envelope.ident,
                format_args!(
                    "missing field `{}`{} (spec: {}, `{}`)",
                    rust_declaration(spec_field),
                    enum_note(&spec_field.ty),
                    spec.whereabouts(),
                    spec_declaration(spec_field)
                ),
            );
        }
    }
}

/// `name`, `schema` and `accepts`, where the struct gives them.
fn container(envelope: &Envelope<'_>, spec: &SpecEnvelope, errors: &mut Errors) {
    let attrs = &envelope.attrs;
    let expected = &spec.envelope;
    if let Some(name) = &attrs.name {
        if name.value != expected.name {
            errors.push(name.error(format_args!(
                "`name = {:?}` does not match the spec: queues.{} carries envelope `{}`; \
                 leave `name` out (it is taken from the spec) or write `name = {:?}`",
                name.value, spec.queue, expected.name, expected.name
            )));
        }
    }
    if let Some(schema) = &attrs.schema {
        if schema.value != expected.schema {
            errors.push(schema.error(format_args!(
                "`schema = {}` does not match the spec: {} is at schema {} (its current version); \
                 leave `schema` out (it is taken from the spec) or write `schema = {}`",
                schema.value,
                spec.whereabouts(),
                expected.schema,
                expected.schema
            )));
        }
    }
    if let Some(accepts) = &attrs.accepts {
        let mut written: Vec<u32> = accepts.value.iter().map(|v| v.value).collect();
        let mut from_spec = expected.accepts.clone();
        written.sort_unstable();
        written.dedup();
        from_spec.sort_unstable();
        if written != from_spec {
            let list = version_list(&expected.accepts);
            errors.push(accepts.error(format_args!(
                "`accepts = {}` does not match the spec: {} accepts {list}; \
                 leave `accepts` out (it is taken from the spec) or write `accepts = {list}`",
                version_list(&written),
                spec.whereabouts(),
            )));
        }
    }
}

/// The spec field a renamed struct field has under its own name, when the
/// rename takes it away from it.
fn renamed_away<'s>(field: &Field<'_>, spec: &'s SpecEnvelope) -> Option<&'s SpecField> {
    field.attrs.rename.as_ref()?;
    spec.envelope
        .field(&syn::ext::IdentExt::unraw(field.ident).to_string())
}

fn extra_field(field: &Field<'_>, suggestion: Option<&str>, spec: &SpecEnvelope) -> syn::Error {
    let wire_name = field.wire_name();
    let fix = match suggestion {
        Some(close) => format!("did you mean `{close}`?"),
        None => "remove it, or add it to the spec".to_owned(),
    };
    let subject = match &field.attrs.rename {
        Some(_) => format!("field `{}` (written as `{wire_name}`)", field.ident),
        None => format!("field `{wire_name}`"),
    };
    field.wire_name_error(format_args!(
        "{subject} is not in the spec: {} has no field `{wire_name}`; {fix}",
        spec.whereabouts()
    ))
}

/// Type, optionality, wire name, `max_bytes` and `default` of one matched field.
fn compare(field: &Field<'_>, spec_field: &SpecField, spec: &SpecEnvelope, errors: &mut Errors) {
    let context = format!(
        "(spec: {}, `{}`)",
        spec.whereabouts(),
        spec_declaration(spec_field)
    );
    let name = &spec_field.name;

    if field.wire_name() != *name {
        if let Some(rename) = &field.attrs.rename {
            errors.push(rename.error(format_args!(
                "`rename = {:?}` differs from the spec, which names this field `{name}` {context}; \
                 remove the rename",
                rename.value
            )));
        }
    }

    let written = field_type::read(field.ty);
    let found = type_text(field.ty);
    if !value_matches(&written.kind, &spec_field.ty) {
        errors.spanned(
            field.ty,
            format_args!(
                "`{name}` has the wrong type: expected {}, found `{found}` {context}",
                expected_type(spec_field)
            ),
        );
    } else if written.optional != spec_field.optional {
        let why = if spec_field.optional {
            "is optional in the spec".to_owned()
        } else if let Some(default) = &spec_field.default {
            format!("has the default `{default}` in the spec, so it is never absent")
        } else {
            "is required in the spec, so it is never absent".to_owned()
        };
        errors.spanned(
            field.ty,
            format_args!(
                "`{name}` {why}: expected {}, found `{found}` {context}",
                expected_type(spec_field)
            ),
        );
    }

    if let Some(max_bytes) = &field.attrs.max_bytes {
        let written = max_bytes.value as u64;
        let problem = match spec_field.max_bytes {
            Some(max) if max == written => None,
            Some(max) => Some(format!(
                "`max_bytes = {written}` differs from the spec's {max} {context}; \
                 leave it out (it is taken from the spec) or write `max_bytes = {max}`"
            )),
            None => Some(format!(
                "`max_bytes = {written}` is not in the spec, which sets `{name}` no limit {context}; \
                 remove it, or add `max_bytes` to the spec"
            )),
        };
        if let Some(problem) = problem {
            errors.push(max_bytes.error(problem));
        }
    }

    // `default` on an `Option` is reported by `validate` already.
    if let (Some(default), false) = (&field.attrs.default, written.optional) {
        let problem = match (&default.value, &spec_field.default) {
            (FieldDefault::Text(text), Some(expected)) if text == expected => None,
            (FieldDefault::Text(text), Some(expected)) => Some(format!(
                "`default = {text:?}` differs from the spec's default `{expected}` {context}; \
                 leave it out (it is taken from the spec)"
            )),
            (FieldDefault::Trait, Some(expected)) => Some(format!(
                "`default` would decode an absent `{name}` as `Default::default()`, \
                 but the spec's default is `{expected}` {context}; \
                 leave it out (the default is taken from the spec)"
            )),
            (_, None) => Some(format!(
                "`default` is not in the spec, which gives `{name}` no default: \
                 an entry without it is malformed {context}; \
                 remove `default`, or add a default to the spec"
            )),
        };
        if let Some(problem) = problem {
            errors.push(default.error(problem));
        }
    }
}

/// Whether a value type written as `kind` can hold the spec's type.
fn value_matches(kind: &ValueKind, ty: &FieldType) -> bool {
    match kind {
        ValueKind::Scalar(scalar) => scalar == ty,
        ValueKind::Named => matches!(ty, FieldType::Enum { .. }),
        _ => false,
    }
}

fn rust_type(field: &SpecField) -> String {
    let value = field_type::rust_value_type(&field.ty);
    if field.optional {
        format!("Option<{value}>")
    } else {
        value.to_owned()
    }
}

/// `` `Option<u32>` ``, or for an enum `` `E`, where `E` is an enum deriving `FieldEnum` ... ``.
fn expected_type(field: &SpecField) -> String {
    format!("`{}`{}", rust_type(field), enum_note(&field.ty))
}

/// `pages: Option<u32>`, as the missing field would be declared.
fn rust_declaration(field: &SpecField) -> String {
    // A spec field may be named like a Rust keyword (`ref`).
    let ident = if syn::parse_str::<syn::Ident>(&field.name).is_ok() {
        field.name.clone()
    } else {
        format!("r#{}", field.name)
    };
    format!("{ident}: {}", rust_type(field))
}

/// What the `E` of an enum field's Rust type stands for; empty for other types.
fn enum_note(ty: &FieldType) -> String {
    match ty {
        FieldType::Enum { values } => format!(
            ", where `E` is an enum deriving `FieldEnum` with the values {}",
            quoted_list(values)
        ),
        _ => String::new(),
    }
}

/// `pages: { type: u32, optional: true }`, as the spec declares the field.
fn spec_declaration(field: &SpecField) -> String {
    let mut parts = vec![format!("type: {}", field.ty.spec_name())];
    if let FieldType::Enum { values } = &field.ty {
        parts.push(format!("values: [{}]", values.join(", ")));
    }
    if field.optional {
        parts.push("optional: true".to_owned());
    }
    if let Some(default) = &field.default {
        match field.ty {
            FieldType::String => parts.push(format!("default: {default:?}")),
            _ => parts.push(format!("default: {default}")),
        }
    }
    if let Some(max) = field.max_bytes {
        parts.push(format!("max_bytes: {max}"));
    }
    format!("{}: {{ {} }}", field.name, parts.join(", "))
}

/// A type as written, with the spaces `to_token_stream` puts between tokens removed
/// where Rust code would not have them.
fn type_text(ty: &syn::Type) -> String {
    quote::ToTokens::to_token_stream(ty)
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace("< ", "<")
        .replace(" :: ", "::")
        .replace("& ", "&")
}

/// `[2, 3]`
fn version_list(versions: &[u32]) -> String {
    let versions: Vec<String> = versions.iter().map(u32::to_string).collect();
    format!("[{}]", versions.join(", "))
}
