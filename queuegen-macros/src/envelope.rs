//! `#[derive(Envelope)]`: implements `queuegen_runtime::Envelope` for a struct with named fields.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use crate::ast::Envelope;
use crate::attr::FieldDefault;
use crate::errors::Errors;
use crate::spec_file::quoted_list;
use crate::wire::{WireField, WireFormat};
use crate::{drift, spec_file, validate};

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::new();
    let Some(envelope) = Envelope::from_input(input, &mut errors) else {
        return Err(errors
            .check()
            .expect_err("from_input records why it found no envelope"));
    };
    validate::envelope(&envelope, &mut errors);
    let spec = spec_file::load(&envelope.attrs, &mut errors);
    if let Some(spec) = &spec {
        drift::check(&envelope, spec, &mut errors);
    }
    errors.check()?;
    Ok(expand(&WireFormat::new(&envelope, spec.as_ref())))
}

fn expand(format: &WireFormat<'_>) -> TokenStream {
    let ident = format.ident;
    let type_name = &format.type_name;
    let schema = Literal::u32_unsuffixed(format.schema);
    let accepts = format.accepts.iter().copied().map(Literal::u32_unsuffixed);
    let writes = format.fields.iter().map(write_field);
    let (assert_fn, assertions) = field_value_assertions(format);
    let spec_tracking = spec_tracking(format);
    let enum_checks = format.fields.iter().filter_map(enum_values_check);
    let decode = decode_body(format);
    // A struct without fields leaves the writer unused.
    let out = if format.fields.is_empty() {
        quote!(_out)
    } else {
        quote!(out)
    };

    quote! {
        const _: () = {
            #spec_tracking
            #assert_fn
            #(#enum_checks)*

            #[automatically_derived]
            impl ::queuegen_runtime::Envelope for #ident {
                const TYPE: &'static str = #type_name;
                const SCHEMA: u32 = #schema;
                const ACCEPTS: &'static [u32] = &[#(#accepts),*];

                fn encode_body(
                    &self,
                    #out: &mut ::queuegen_runtime::__private::FieldWriter,
                ) -> ::core::result::Result<(), ::queuegen_runtime::Error> {
                    #assertions
                    #(#writes)*
                    ::core::result::Result::Ok(())
                }

                #decode
            }
        };
    }
}

/// `decode_body`: the fields of the current schema read directly; with older
/// accepted versions, entries of those handed to `Upcast::decode_older`.
fn decode_body(format: &WireFormat<'_>) -> TokenStream {
    let (_, assertions) = field_value_assertions(format);
    let reads = format.fields.iter().map(read_field);
    let current = quote! {
        ::core::result::Result::Ok(Self {
            #(#reads,)*
        })
    };
    if !format.accepts_older() {
        // A struct without fields leaves the map unused.
        let fields = if format.fields.is_empty() {
            quote!(_fields)
        } else {
            quote!(fields)
        };
        return quote! {
            fn decode_body(
                #fields: &::queuegen_runtime::FieldMap<'_>,
                _schema: u32,
            ) -> ::core::result::Result<Self, ::queuegen_runtime::Error> {
                #assertions
                #current
            }
        };
    }
    // Spanned where the older versions are declared, so that a missing
    // `impl Upcast` is reported there, with `Upcast`'s own explanation.
    let upcast = quote_spanned! {format.older_versions_span=>
        <Self as ::queuegen_runtime::Upcast>::decode_older
    };
    quote! {
        fn decode_body(
            fields: &::queuegen_runtime::FieldMap<'_>,
            schema: u32,
        ) -> ::core::result::Result<Self, ::queuegen_runtime::Error> {
            #assertions
            if schema == <Self as ::queuegen_runtime::Envelope>::SCHEMA {
                #current
            } else {
                #upcast(fields, schema)
            }
        }
    }
}

/// Makes cargo rebuild the struct when its spec changes.
///
/// A derive that reads a file is not rerun when the file changes (tracking
/// files from a proc macro is unstable), but a compile that `include_bytes!`
/// a file depends on it. The bytes are unused; the const compiles to nothing.
fn spec_tracking(format: &WireFormat<'_>) -> TokenStream {
    match &format.spec_path {
        Some(path) => {
            let path = path.to_string_lossy();
            quote!(
                const _: &[u8] = ::core::include_bytes!(#path);
            )
        }
        None => TokenStream::new(),
    }
}

/// For an enum field of a spec envelope, a compile-time check that its
/// enum's values are the spec's, spanned at the field's type.
fn enum_values_check(field: &WireField<'_>) -> Option<TokenStream> {
    let expected = field.spec_enum_values.as_ref()?;
    let ty = field.value_type();
    let message = format!(
        "field `{}`: the values of `{}` must be the spec's: {} \
         (its variants' names in snake_case, or their `#[field(rename = \"...\")]`)",
        field.wire_name,
        quote::ToTokens::to_token_stream(ty),
        quoted_list(expected)
    )
    // `panic!` reads its message as a format string.
    .replace('{', "{{")
    .replace('}', "}}");
    Some(quote_spanned! {ty.span()=>
        const _: () = if !::queuegen_runtime::__private::same_values(
            <#ty as ::queuegen_runtime::__private::FieldEnumValues>::VALUES,
            &[#(#expected),*],
        ) {
            ::core::panic!(#message)
        };
    })
}

/// `fn assert_field_value<T: FieldValue>() {}`, and one call of it per field,
/// spanned at the field's type.
///
/// Both methods start with the calls, and name each field's type again where
/// they write or read it. A field type that is not a `FieldValue` then fails
/// first at the assertion, at the field's type; rustc folds the later errors
/// at that same span, and the identical assertion error of the other method,
/// into it: one error per bad field, not one per method at the derive.
fn field_value_assertions(format: &WireFormat<'_>) -> (TokenStream, TokenStream) {
    if format.fields.is_empty() {
        return (TokenStream::new(), TokenStream::new());
    }
    let assert_fn = quote! {
        fn assert_field_value<T: ::queuegen_runtime::FieldValue>() {}
    };
    let assertions = format.fields.iter().map(|field| {
        let ty = field.ty;
        quote_spanned!(ty.span()=> assert_field_value::<#ty>();)
    });
    (assert_fn, quote!(#(#assertions)*))
}

/// `out.field::<T>("wire_name", &self.field, max_bytes)?;`
fn write_field(field: &WireField<'_>) -> TokenStream {
    let member = field.member;
    let wire_name = &field.wire_name;
    let max_bytes = max_bytes(field);
    let ty = field.ty;
    quote!(out.field::<#ty>(#wire_name, &self.#member, #max_bytes)?;)
}

/// `field: fields.field::<T>("wire_name", max_bytes)?`; for a field with a
/// default, an entry without the field decodes as the default.
fn read_field(field: &WireField<'_>) -> TokenStream {
    let member = field.member;
    let wire_name = &field.wire_name;
    let max_bytes = max_bytes(field);
    let ty = field.ty;
    let read = quote!(fields.field::<#ty>(#wire_name, #max_bytes)?);
    let absent = match &field.default {
        None => return quote!(#member: #read),
        Some(FieldDefault::Trait) => quote!(::core::default::Default::default()),
        // Decoded as if the entry had the text; a text the type does not
        // take is a malformed field, like a bad value in the entry.
        Some(FieldDefault::Text(text)) => quote! {
            <#ty as ::queuegen_runtime::FieldValue>::decode_field(
                ::core::option::Option::Some(#text),
            )
            .map_err(|problem| {
                ::queuegen_runtime::Error::from(::queuegen_runtime::error::DecodeError::field(
                    <Self as ::queuegen_runtime::Envelope>::TYPE,
                    #wire_name,
                    problem,
                ))
            })?
        },
    };
    quote! {
        #member: match fields.raw(#wire_name)? {
            ::core::option::Option::None => #absent,
            ::core::option::Option::Some(_) => #read,
        }
    }
}

fn max_bytes(field: &WireField<'_>) -> TokenStream {
    match field.max_bytes {
        Some(max) => {
            let max = Literal::u64_unsuffixed(max);
            quote!(::core::option::Option::Some(#max))
        }
        None => quote!(::core::option::Option::None),
    }
}
