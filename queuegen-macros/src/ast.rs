//! The derive inputs as queuegen sees them: shape checked, with their attributes attached.

use syn::ext::IdentExt;
use syn::{Data, DataStruct, DeriveInput, Fields, Ident, Type};

use crate::attr::{self, FieldDefault, Setting};
use crate::errors::Errors;
use queuegen_spec::naming::snake_case;

/// A struct deriving `Envelope`.
pub(crate) struct Envelope<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) attrs: attr::Container,
    pub(crate) fields: Vec<Field<'a>>,
}

/// One named field of an envelope body.
pub(crate) struct Field<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) ty: &'a Type,
    pub(crate) attrs: attr::Field,
}

/// An enum deriving `FieldEnum`.
pub(crate) struct FieldEnum<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) variants: Vec<Variant<'a>>,
}

/// One unit variant of a `FieldEnum`.
pub(crate) struct Variant<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) attrs: attr::Variant,
}

impl<'a> Envelope<'a> {
    /// Reads the input; `None` (with the reason recorded) if it is not a struct with named fields.
    pub(crate) fn from_input(input: &'a DeriveInput, errors: &mut Errors) -> Option<Self> {
        let attrs = attr::container(&input.attrs, errors);
        reject_generics(input, "Envelope", errors);
        let named = match &input.data {
            Data::Struct(DataStruct {
                fields: Fields::Named(named),
                ..
            }) => named,
            Data::Struct(DataStruct {
                fields: Fields::Unnamed(unnamed),
                ..
            }) => return errors.refuse_spanned(
                    unnamed,
                    "`#[derive(Envelope)]` needs a struct with named fields: \
                     each field is written to the stream under its name",
                ),
            Data::Struct(DataStruct {
                fields: Fields::Unit,
                ..
            }) => return errors.refuse_spanned(
                    &input.ident,
                    format_args!(
                        "`#[derive(Envelope)]` needs a struct with named fields; \
                         for an envelope without body fields write `struct {} {{}}`",
                        input.ident
                    ),
                ),
            Data::Enum(data) => return errors.refuse_spanned(
                    data.enum_token,
                    "`#[derive(Envelope)]` needs a struct with named fields, not an enum; \
                     an enum of unit variants can be one field of an envelope with `#[derive(FieldEnum)]`",
                ),
            Data::Union(data) => return errors.refuse_spanned(
                    data.union_token,
                    "`#[derive(Envelope)]` needs a struct with named fields, not a union",
                ),
        };
        let fields = named
            .named
            .iter()
            .filter_map(|field| {
                Some(Field {
                    ident: field.ident.as_ref()?,
                    ty: &field.ty,
                    attrs: attr::field(&field.attrs, errors),
                })
            })
            .collect();
        Some(Envelope {
            ident: &input.ident,
            attrs,
            fields,
        })
    }

    /// The `type` header value: `name = "..."`, or the struct's name.
    pub(crate) fn type_name(&self) -> String {
        match &self.attrs.name {
            Some(name) => name.value.clone(),
            None => self.ident.unraw().to_string(),
        }
    }

    /// The schema version this struct is written with (1 unless set).
    pub(crate) fn schema(&self) -> u32 {
        self.attrs.schema.as_ref().map_or(1, |schema| schema.value)
    }

    /// The schema versions this struct decodes (just `schema` unless set).
    pub(crate) fn accepts(&self) -> Vec<u32> {
        match &self.attrs.accepts {
            Some(accepts) => accepts.value.iter().map(|version| version.value).collect(),
            None => vec![self.schema()],
        }
    }
}

impl Field<'_> {
    /// The stream field name: `rename = "..."`, or the field's name.
    pub(crate) fn wire_name(&self) -> String {
        match &self.attrs.rename {
            Some(rename) => rename.value.clone(),
            None => self.ident.unraw().to_string(),
        }
    }

    /// An error pointing at where the wire name comes from: the `rename`, or the field's name.
    pub(crate) fn wire_name_error(&self, message: impl std::fmt::Display) -> syn::Error {
        spanned_at_name(self.attrs.rename.as_ref(), self.ident, message)
    }

    pub(crate) fn max_bytes(&self) -> Option<usize> {
        self.attrs.max_bytes.as_ref().map(|max| max.value)
    }

    pub(crate) fn default(&self) -> Option<&FieldDefault> {
        self.attrs.default.as_ref().map(|default| &default.value)
    }
}

impl<'a> FieldEnum<'a> {
    /// Reads the input; `None` (with the reason recorded) if it is not a non-empty enum.
    pub(crate) fn from_input(input: &'a DeriveInput, errors: &mut Errors) -> Option<Self> {
        for attr in input
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident("field"))
        {
            errors.spanned(
                attr,
                "`#[field(...)]` goes on the variants of the enum, not on the enum",
            );
        }
        reject_generics(input, "FieldEnum", errors);
        let data = match &input.data {
            Data::Enum(data) => data,
            Data::Struct(data) => {
                return errors.refuse_spanned(
                    data.struct_token,
                    "`#[derive(FieldEnum)]` is for enums of unit variants, not structs",
                )
            }
            Data::Union(data) => {
                return errors.refuse_spanned(
                    data.union_token,
                    "`#[derive(FieldEnum)]` is for enums of unit variants, not unions",
                )
            }
        };
        if data.variants.is_empty() {
            return errors.refuse_spanned(
                &input.ident,
                "`#[derive(FieldEnum)]` needs at least one variant: \
                 an enum without variants has no value to write",
            );
        }
        let variants = data
            .variants
            .iter()
            .map(|variant| {
                if !matches!(variant.fields, Fields::Unit) {
                    errors.spanned(
                        &variant.fields,
                        format_args!(
                            "`#[derive(FieldEnum)]` needs unit variants: \
                             a field value is just the variant's name, so `{}` cannot carry data",
                            variant.ident
                        ),
                    );
                }
                Variant {
                    ident: &variant.ident,
                    attrs: attr::variant(&variant.attrs, errors),
                }
            })
            .collect();
        Some(FieldEnum {
            ident: &input.ident,
            variants,
        })
    }
}

impl Variant<'_> {
    /// The stream field value: `rename = "..."`, or the variant's name in snake_case.
    pub(crate) fn wire_value(&self) -> String {
        match &self.attrs.rename {
            Some(rename) => rename.value.clone(),
            None => snake_case(&self.ident.unraw().to_string()),
        }
    }

    /// An error pointing at where the wire value comes from: the `rename`, or the variant's name.
    pub(crate) fn wire_value_error(&self, message: impl std::fmt::Display) -> syn::Error {
        spanned_at_name(self.attrs.rename.as_ref(), self.ident, message)
    }
}

fn spanned_at_name(
    rename: Option<&Setting<String>>,
    ident: &Ident,
    message: impl std::fmt::Display,
) -> syn::Error {
    match rename {
        Some(rename) => rename.error(message),
        None => syn::Error::new_spanned(ident, message),
    }
}

/// Generic parameters are rejected: the wire format of a type must not depend on them.
fn reject_generics(input: &DeriveInput, derive: &str, errors: &mut Errors) {
    if input.generics.params.is_empty() {
        return;
    }
    errors.spanned(
        &input.generics,
        format_args!(
            "`#[derive({derive})]` does not support generic parameters: \
             the wire format of `{}` must be fixed",
            input.ident
        ),
    );
}
