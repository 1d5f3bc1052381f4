//! `#[derive(FieldEnum)]`: implements `queuegen_runtime::FieldValue` for an enum of unit variants.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::DeriveInput;

use crate::ast::{FieldEnum, Variant};
use crate::errors::Errors;
use crate::validate;

/// How much of an unknown value a decode error echoes back, as the runtime's own types do.
const ECHO_CHARS: usize = 64;

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::new();
    let Some(field_enum) = FieldEnum::from_input(input, &mut errors) else {
        return Err(errors
            .check()
            .expect_err("from_input records why it found no enum"));
    };
    validate::field_enum(&field_enum, &mut errors);
    errors.check()?;
    Ok(expand(&field_enum))
}

fn expand(field_enum: &FieldEnum<'_>) -> TokenStream {
    let ident = field_enum.ident;
    let variants: Vec<_> = field_enum.variants.iter().map(|v| v.ident).collect();
    let values: Vec<String> = field_enum
        .variants
        .iter()
        .map(Variant::wire_value)
        .collect();
    let expected = format!("one of {}", values.join(", "));
    let echo_chars = Literal::usize_unsuffixed(ECHO_CHARS);

    quote! {
        const _: () = {
            #[automatically_derived]
            impl ::queuegen_runtime::FieldValue for #ident {
                fn encode_field(&self) -> ::core::option::Option<::std::string::String> {
                    let value = match self {
                        #(Self::#variants => #values,)*
                    };
                    ::core::option::Option::Some(::std::string::String::from(value))
                }

                fn decode_field(
                    raw: ::core::option::Option<&str>,
                ) -> ::core::result::Result<Self, ::queuegen_runtime::FieldProblem> {
                    match raw {
                        #(::core::option::Option::Some(#values) => ::core::result::Result::Ok(Self::#variants),)*
                        ::core::option::Option::Some(found) => {
                            ::core::result::Result::Err(::queuegen_runtime::FieldProblem::Malformed {
                                expected: #expected,
                                // The value may be large or sensitive: echo only its start.
                                found: found.chars().take(#echo_chars).collect(),
                            })
                        }
                        ::core::option::Option::None => {
                            ::core::result::Result::Err(::queuegen_runtime::FieldProblem::Missing)
                        }
                    }
                }
            }

            // Lets `#[envelope(spec = ...)]` check the values against the spec at compile time.
            #[automatically_derived]
            impl ::queuegen_runtime::__private::FieldEnumValues for #ident {
                const VALUES: &'static [&'static str] = &[#(#values),*];
            }
        };
    }
}
