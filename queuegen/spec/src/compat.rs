//! Whether one definition of a field can decode every value another one wrote.
//!
//! The lock file and `diff-spec` compare what was published with what the
//! spec now says: a worker decoding with `reader` meets entries that a
//! producer of `written` wrote, in streams, retry schedules and dead letters.

use std::fmt;

use crate::model::{Field, FieldType};

/// Why a reader cannot decode everything a writer produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incompatibility {
    /// An integer type with the same signedness and a smaller range.
    Narrowed {
        written: &'static str,
        reader: &'static str,
        /// The written values the reader refuses, e.g. "values above 4294967295".
        lost: String,
    },
    /// Signed to unsigned, or unsigned to a signed type that is not wider.
    SignMismatch {
        written: &'static str,
        reader: &'static str,
        lost: String,
    },
    /// Enum values the writer could produce and the reader does not know.
    EnumValuesDropped { dropped: Vec<String> },
    /// The string bound went down (or appeared): longer old values are rejected.
    MaxBytesLowered {
        /// `None`: the written string was unbounded.
        written: Option<u64>,
        reader: u64,
    },
    /// A scalar read as a string whose `max_bytes` is below its longest encoding.
    StringTooShort {
        written: &'static str,
        needs: u64,
        max_bytes: u64,
    },
    /// The writer could leave the field out; the reader requires it.
    NowRequired {
        /// The written definition had a default rather than `optional: true`.
        had_default: bool,
    },
    /// Any other change of type, e.g. string to u32.
    TypeChanged {
        written: &'static str,
        reader: &'static str,
    },
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incompatibility::Narrowed {
                written,
                reader,
                lost,
            } => write!(f, "{written} narrowed to {reader}: {lost} would not decode"),
            Incompatibility::SignMismatch {
                written,
                reader,
                lost,
            } => write!(f, "{written} changed to {reader}: {lost} would not decode"),
            Incompatibility::EnumValuesDropped { dropped } => {
                let (noun, pronoun) = if dropped.len() == 1 {
                    ("value", "it")
                } else {
                    ("values", "them")
                };
                write!(
                    f,
                    "enum {noun} {} dropped: entries holding {pronoun} would not decode",
                    backticked(dropped)
                )
            }
            Incompatibility::MaxBytesLowered {
                written: Some(written),
                reader,
            } => write!(
                f,
                "max_bytes lowered from {written} to {reader}: old values up to {written} bytes would be rejected"
            ),
            Incompatibility::MaxBytesLowered {
                written: None,
                reader,
            } => write!(
                f,
                "max_bytes {reader} set on a string that had no bound: old values longer than {reader} bytes would be rejected"
            ),
            Incompatibility::StringTooShort {
                written,
                needs,
                max_bytes,
            } => write!(
                f,
                "{written} read as a string of max_bytes {max_bytes}: a {written} takes up to {needs} bytes, so longer values would be rejected"
            ),
            Incompatibility::NowRequired { had_default: false } => write!(
                f,
                "optional made required without a default: entries of the old definition may lack it"
            ),
            Incompatibility::NowRequired { had_default: true } => write!(
                f,
                "the default was removed and the field is required: entries of the old definition may lack it"
            ),
            Incompatibility::TypeChanged { written, reader } => {
                write!(f, "{written} values do not decode as {reader}")
            }
        }
    }
}

/// Whether a decoder expecting `reader` decodes every value an encoder of
/// `written` produced. Names are not compared: the caller pairs the fields.
pub fn reads_all_of(written: &Field, reader: &Field) -> Result<(), Incompatibility> {
    type_reads(written, reader)?;
    let may_be_absent = written.optional || written.default.is_some();
    let tolerates_absence = reader.optional || reader.default.is_some();
    if may_be_absent && !tolerates_absence {
        return Err(Incompatibility::NowRequired {
            had_default: written.default.is_some(),
        });
    }
    Ok(())
}

fn type_reads(written: &Field, reader: &Field) -> Result<(), Incompatibility> {
    use FieldType as T;
    match (&written.ty, &reader.ty) {
        (T::String, T::String) => bound_fits(written.max_bytes, reader.max_bytes),
        (T::Enum { values: old }, T::Enum { values: new }) => {
            let dropped: Vec<String> = old.iter().filter(|v| !new.contains(v)).cloned().collect();
            if dropped.is_empty() {
                Ok(())
            } else {
                Err(Incompatibility::EnumValuesDropped { dropped })
            }
        }
        (old, T::String) => {
            let needs = old
                .max_encoded_bytes()
                .expect("every type but string has a bounded encoding");
            match reader.max_bytes {
                Some(max_bytes) if max_bytes < needs => Err(Incompatibility::StringTooShort {
                    written: old.spec_name(),
                    needs,
                    max_bytes,
                }),
                _ => Ok(()),
            }
        }
        (old, new) => match (old.int_range(), new.int_range()) {
            (Some(from), Some(to)) => int_fits(old.spec_name(), from, new.spec_name(), to),
            _ if old == new => Ok(()),
            _ => Err(Incompatibility::TypeChanged {
                written: old.spec_name(),
                reader: new.spec_name(),
            }),
        },
    }
}

fn bound_fits(written: Option<u64>, reader: Option<u64>) -> Result<(), Incompatibility> {
    match (written, reader) {
        (_, None) => Ok(()),
        (Some(w), Some(r)) if w <= r => Ok(()),
        (written, Some(reader)) => Err(Incompatibility::MaxBytesLowered { written, reader }),
    }
}

fn int_fits(
    written: &'static str,
    (old_min, old_max): (i128, i128),
    reader: &'static str,
    (new_min, new_max): (i128, i128),
) -> Result<(), Incompatibility> {
    let mut lost = Vec::new();
    if old_min < new_min {
        lost.push(if new_min == 0 {
            "negative values".to_owned()
        } else {
            format!("values below {new_min}")
        });
    }
    if old_max > new_max {
        lost.push(format!("values above {new_max}"));
    }
    if lost.is_empty() {
        return Ok(());
    }
    let lost = lost.join(" and ");
    if (old_min < 0) == (new_min < 0) {
        Err(Incompatibility::Narrowed {
            written,
            reader,
            lost,
        })
    } else {
        Err(Incompatibility::SignMismatch {
            written,
            reader,
            lost,
        })
    }
}

/// What differs between two definitions of a field, e.g. `type u64 → u32`,
/// `optional → required`; empty when they are equal (names aside).
pub fn differences(old: &Field, new: &Field) -> Vec<String> {
    let mut out = Vec::new();
    match (&old.ty, &new.ty) {
        (FieldType::Enum { values: a }, FieldType::Enum { values: b }) if a != b => {
            out.push(format!("values [{}] → [{}]", a.join(", "), b.join(", ")));
        }
        (a, b) if a != b => out.push(format!("type {} → {}", type_text(a), type_text(b))),
        _ => {}
    }
    if old.optional != new.optional {
        out.push(if new.optional {
            "required → optional".to_owned()
        } else {
            "optional → required".to_owned()
        });
    }
    if old.default != new.default {
        let show =
            |d: &Option<String>| d.as_deref().map_or("none".to_owned(), |d| format!("`{d}`"));
        out.push(format!(
            "default {} → {}",
            show(&old.default),
            show(&new.default)
        ));
    }
    if old.max_bytes != new.max_bytes {
        let show = |m: Option<u64>| m.map_or("unbounded".to_owned(), |m| m.to_string());
        out.push(format!(
            "max_bytes {} → {}",
            show(old.max_bytes),
            show(new.max_bytes)
        ));
    }
    out
}

/// `u32`, or `enum [low, high]`.
fn type_text(ty: &FieldType) -> String {
    match ty {
        FieldType::Enum { values } => format!("enum [{}]", values.join(", ")),
        other => other.spec_name().to_owned(),
    }
}

/// A field's definition as the spec writes it, without its name:
/// `{ type: enum, values: [low, high], default: low }`.
pub fn definition(field: &Field) -> String {
    format!("{{ {} }}", definition_parts(field).join(", "))
}

/// `type: …`, then `values`, `optional`, `default` and `max_bytes` when set.
pub(crate) fn definition_parts(field: &Field) -> Vec<String> {
    let mut parts = vec![format!("type: {}", field.ty.spec_name())];
    if let FieldType::Enum { values } = &field.ty {
        let values: Vec<String> = values.iter().map(|v| yaml_scalar(v)).collect();
        parts.push(format!("values: [{}]", values.join(", ")));
    }
    if field.optional {
        parts.push("optional: true".to_owned());
    }
    if let Some(default) = &field.default {
        parts.push(format!("default: {}", yaml_scalar(default)));
    }
    if let Some(max) = field.max_bytes {
        parts.push(format!("max_bytes: {max}"));
    }
    parts
}

/// `text` as a YAML flow scalar that reads back as the same string: plain
/// when it is a word that YAML does not read as something else, otherwise
/// double-quoted (JSON escapes are valid YAML).
pub(crate) fn yaml_scalar(text: &str) -> String {
    let plain = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        text.to_owned()
    } else {
        serde_json::to_string(text).expect("a string serializes")
    }
}

/// `` `a`, `b` and `c` ``.
pub(crate) fn backticked(names: &[String]) -> String {
    and_list(names.iter().map(|n| format!("`{n}`")).collect())
}

/// `a`, `a and b`, `a, b and c`.
pub(crate) fn and_list(items: Vec<String>) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(ty: FieldType) -> Field {
        Field {
            name: "f".into(),
            ty,
            optional: false,
            default: None,
            max_bytes: None,
        }
    }

    fn string(max_bytes: Option<u64>) -> Field {
        Field {
            max_bytes,
            ..field(FieldType::String)
        }
    }

    fn enumeration(values: &[&str]) -> Field {
        field(FieldType::Enum {
            values: values.iter().map(|v| v.to_string()).collect(),
        })
    }

    fn optional(f: Field) -> Field {
        Field {
            optional: true,
            ..f
        }
    }

    fn with_default(f: Field, default: &str) -> Field {
        Field {
            default: Some(default.into()),
            ..f
        }
    }

    fn reason(written: &Field, reader: &Field) -> String {
        reads_all_of(written, reader)
            .expect_err("incompatible")
            .to_string()
    }

    #[test]
    fn identical_definitions_read_each_other() {
        for ty in FieldType::SCALARS {
            assert_eq!(reads_all_of(&field(ty.clone()), &field(ty)), Ok(()));
        }
        let e = enumeration(&["low", "high"]);
        assert_eq!(reads_all_of(&e, &e), Ok(()));
    }

    #[test]
    fn integers_widen() {
        use FieldType::*;
        for (from, to) in [(U32, U64), (U32, I64), (I32, I64)] {
            assert_eq!(reads_all_of(&field(from), &field(to)), Ok(()));
        }
    }

    #[test]
    fn integers_do_not_narrow() {
        use FieldType::*;
        let err = reads_all_of(&field(U64), &field(U32)).unwrap_err();
        assert_eq!(
            err,
            Incompatibility::Narrowed {
                written: "u64",
                reader: "u32",
                lost: "values above 4294967295".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "u64 narrowed to u32: values above 4294967295 would not decode"
        );
        assert_eq!(
            reason(&field(I64), &field(I32)),
            "i64 narrowed to i32: values below -2147483648 and values above 2147483647 would not decode"
        );
    }

    #[test]
    fn signedness_changes_only_when_the_range_fits() {
        use FieldType::*;
        assert_eq!(
            reason(&field(I32), &field(U64)),
            "i32 changed to u64: negative values would not decode"
        );
        assert_eq!(
            reason(&field(U32), &field(I32)),
            "u32 changed to i32: values above 2147483647 would not decode"
        );
        assert_eq!(
            reason(&field(U64), &field(I64)),
            "u64 changed to i64: values above 9223372036854775807 would not decode"
        );
        assert!(matches!(
            reads_all_of(&field(I64), &field(U32)),
            Err(Incompatibility::SignMismatch { .. })
        ));
    }

    #[test]
    fn enum_values_may_only_grow() {
        let old = enumeration(&["low", "normal", "high"]);
        let more = enumeration(&["high", "low", "normal", "urgent"]);
        assert_eq!(reads_all_of(&old, &more), Ok(()));
        assert_eq!(
            reads_all_of(&old, &enumeration(&["low"])),
            Err(Incompatibility::EnumValuesDropped {
                dropped: vec!["normal".into(), "high".into()]
            })
        );
        assert_eq!(
            reason(&old, &enumeration(&["low", "normal"])),
            "enum value `high` dropped: entries holding it would not decode"
        );
    }

    #[test]
    fn string_bounds_may_only_rise() {
        assert_eq!(reads_all_of(&string(Some(100)), &string(Some(200))), Ok(()));
        assert_eq!(reads_all_of(&string(Some(100)), &string(None)), Ok(()));
        assert_eq!(
            reason(&string(Some(200)), &string(Some(100))),
            "max_bytes lowered from 200 to 100: old values up to 200 bytes would be rejected"
        );
        assert_eq!(
            reads_all_of(&string(None), &string(Some(100))),
            Err(Incompatibility::MaxBytesLowered {
                written: None,
                reader: 100
            })
        );
    }

    #[test]
    fn scalars_read_as_long_enough_strings() {
        use FieldType::*;
        for ty in [Bool, U32, U64, I32, I64, Timestamp] {
            assert_eq!(reads_all_of(&field(ty.clone()), &string(None)), Ok(()));
            assert_eq!(reads_all_of(&field(ty), &string(Some(24))), Ok(()));
        }
        let level = enumeration(&["low", "critical"]);
        assert_eq!(reads_all_of(&level, &string(Some(8))), Ok(()));
        assert_eq!(
            reads_all_of(&level, &string(Some(7))),
            Err(Incompatibility::StringTooShort {
                written: "enum",
                needs: 8,
                max_bytes: 7
            })
        );
        assert_eq!(
            reason(&field(U64), &string(Some(10))),
            "u64 read as a string of max_bytes 10: a u64 takes up to 20 bytes, so longer values would be rejected"
        );
    }

    #[test]
    fn other_type_changes_are_refused() {
        use FieldType::*;
        assert_eq!(
            reason(&string(Some(10)), &field(U32)),
            "string values do not decode as u32"
        );
        for (from, to) in [
            (Bool, U32),
            (Timestamp, I64),
            (U32, Bool),
            (String, Timestamp),
        ] {
            assert!(matches!(
                reads_all_of(&field(from), &field(to)),
                Err(Incompatibility::TypeChanged { .. })
            ));
        }
        assert!(matches!(
            reads_all_of(&string(None), &enumeration(&["a"])),
            Err(Incompatibility::TypeChanged { .. })
        ));
    }

    #[test]
    fn presence_may_only_loosen() {
        let required = field(FieldType::U32);
        let opt = optional(field(FieldType::U32));
        let defaulted = with_default(field(FieldType::U32), "3");
        assert_eq!(reads_all_of(&required, &opt), Ok(()));
        assert_eq!(reads_all_of(&required, &defaulted), Ok(()));
        assert_eq!(reads_all_of(&opt, &defaulted), Ok(()));
        assert_eq!(reads_all_of(&defaulted, &opt), Ok(()));
        assert_eq!(
            reason(&opt, &required),
            "optional made required without a default: entries of the old definition may lack it"
        );
        assert_eq!(
            reads_all_of(&defaulted, &required),
            Err(Incompatibility::NowRequired { had_default: true })
        );
    }

    #[test]
    fn differences_name_each_part() {
        let old = with_default(enumeration(&["low", "high"]), "low");
        let new = optional(enumeration(&["low"]));
        assert_eq!(
            differences(&old, &new),
            [
                "values [low, high] → [low]",
                "required → optional",
                "default `low` → none"
            ]
        );
        assert_eq!(
            differences(&string(Some(8)), &field(FieldType::U64)),
            ["type string → u64", "max_bytes 8 → unbounded"]
        );
        assert!(differences(&old, &old).is_empty());
    }

    #[test]
    fn definitions_read_like_the_spec() {
        let f = with_default(enumeration(&["low", "high"]), "low");
        assert_eq!(
            definition(&f),
            "{ type: enum, values: [low, high], default: low }"
        );
        assert_eq!(
            definition(&optional(string(Some(200)))),
            "{ type: string, optional: true, max_bytes: 200 }"
        );
        assert_eq!(yaml_scalar("3"), "\"3\"");
        assert_eq!(yaml_scalar("true"), "\"true\"");
        assert_eq!(yaml_scalar("a: b"), "\"a: b\"");
        assert_eq!(yaml_scalar("en"), "en");
        assert_eq!(yaml_scalar("OcrRequested"), "OcrRequested");
        assert_eq!(yaml_scalar("No"), "\"No\"");
    }
}
