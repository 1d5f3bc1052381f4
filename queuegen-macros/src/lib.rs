//! Derive macros for queuegen envelopes (being written: see the macros issue work).
use proc_macro::TokenStream;

#[proc_macro_derive(Envelope, attributes(envelope))]
pub fn derive_envelope(_input: TokenStream) -> TokenStream {
    "compile_error!(\"#[derive(Envelope)] is not written yet\");"
        .parse()
        .unwrap()
}

#[proc_macro_derive(FieldEnum, attributes(field))]
pub fn derive_field_enum(_input: TokenStream) -> TokenStream {
    "compile_error!(\"#[derive(FieldEnum)] is not written yet\");"
        .parse()
        .unwrap()
}
