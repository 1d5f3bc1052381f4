//! Reads what a field's type is from how it is written, to compare it with the spec's field types.
//!
//! A derive sees tokens, not resolved types, so this goes by the last path
//! segment (`std::string::String` is `String`); a type alias hides what it
//! stands for, and is then taken for an enum.

use queuegen_spec::model::FieldType;
use syn::{GenericArgument, PathArguments, Type};

/// A field type as written: `Option<T>` or `T`, and what `T` looks like.
pub(crate) struct WrittenType {
    pub(crate) optional: bool,
    pub(crate) kind: ValueKind,
}

/// What the value type `T` of a field looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// The Rust type of a spec field type other than `enum` ([`rust_value_type`]).
    Scalar(FieldType),
    /// A primitive no spec type maps to (`u8`, `i16`, `usize`, `f64`, `char`, ...).
    OtherPrimitive,
    /// Any other path type: a user's `#[derive(FieldEnum)]` enum, as far as a derive can tell.
    Named,
    /// Not a path type at all (a reference, a tuple, an array, ...).
    Unsupported,
}

/// Primitive types that no spec field type maps to.
const OTHER_PRIMITIVES: &[&str] = &[
    "u8", "u16", "u128", "usize", "i8", "i16", "i128", "isize", "f32", "f64", "char", "str",
];

pub(crate) fn read(ty: &Type) -> WrittenType {
    let inner = option_inner(ty);
    WrittenType {
        optional: inner.is_some(),
        kind: kind_of(inner.unwrap_or(ty)),
    }
}

/// `T` if `ty` is written as `Option<T>` (under any path, like `std::option::Option<T>`).
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    if last.ident != "Option" || args.args.len() != 1 {
        return None;
    }
    match args.args.first() {
        Some(GenericArgument::Type(inner)) => Some(inner),
        _ => None,
    }
}

fn kind_of(ty: &Type) -> ValueKind {
    let Type::Path(path) = ty else {
        return ValueKind::Unsupported;
    };
    let Some(last) = path.path.segments.last() else {
        return ValueKind::Unsupported;
    };
    if path.qself.is_some() || !last.arguments.is_none() {
        return ValueKind::Named;
    }
    let name = last.ident.to_string();
    let scalar = FieldType::SCALARS
        .into_iter()
        .find(|ty| rust_value_type(ty) == name);
    match scalar {
        Some(ty) => ValueKind::Scalar(ty),
        None if OTHER_PRIMITIVES.contains(&name.as_str()) => ValueKind::OtherPrimitive,
        None => ValueKind::Named,
    }
}

/// The Rust value type of a spec type; `E` for an enum, which the user names.
pub(crate) fn rust_value_type(ty: &FieldType) -> &'static str {
    match ty {
        FieldType::String => "String",
        FieldType::Bool => "bool",
        FieldType::U32 => "u32",
        FieldType::U64 => "u64",
        FieldType::I32 => "i32",
        FieldType::I64 => "i64",
        FieldType::Timestamp => "Timestamp",
        FieldType::Enum { .. } => "E",
    }
}

/// Why `text` cannot be the `default = "text"` of a field of type `ty`, when
/// that can be told without running its decoder (`bool` and the integers).
pub(crate) fn default_text_problem(ty: &Type, text: &str) -> Option<String> {
    let Type::Path(path) = ty else {
        return None;
    };
    let name = path.path.get_ident()?.to_string();
    let valid = match name.as_str() {
        "bool" => matches!(text, "true" | "false"),
        "u8" => text.parse::<u8>().is_ok(),
        "u16" => text.parse::<u16>().is_ok(),
        "u32" => text.parse::<u32>().is_ok(),
        "u64" => text.parse::<u64>().is_ok(),
        "i8" => text.parse::<i8>().is_ok(),
        "i16" => text.parse::<i16>().is_ok(),
        "i32" => text.parse::<i32>().is_ok(),
        "i64" => text.parse::<i64>().is_ok(),
        _ => return None,
    };
    (!valid).then(|| format!("`{text}` is not a valid `{name}`, so it cannot be the default"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(ty: Type) -> (bool, ValueKind) {
        let written = read(&ty);
        (written.optional, written.kind)
    }

    #[test]
    fn recognises_option_types() {
        assert!(option_inner(&syn::parse_quote!(Option<u32>)).is_some());
        assert!(option_inner(&syn::parse_quote!(std::option::Option<String>)).is_some());
        assert!(option_inner(&syn::parse_quote!(u32)).is_none());
        assert!(option_inner(&syn::parse_quote!(Vec<u32>)).is_none());
        assert!(option_inner(&syn::parse_quote!(Option)).is_none());
    }

    #[test]
    fn goes_by_the_last_path_segment() {
        assert_eq!(
            kind(syn::parse_quote!(u32)),
            (false, ValueKind::Scalar(FieldType::U32))
        );
        assert_eq!(
            kind(syn::parse_quote!(Option<std::string::String>)),
            (true, ValueKind::Scalar(FieldType::String))
        );
        assert_eq!(
            kind(syn::parse_quote!(queuegen_runtime::Timestamp)),
            (false, ValueKind::Scalar(FieldType::Timestamp))
        );
        assert_eq!(
            kind(syn::parse_quote!(u8)),
            (false, ValueKind::OtherPrimitive)
        );
        assert_eq!(
            kind(syn::parse_quote!(Option<Priority>)),
            (true, ValueKind::Named)
        );
        assert_eq!(kind(syn::parse_quote!(Vec<u32>)), (false, ValueKind::Named));
        assert_eq!(
            kind(syn::parse_quote!(&str)),
            (false, ValueKind::Unsupported)
        );
    }

    #[test]
    fn checks_default_texts_it_can() {
        let problem = |ty: Type, text: &str| default_text_problem(&ty, text);
        assert_eq!(problem(syn::parse_quote!(bool), "true"), None);
        assert!(problem(syn::parse_quote!(bool), "yes").is_some());
        assert_eq!(problem(syn::parse_quote!(i64), "-3"), None);
        assert!(problem(syn::parse_quote!(u8), "300").is_some());
        assert_eq!(problem(syn::parse_quote!(Priority), "anything"), None);
        assert_eq!(problem(syn::parse_quote!(String), ""), None);
    }
}
