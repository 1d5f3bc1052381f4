//! `#[derive(Envelope)]` and `#[derive(FieldEnum)]`: typed envelope bodies for queuegen work queues.
//!
//! Use them through `queuegen_runtime`, which re-exports both; the code they
//! generate refers to the runtime only as `::queuegen_runtime`.
//!
//! Each derive runs the same pipeline, in the manner of `serde_derive`:
//! `attr` parses the helper attributes, `ast` checks the shape of the
//! input and attaches them, `validate` checks the wire format as a whole,
//! and `envelope` or `field_enum` expands it. Every error found on the way
//! is collected (`errors`) and reported at once, each at its own span.

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput};

mod ast;
mod attr;
mod case;
mod envelope;
mod errors;
mod field_enum;
mod validate;

/// Implements `queuegen_runtime::Envelope` for a struct with named fields.
///
/// Each field is one stream field, written after the header fields in
/// declaration order. A field's type must implement `FieldValue`: `String`,
/// `bool`, `u8`..`u64`, `i8`..`i64`, `Timestamp`, an enum deriving
/// [`FieldEnum`](derive@FieldEnum), or `Option` of one of these (left out of
/// the entry when `None`).
///
/// On the struct, all optional:
///
/// - `#[envelope(name = "OcrRequested")]`: the `type` header value
///   (default: the struct's name).
/// - `#[envelope(schema = 3)]`: the schema version written (default 1).
/// - `#[envelope(accepts = [2, 3])]`: the schema versions decoded; must
///   include `schema` (default: just `schema`).
///
/// On a field:
///
/// - `#[envelope(rename = "wire_name")]`: the stream field name (default: the
///   field's name). It must not be a header field name (`job_id`, `type`,
///   `tenant`, `schema`, `created_at`, `trace_id`, `attempt`, `prev_id`,
///   `reason`) nor repeat another field's.
/// - `#[envelope(max_bytes = 200)]`: the largest encoded value accepted, both
///   when encoding and when decoding.
/// - `#[envelope(default)]`: an entry without the field decodes as
///   `Default::default()` (not needed on `Option` fields).
///
/// ```text
/// #[derive(Envelope)]
/// #[envelope(name = "OcrRequested", schema = 3, accepts = [2, 3])]
/// struct OcrRequested {
///     #[envelope(max_bytes = 200)]
///     subject_ref: String,
///     pages: Option<u32>,
///     #[envelope(default)]
///     priority: Priority,
/// }
/// ```
#[proc_macro_derive(Envelope, attributes(envelope))]
pub fn derive_envelope(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    envelope::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `queuegen_runtime::FieldValue` for an enum of unit variants.
///
/// Each variant is written as its name in snake_case (`HighPriority` is
/// `high_priority`), or as `#[field(rename = "...")]` on the variant. Decoding
/// any other value fails with `FieldProblem::Malformed`, listing the values
/// expected.
///
/// ```text
/// #[derive(FieldEnum, Default)]
/// enum Priority {
///     Low,
///     #[default]
///     Normal,
///     #[field(rename = "urgent")]
///     High,
/// }
/// ```
#[proc_macro_derive(FieldEnum, attributes(field))]
pub fn derive_field_enum(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    field_enum::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
