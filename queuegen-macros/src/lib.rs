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
mod drift;
mod envelope;
mod errors;
mod field_enum;
mod field_type;
mod spec_file;
mod validate;
mod wire;

/// Implements `queuegen_runtime::Envelope` for a struct with named fields.
///
/// Each field is one envelope field (a stream field, or a pair of the packed
/// entry), written after the header fields in declaration order. A field's
/// type must implement `FieldValue`: `String`, `bool`, `u8`..`u64`,
/// `i8`..`i64`, `Timestamp`, an enum deriving
/// [`FieldEnum`](derive@FieldEnum), or `Option` of one of these (left out of
/// the entry when `None`).
///
/// On the struct, all optional:
///
/// - `#[envelope(name = "OcrRequested")]`: the `type` header value
///   (default: the struct's name).
/// - `#[envelope(schema = 3)]`: the schema version written (default 1).
/// - `#[envelope(accepts = [2, 3])]`: the schema versions decoded; must
///   include `schema` (default: just `schema`). Entries of the other
///   versions are decoded by your `impl queuegen_runtime::Upcast`, which the
///   struct then needs.
/// - `#[envelope(spec = "queues.yaml", queue = "ocr")]`: the struct must match
///   the envelope of queue `ocr` in that spec, at its current schema version
///   (see below).
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
/// - `#[envelope(default = "normal")]`: an entry without the field decodes as
///   if it had this text (not on `Option` fields). Texts a `bool` or integer
///   field cannot take fail the compile; for other types, decoding such an
///   entry fails with a malformed-field error.
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
///
/// # Checked against a spec
///
/// With `spec` and `queue`, the derive reads the spec while the crate
/// compiles (a relative path starts at the directory of the crate's
/// Cargo.toml, `CARGO_MANIFEST_DIR`) and fails the compile, at the struct's
/// own tokens, for every way the struct differs from the envelope of that
/// queue: a spec field it lacks, a field the spec lacks, a type or `Option`
/// that does not fit the field's spec type, and a `name`, `schema`,
/// `accepts`, `rename`, `max_bytes` or `default` that says otherwise than the
/// spec. Fields match spec fields by wire name. The types that fit are:
/// `String` for `string`, `bool`, `u32`, `u64`, `i32`, `i64`, `Timestamp`
/// for `timestamp`, and for `enum` an enum deriving `FieldEnum` whose values
/// are the spec's (checked at compile time too); `Option<T>` exactly when
/// the spec field is `optional: true`.
///
/// The type name, schema versions, `max_bytes` and defaults then come from
/// the spec, so the struct need not repeat them. If the spec's envelope
/// accepts older schema versions, implement `Upcast` for them: the derive
/// decodes only the current version. The crate is rebuilt when the spec
/// file changes.
///
/// ```text
/// #[derive(Envelope)]
/// #[envelope(spec = "queues.yaml", queue = "ocr")]
/// struct OcrJob {
///     subject_ref: String,   // subject_ref: { type: string, max_bytes: 200 }
///     pages: Option<u32>,    // pages: { type: u32, optional: true }
///     priority: Priority,    // priority: { type: enum, values: [low, normal, high], default: normal }
/// }
/// ```
///
/// `QUEUEGEN_SPEC_BASE_DIR`, when set, replaces `CARGO_MANIFEST_DIR` as the
/// start of relative spec paths in the crates cargo is asked to build (not in
/// their dependencies); UI tests under trybuild, which compiles them in a
/// crate of its own under `target/`, set it to the test crate's directory.
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
