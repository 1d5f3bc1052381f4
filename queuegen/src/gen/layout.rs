//! Laying out generated Rust from its syntax tree: `syn` parses what a
//! template or `quote!` produced, `prettyplease` prints it (the prost-build
//! way), so no generator holds widths or indents.
//!
//! prettyplease prints items back to back; [`format`] adds the blank lines a
//! person would write: between items, except within one group of `use`s,
//! a run of `mod` declarations or of undocumented consts. Comments other than
//! doc comments do not survive: generated code explains itself in `///`/`//!`.

use syn::{Attribute, ImplItem, Item, TraitItem, UseTree};

use crate::error::{Error, Result};

/// The doc comment that stands for a blank line while prettyplease prints;
/// each line that is only this becomes an empty line.
const BLANK_LINE: &str = "queuegen:blank-line";

/// `source` (one Rust file, without its header) laid out by prettyplease,
/// with blank lines between items. `name` says which file, for errors.
pub fn format(name: &str, source: &str) -> Result<String> {
    let mut file = syn::parse_file(source).map_err(|error| {
        Error::Unsupported(format!(
            "generated {name} is not valid Rust ({error}); this is a queuegen bug:\n{source}"
        ))
    })?;
    // The file's `//!` docs stand apart from its first item.
    let after_docs = !file.attrs.is_empty();
    separate(&mut file.items, after_docs);
    let printed = prettyplease::unparse(&file);
    let marker = format!("///{BLANK_LINE}");
    Ok(printed
        .lines()
        .map(|line| if line.trim() == marker { "" } else { line })
        .map(|line| format!("{line}\n"))
        .collect())
}

/// Marks each item of one block that starts a new paragraph (see the module doc).
fn separate<T: Separable>(items: &mut [T], first_too: bool) {
    // Decided before any marker is added: markers are attributes, which the rules read.
    let blank: Vec<bool> = (0..items.len())
        .map(|index| match index {
            0 => first_too,
            _ => !items[index - 1].runs_on_with(&items[index]),
        })
        .collect();
    for (item, blank) in items.iter_mut().zip(blank) {
        item.separate_nested();
        if let (true, Some(attrs)) = (blank, item.attrs_mut()) {
            attrs.insert(0, syn::parse_quote!(#[doc = #BLANK_LINE]));
        }
    }
}

/// An item of a file, `mod`, `impl` or trait, as [`separate`] sees it.
trait Separable {
    /// Whether `next` continues this item's run without a blank line.
    fn runs_on_with(&self, next: &Self) -> bool;
    /// Separates the items nested in this one (an impl's or trait's items
    /// nest none).
    fn separate_nested(&mut self) {}
    /// The item's attributes, where a blank-line marker goes.
    fn attrs_mut(&mut self) -> Option<&mut Vec<Attribute>>;
}

impl Separable for Item {
    fn runs_on_with(&self, next: &Item) -> bool {
        match (self, next) {
            (Item::Use(a), Item::Use(b)) => {
                a.attrs.is_empty() && b.attrs.is_empty() && use_group(a) == use_group(b)
            }
            (Item::Mod(a), Item::Mod(b)) => a.content.is_none() && b.content.is_none(),
            (Item::Const(a), Item::Const(b)) => a.attrs.is_empty() && b.attrs.is_empty(),
            _ => false,
        }
    }

    fn separate_nested(&mut self) {
        match self {
            Item::Mod(module) => {
                if let Some((_, items)) = &mut module.content {
                    separate(items, false);
                }
            }
            Item::Impl(block) => separate(&mut block.items, false),
            Item::Trait(block) => separate(&mut block.items, false),
            _ => {}
        }
    }

    fn attrs_mut(&mut self) -> Option<&mut Vec<Attribute>> {
        Some(match self {
            Item::Const(item) => &mut item.attrs,
            Item::Enum(item) => &mut item.attrs,
            Item::ExternCrate(item) => &mut item.attrs,
            Item::Fn(item) => &mut item.attrs,
            Item::ForeignMod(item) => &mut item.attrs,
            Item::Impl(item) => &mut item.attrs,
            Item::Macro(item) => &mut item.attrs,
            Item::Mod(item) => &mut item.attrs,
            Item::Static(item) => &mut item.attrs,
            Item::Struct(item) => &mut item.attrs,
            Item::Trait(item) => &mut item.attrs,
            Item::TraitAlias(item) => &mut item.attrs,
            Item::Type(item) => &mut item.attrs,
            Item::Union(item) => &mut item.attrs,
            Item::Use(item) => &mut item.attrs,
            _ => return None,
        })
    }
}

impl Separable for ImplItem {
    fn attrs_mut(&mut self) -> Option<&mut Vec<Attribute>> {
        Some(match self {
            ImplItem::Const(item) => &mut item.attrs,
            ImplItem::Fn(item) => &mut item.attrs,
            ImplItem::Type(item) => &mut item.attrs,
            ImplItem::Macro(item) => &mut item.attrs,
            _ => return None,
        })
    }

    fn runs_on_with(&self, next: &ImplItem) -> bool {
        match (self, next) {
            (ImplItem::Const(a), ImplItem::Const(b)) => a.attrs.is_empty() && b.attrs.is_empty(),
            _ => false,
        }
    }
}

impl Separable for TraitItem {
    fn attrs_mut(&mut self) -> Option<&mut Vec<Attribute>> {
        Some(match self {
            TraitItem::Const(item) => &mut item.attrs,
            TraitItem::Fn(item) => &mut item.attrs,
            TraitItem::Type(item) => &mut item.attrs,
            TraitItem::Macro(item) => &mut item.attrs,
            _ => return None,
        })
    }

    fn runs_on_with(&self, next: &TraitItem) -> bool {
        match (self, next) {
            (TraitItem::Const(a), TraitItem::Const(b)) => a.attrs.is_empty() && b.attrs.is_empty(),
            _ => false,
        }
    }
}

/// rustfmt's import groups, kept apart by a blank line: the standard
/// library, other crates, this crate; re-exports apart from imports.
fn use_group(item: &syn::ItemUse) -> (bool, u8) {
    let public = !matches!(item.vis, syn::Visibility::Inherited);
    let origin = match &item.tree {
        UseTree::Path(path) => match path.ident.to_string().as_str() {
            "std" | "core" | "alloc" => 0,
            "crate" | "self" | "super" => 2,
            _ => 1,
        },
        _ => 1,
    };
    (public, origin)
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn items_are_separated_by_one_blank_line_and_runs_stay_together() {
        let source = "//! A module.\n\
            use std::time::Duration; use std::future::Future; use queuegen_runtime::Redis;\n\
            pub use super::envelopes::Job;\n\
            pub mod a; pub mod b;\n\
            pub mod lanes { pub const HIGH: &str = \"high\"; pub const LOW: &str = \"low\"; }\n\
            /// Documented.\n pub struct S;\n\
            impl S { fn a(&self) {} fn b(&self) { let _ = 1; } }\n";
        let expected = "//! A module.\n\
            \n\
            use std::time::Duration;\n\
            use std::future::Future;\n\
            \n\
            use queuegen_runtime::Redis;\n\
            \n\
            pub use super::envelopes::Job;\n\
            \n\
            pub mod a;\n\
            pub mod b;\n\
            \n\
            pub mod lanes {\n    pub const HIGH: &str = \"high\";\n    pub const LOW: &str = \"low\";\n}\n\
            \n\
            /// Documented.\n\
            pub struct S;\n\
            \n\
            impl S {\n    fn a(&self) {}\n\n    fn b(&self) {\n        let _ = 1;\n    }\n}\n";
        assert_eq!(format("t.rs", source).unwrap(), expected);
    }

    #[test]
    fn invalid_rust_is_a_generator_error_naming_the_file() {
        let error = format("ocr.rs", "pub fn (").unwrap_err().to_string();
        assert!(
            error.contains("generated ocr.rs is not valid Rust"),
            "{error}"
        );
    }
}
