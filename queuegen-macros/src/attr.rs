//! Parses `#[envelope(...)]` and `#[field(...)]` attributes into typed settings.
//!
//! Every problem is recorded and parsing carries on with the next key, so one
//! compile reports every bad key. Values are checked for their kind here (a
//! string, an integer, a list); whether a value makes sense for the
//! whole type is left to `validate`.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use syn::meta::ParseNestedMeta;
use syn::{Attribute, Expr, ExprArray, Lit, Token};

use crate::errors::Errors;

/// Keys of `#[envelope(...)]` on a struct.
const CONTAINER_KEYS: &[&str] = &["name", "schema", "accepts", "spec", "queue"];
/// Keys of `#[envelope(...)]` on a struct field.
const FIELD_KEYS: &[&str] = &["rename", "max_bytes", "default"];
/// Keys of `#[field(...)]` on an enum variant.
const VARIANT_KEYS: &[&str] = &["rename"];

/// One attribute value together with the tokens it was written as, for error spans.
pub(crate) struct Setting<T> {
    pub(crate) value: T,
    tokens: TokenStream,
}

impl<T> Setting<T> {
    fn new(value: T, tokens: TokenStream) -> Self {
        Setting { value, tokens }
    }

    /// An error pointing at the whole `key = value` as written.
    pub(crate) fn error(&self, message: impl std::fmt::Display) -> syn::Error {
        syn::Error::new_spanned(&self.tokens, message)
    }

    /// Where the setting starts (its key), for generated code whose errors
    /// rustc reports, like a missing trait impl.
    pub(crate) fn span(&self) -> Span {
        self.tokens
            .clone()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |token| token.span())
    }
}

/// `#[envelope(name = "...", schema = N, accepts = [N, ...], spec = "...", queue = "...")]`
/// on the struct.
#[derive(Default)]
pub(crate) struct Container {
    pub(crate) name: Option<Setting<String>>,
    pub(crate) schema: Option<Setting<u32>>,
    /// Each version keeps its own literal, so a bad one can be pointed at.
    pub(crate) accepts: Option<Setting<Vec<Setting<u32>>>>,
    /// The spec file the struct must match, relative to the crate's manifest directory.
    pub(crate) spec: Option<Setting<String>>,
    /// The queue of that spec whose envelope the struct must match.
    pub(crate) queue: Option<Setting<String>>,
}

/// `#[envelope(rename = "...", max_bytes = N, default)]` on a struct field.
#[derive(Default)]
pub(crate) struct Field {
    pub(crate) rename: Option<Setting<String>>,
    pub(crate) max_bytes: Option<Setting<usize>>,
    pub(crate) default: Option<Setting<FieldDefault>>,
}

/// What an entry without the field decodes as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldDefault {
    /// `default`: `Default::default()`.
    Trait,
    /// `default = "text"`: the field's type decoding `text`, as if the entry had it.
    Text(String),
}

/// `#[field(rename = "...")]` on an enum variant.
#[derive(Default)]
pub(crate) struct Variant {
    pub(crate) rename: Option<Setting<String>>,
}

pub(crate) fn container(attrs: &[Attribute], errors: &mut Errors) -> Container {
    let mut out = Container::default();
    for_each_key(attrs, "envelope", errors, |key, meta, errors| {
        match key {
            "name" => set(&mut out.name, value(meta, errors, string)?, key, errors),
            "schema" => set(&mut out.schema, value(meta, errors, integer)?, key, errors),
            "accepts" => set(
                &mut out.accepts,
                value(meta, errors, versions)?,
                key,
                errors,
            ),
            "spec" => set(&mut out.spec, value(meta, errors, string)?, key, errors),
            "queue" => set(&mut out.queue, value(meta, errors, string)?, key, errors),
            _ => unknown_key(meta, "envelope attribute", CONTAINER_KEYS, errors)?,
        }
        Ok(())
    });
    out
}

pub(crate) fn field(attrs: &[Attribute], errors: &mut Errors) -> Field {
    let mut out = Field::default();
    for_each_key(attrs, "envelope", errors, |key, meta, errors| {
        match key {
            "rename" => set(&mut out.rename, value(meta, errors, string)?, key, errors),
            "max_bytes" => set(
                &mut out.max_bytes,
                value(meta, errors, integer)?,
                key,
                errors,
            ),
            "default" => set(&mut out.default, default(meta, errors)?, key, errors),
            _ => unknown_key(meta, "envelope field attribute", FIELD_KEYS, errors)?,
        }
        Ok(())
    });
    out
}

pub(crate) fn variant(attrs: &[Attribute], errors: &mut Errors) -> Variant {
    let mut out = Variant::default();
    for_each_key(attrs, "field", errors, |key, meta, errors| {
        match key {
            "rename" => set(&mut out.rename, value(meta, errors, string)?, key, errors),
            _ => unknown_key(meta, "field attribute", VARIANT_KEYS, errors)?,
        }
        Ok(())
    });
    out
}

/// Runs `on_key` for every `key` or `key = value` inside each `#[name(...)]`.
///
/// `on_key` gets the key as text (empty for a multi-segment path, which no
/// attribute uses). A syntax error `on_key` cannot step over ends that one
/// attribute; the other attributes are still read.
fn for_each_key(
    attrs: &[Attribute],
    name: &str,
    errors: &mut Errors,
    mut on_key: impl FnMut(&str, &ParseNestedMeta, &mut Errors) -> syn::Result<()>,
) {
    for attr in attrs.iter().filter(|attr| attr.path().is_ident(name)) {
        let parsed = attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            on_key(&key, &meta, errors)
        });
        if let Err(error) = parsed {
            errors.push(error);
        }
    }
}

/// Stores `value` in `slot`, or reports the key as given twice.
fn set<T>(
    slot: &mut Option<Setting<T>>,
    value: Option<Setting<T>>,
    key: &str,
    errors: &mut Errors,
) {
    let Some(value) = value else { return };
    if slot.is_some() {
        errors.push(value.error(format_args!("`{key}` is given twice")));
    } else {
        *slot = Some(value);
    }
}

/// The expression after `key =`, with the tokens of the whole `key = value`.
///
/// A key written without `= value` is reported, and `None` returned.
fn value_of(meta: &ParseNestedMeta, errors: &mut Errors) -> syn::Result<Option<Setting<Expr>>> {
    let path = &meta.path;
    if !meta.input.peek(Token![=]) {
        let key = path.to_token_stream();
        errors.spanned(path, format_args!("expected a value: `{key} = ...`"));
        skip_value(meta)?;
        return Ok(None);
    }
    let value: Expr = meta.value()?.parse()?;
    let tokens = quote!(#path = #value);
    Ok(Some(Setting::new(value, tokens)))
}

/// The value after `key =` as `convert` reads it; `None` when either reported a problem.
fn value<T>(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
    convert: fn(Setting<Expr>, &mut Errors) -> Option<Setting<T>>,
) -> syn::Result<Option<Setting<T>>> {
    Ok(value_of(meta, errors)?.and_then(|v| convert(v, errors)))
}

/// `default` alone, or `default = "text"`.
fn default(
    meta: &ParseNestedMeta,
    errors: &mut Errors,
) -> syn::Result<Option<Setting<FieldDefault>>> {
    let path = &meta.path;
    if meta.input.is_empty() || meta.input.peek(Token![,]) {
        return Ok(Some(Setting::new(
            FieldDefault::Trait,
            path.to_token_stream(),
        )));
    }
    if !meta.input.peek(Token![=]) {
        errors.spanned(
            path,
            "expected `default` or `default = \"text\"`, like `default = \"normal\"`",
        );
        skip_value(meta)?;
        return Ok(None);
    }
    let Some(setting) = value_of(meta, errors)? else {
        return Ok(None);
    };
    match &setting.value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Some(Setting::new(
            FieldDefault::Text(lit.value()),
            setting.tokens,
        ))),
        other => {
            errors.spanned(
                other,
                "expected the default as the text of a field value, like `default = \"normal\"` \
                 or `default = \"3\"`",
            );
            Ok(None)
        }
    }
}

/// Reports a key no attribute of this kind has, suggesting the closest known one.
fn unknown_key(
    meta: &ParseNestedMeta,
    kind: &str,
    known: &[&str],
    errors: &mut Errors,
) -> syn::Result<()> {
    let key = meta.path.to_token_stream().to_string().replace(' ', "");
    let message = match did_you_mean(&key, known) {
        Some(close) => format!("unknown {kind} `{key}`; did you mean `{close}`?"),
        None => {
            let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            format!("unknown {kind} `{key}`; expected {}", expected.join(", "))
        }
    };
    errors.spanned(&meta.path, message);
    skip_value(meta)
}

/// The known name closest to `key`, if one is close enough to be a likely typo.
pub(crate) fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::jaro_winkler(key, candidate), *candidate))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|(a, _), (b, _)| a.total_cmp(b))
        .map(|(_, candidate)| candidate)
}

/// Steps over whatever follows an unusable key, up to the next `,`.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    while !meta.input.is_empty() && !meta.input.peek(Token![,]) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

fn string(setting: Setting<Expr>, errors: &mut Errors) -> Option<Setting<String>> {
    match &setting.value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(Setting::new(lit.value(), setting.tokens)),
        other => errors.refuse_spanned(other, "expected a string literal"),
    }
}

/// An unsigned integer literal; zero is let through for `validate` to explain.
fn integer<T>(setting: Setting<Expr>, errors: &mut Errors) -> Option<Setting<T>>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let value = int_literal(&setting.value, errors)?;
    Some(Setting::new(value, setting.tokens))
}

/// `[N, ...]`, each element kept with its own span.
fn versions(setting: Setting<Expr>, errors: &mut Errors) -> Option<Setting<Vec<Setting<u32>>>> {
    let Expr::Array(ExprArray { elems, .. }) = &setting.value else {
        return errors.refuse_spanned(
            &setting.value,
            "expected a list of schema versions, like `accepts = [2, 3]`",
        );
    };
    let versions = elems
        .iter()
        .filter_map(|elem| {
            let value = int_literal(elem, errors)?;
            Some(Setting::new(value, elem.to_token_stream()))
        })
        .collect();
    Some(Setting::new(versions, setting.tokens))
}

fn int_literal<T>(expr: &Expr, errors: &mut Errors) -> Option<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    match expr {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse().map_err(|error| errors.push(error)).ok(),
        other => errors.refuse_spanned(other, "expected an unsigned integer literal"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_keys_only() {
        assert_eq!(did_you_mean("shema", CONTAINER_KEYS), Some("schema"));
        assert_eq!(did_you_mean("accept", CONTAINER_KEYS), Some("accepts"));
        assert_eq!(did_you_mean("max_byte", FIELD_KEYS), Some("max_bytes"));
        assert_eq!(did_you_mean("renam", VARIANT_KEYS), Some("rename"));
        assert_eq!(did_you_mean("queues", CONTAINER_KEYS), Some("queue"));
        assert_eq!(did_you_mean("path", CONTAINER_KEYS), None);
        assert_eq!(did_you_mean("skip", FIELD_KEYS), None);
    }

    fn parse_container(attr: Attribute) -> (Container, syn::Result<()>) {
        let mut errors = Errors::new();
        let container = container(&[attr], &mut errors);
        (container, errors.check())
    }

    #[test]
    fn reads_every_container_key() {
        let (container, result) = parse_container(syn::parse_quote!(
            #[envelope(name = "OcrRequested", schema = 3, accepts = [2, 3])]
        ));
        assert!(result.is_ok());
        assert_eq!(container.name.unwrap().value, "OcrRequested");
        assert_eq!(container.schema.unwrap().value, 3);
        let accepts: Vec<u32> = container
            .accepts
            .unwrap()
            .value
            .iter()
            .map(|v| v.value)
            .collect();
        assert_eq!(accepts, [2, 3]);
    }

    #[test]
    fn keeps_going_after_a_bad_key() {
        let (container, result) = parse_container(syn::parse_quote!(
            #[envelope(shema = 3, name = 7, schema = 2, schema = 4, accepts = 2)]
        ));
        let messages: Vec<String> = result
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            messages,
            [
                "unknown envelope attribute `shema`; did you mean `schema`?",
                "expected a string literal",
                "`schema` is given twice",
                "expected a list of schema versions, like `accepts = [2, 3]`",
            ]
        );
        assert_eq!(container.schema.unwrap().value, 2);
    }

    #[test]
    fn reads_the_spec_keys() {
        let (container, result) = parse_container(syn::parse_quote!(
            #[envelope(spec = "queues.yaml", queue = "ocr")]
        ));
        assert!(result.is_ok());
        assert_eq!(container.spec.unwrap().value, "queues.yaml");
        assert_eq!(container.queue.unwrap().value, "ocr");
    }

    fn parse_field(attr: Attribute) -> (Field, Vec<String>) {
        let mut errors = Errors::new();
        let field = field(&[attr], &mut errors);
        let messages = match errors.check() {
            Ok(()) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        };
        (field, messages)
    }

    #[test]
    fn default_is_a_flag_or_a_text() {
        let (field, messages) = parse_field(syn::parse_quote!(#[envelope(default)]));
        assert!(messages.is_empty());
        assert_eq!(field.default.unwrap().value, FieldDefault::Trait);

        let (field, messages) = parse_field(syn::parse_quote!(#[envelope(default = "normal")]));
        assert!(messages.is_empty());
        assert_eq!(
            field.default.unwrap().value,
            FieldDefault::Text("normal".into())
        );
    }

    #[test]
    fn bad_field_values_are_reported() {
        let (field, messages) = parse_field(syn::parse_quote!(
            #[envelope(default = true, max_bytes, max_bytes = 9)]
        ));
        assert_eq!(
            messages,
            [
                "expected the default as the text of a field value, like `default = \"normal\"` \
                 or `default = \"3\"`",
                "expected a value: `max_bytes = ...`"
            ]
        );
        assert!(field.default.is_none());
        assert_eq!(field.max_bytes.unwrap().value, 9);
    }
}
