//! The wire format an envelope expands to: from its attributes or, with `spec = ...`, from the spec.
//!
//! By the time this runs, `drift` has checked that the attributes agree
//! with the spec wherever both say something, so the spec's values simply win.

use std::path::PathBuf;

use proc_macro2::Span;
use queuegen_spec::model::{self, FieldType};
use syn::{Ident, Type};

use crate::ast::{Envelope, Field};
use crate::attr::FieldDefault;
use crate::field_type;
use crate::spec_file::SpecEnvelope;

pub(crate) struct WireFormat<'a> {
    pub(crate) ident: &'a Ident,
    /// The `type` header value.
    pub(crate) type_name: String,
    pub(crate) schema: u32,
    pub(crate) accepts: Vec<u32>,
    pub(crate) fields: Vec<WireField<'a>>,
    /// The spec file read, whose changes must rebuild the struct.
    pub(crate) spec_path: Option<PathBuf>,
    /// Where a missing `impl Upcast` is reported: at what makes the struct
    /// accept older versions (`accepts = [...]`, or the spec's queue).
    pub(crate) older_versions_span: Span,
}

pub(crate) struct WireField<'a> {
    pub(crate) member: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) wire_name: String,
    pub(crate) max_bytes: Option<u64>,
    pub(crate) default: Option<FieldDefault>,
    /// For an enum field of a spec envelope: the spec's values, which the
    /// field's enum must have.
    pub(crate) spec_enum_values: Option<Vec<String>>,
}

impl<'a> WireFormat<'a> {
    pub(crate) fn new(envelope: &'a Envelope<'a>, spec: Option<&SpecEnvelope>) -> Self {
        let attrs = &envelope.attrs;
        let fields = envelope
            .fields
            .iter()
            .map(|field| {
                let spec_field = spec.and_then(|spec| spec.envelope.field(&field.wire_name()));
                WireField::new(field, spec_field)
            })
            .collect();
        let older_versions_span = match (&attrs.queue, &attrs.accepts) {
            (Some(queue), _) if spec.is_some() => queue.span(),
            (_, Some(accepts)) => accepts.span(),
            _ => Span::call_site(),
        };
        match spec {
            Some(spec) => WireFormat {
                ident: envelope.ident,
                type_name: spec.envelope.name.clone(),
                schema: spec.envelope.schema,
                accepts: spec.envelope.accepts.clone(),
                fields,
                spec_path: Some(spec.path.clone()),
                older_versions_span,
            },
            None => WireFormat {
                ident: envelope.ident,
                type_name: envelope.type_name(),
                schema: envelope.schema(),
                accepts: envelope.accepts(),
                fields,
                spec_path: None,
                older_versions_span,
            },
        }
    }

    /// Whether entries of versions other than `schema` are decoded (through `Upcast`).
    pub(crate) fn accepts_older(&self) -> bool {
        self.accepts.iter().any(|version| *version != self.schema)
    }
}

impl<'a> WireField<'a> {
    fn new(field: &'a Field<'a>, spec_field: Option<&model::Field>) -> Self {
        let from_attrs = WireField {
            member: field.ident,
            ty: field.ty,
            wire_name: field.wire_name(),
            max_bytes: field.max_bytes().map(|max| max as u64),
            default: field.default().cloned(),
            spec_enum_values: None,
        };
        let Some(spec_field) = spec_field else {
            return from_attrs;
        };
        WireField {
            max_bytes: spec_field.max_bytes,
            default: spec_field.default.clone().map(FieldDefault::Text),
            spec_enum_values: match &spec_field.ty {
                FieldType::Enum { values } => Some(values.clone()),
                _ => None,
            },
            ..from_attrs
        }
    }

    /// `T` of an `Option<T>` field, or the field's type.
    pub(crate) fn value_type(&self) -> &'a Type {
        field_type::option_inner(self.ty).unwrap_or(self.ty)
    }
}
