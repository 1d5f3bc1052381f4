//! `#[derive(Envelope)]`: implements `queuegen_runtime::Envelope` for a struct with named fields.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use crate::ast::{Envelope, Field};
use crate::errors::Errors;
use crate::validate;

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::new();
    let Some(envelope) = Envelope::from_input(input, &mut errors) else {
        return Err(errors
            .check()
            .expect_err("from_input records why it found no envelope"));
    };
    validate::envelope(&envelope, &mut errors);
    errors.check()?;
    Ok(expand(&envelope))
}

fn expand(envelope: &Envelope<'_>) -> TokenStream {
    let ident = envelope.ident;
    let type_name = envelope.type_name();
    let schema = Literal::u32_unsuffixed(envelope.schema());
    let accepts = envelope.accepts().into_iter().map(Literal::u32_unsuffixed);
    let writes = envelope.fields.iter().map(write_field);
    let reads = envelope.fields.iter().map(read_field);
    let (assert_fn, assertions) = field_value_assertions(envelope);
    // A struct without fields leaves the writer and the map unused.
    let (out, fields) = if envelope.fields.is_empty() {
        (quote!(_out), quote!(_fields))
    } else {
        (quote!(out), quote!(fields))
    };

    quote! {
        const _: () = {
            #assert_fn

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

                fn decode_body(
                    #fields: &::queuegen_runtime::FieldMap<'_>,
                    _schema: u32,
                ) -> ::core::result::Result<Self, ::queuegen_runtime::Error> {
                    #assertions
                    ::core::result::Result::Ok(Self {
                        #(#reads,)*
                    })
                }
            }
        };
    }
}

/// `fn assert_field_value<T: FieldValue>() {}`, and one call of it per field,
/// spanned at the field's type.
///
/// Both methods start with the calls, and name each field's type again where
/// they write or read it. A field type that is not a `FieldValue` then fails
/// first at the assertion, at the field's type; rustc folds the later errors
/// at that same span, and the identical assertion error of the other method,
/// into it: one error per bad field, not one per method at the derive.
fn field_value_assertions(envelope: &Envelope<'_>) -> (TokenStream, TokenStream) {
    if envelope.fields.is_empty() {
        return (TokenStream::new(), TokenStream::new());
    }
    let assert_fn = quote! {
        fn assert_field_value<T: ::queuegen_runtime::FieldValue>() {}
    };
    let assertions = envelope.fields.iter().map(|field| {
        let ty = field.ty;
        quote_spanned!(ty.span()=> assert_field_value::<#ty>();)
    });
    (assert_fn, quote!(#(#assertions)*))
}

/// `out.field::<T>("wire_name", &self.field, max_bytes)?;`
fn write_field(field: &Field<'_>) -> TokenStream {
    let member = field.ident;
    let wire_name = field.wire_name();
    let max_bytes = max_bytes(field);
    let ty = field.ty;
    quote!(out.field::<#ty>(#wire_name, &self.#member, #max_bytes)?;)
}

/// `field: fields.field::<T>("wire_name", max_bytes)?`, or for a `default` field,
/// `Default::default()` when the entry does not have it.
fn read_field(field: &Field<'_>) -> TokenStream {
    let member = field.ident;
    let wire_name = field.wire_name();
    let max_bytes = max_bytes(field);
    let ty = field.ty;
    let read = quote!(fields.field::<#ty>(#wire_name, #max_bytes)?);
    if field.has_default() {
        quote! {
            #member: match fields.raw(#wire_name)? {
                ::core::option::Option::None => ::core::default::Default::default(),
                ::core::option::Option::Some(_) => #read,
            }
        }
    } else {
        quote!(#member: #read)
    }
}

fn max_bytes(field: &Field<'_>) -> TokenStream {
    match field.max_bytes() {
        Some(max) => {
            let max = Literal::usize_unsuffixed(max);
            quote!(::core::option::Option::Some(#max))
        }
        None => quote!(::core::option::Option::None),
    }
}
