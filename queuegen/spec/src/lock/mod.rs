//! The lock file: the schema versions already published, so that a spec edit which changes one is caught.
//!
//! `queues.lock` sits beside `queues.yaml` and records, for every envelope
//! and schema version, the body fields that version was published with.
//! `queuegen lock` writes it; `queuegen check` compares the spec with it
//! ([`crate::check_str_with_lock`]): entries of a published version live on
//! in streams, retry schedules and dead letters long after its producers are
//! gone, so its definition never changes.

pub(crate) mod check;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::compat;
use crate::diagnostic::{Diagnostic, Severity};
use crate::model::{Field, FieldType, Spec};
use crate::yaml::{locate, Node, Pos, Seg, Target};

/// The lock format this queuegen reads and writes.
pub const FORMAT: u32 = 1;

const HEADER: &str = "\
# Published schema versions of the spec beside this file: written by `queuegen lock`,
# checked by `queuegen check`. Do not edit by hand.
";

/// The published schema versions of a spec's envelopes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lock {
    /// By envelope name, then schema version: that version's body fields as
    /// published, in encoding order.
    pub envelopes: BTreeMap<String, BTreeMap<u32, Vec<Field>>>,
}

/// A lock file that cannot be read or written, or is not a lock file.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{file}:{line}:{column}: malformed lock file: {message}")]
    Malformed {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
}

impl LockError {
    /// A malformed lock as an error diagnostic in the lock file, so that
    /// `check` reports it with the spec's own problems; `None` for I/O errors.
    pub fn to_diagnostic(&self) -> Option<Diagnostic> {
        let LockError::Malformed {
            file,
            line,
            column,
            message,
        } = self
        else {
            return None;
        };
        Some(Diagnostic {
            severity: Severity::Error,
            file: file.clone(),
            line: *line,
            column: *column,
            path: String::new(),
            message: format!("malformed lock file: {message}"),
            help: Some(
                "restore it from version control, or rewrite it from the spec with `queuegen lock --force`"
                    .to_owned(),
            ),
        })
    }
}

/// `queues.yaml` -> `queues.lock`, in the same directory.
pub fn path_beside(spec: &Path) -> PathBuf {
    spec.with_extension("lock")
}

impl Lock {
    /// Every schema version of every envelope of `spec`, older ones as
    /// reconstructed from the declared changes.
    pub fn of_spec(spec: &Spec) -> Lock {
        let envelopes = spec
            .envelopes
            .iter()
            .map(|envelope| {
                let versions = (1..=envelope.schema)
                    .map(|version| {
                        let fields = envelope.fields_of(version).into_iter().map(|vf| vf.field);
                        (version, fields.collect())
                    })
                    .collect();
                (envelope.name.clone(), versions)
            })
            .collect();
        Lock { envelopes }
    }

    /// The fields `envelope` was published with at `version`, if recorded.
    pub fn schema(&self, envelope: &str, version: u32) -> Option<&[Field]> {
        self.envelopes
            .get(envelope)
            .and_then(|versions| versions.get(&version))
            .map(Vec::as_slice)
    }

    /// The newest recorded version of `envelope`.
    pub fn newest(&self, envelope: &str) -> Option<u32> {
        self.envelopes
            .get(envelope)
            .and_then(|versions| versions.keys().next_back().copied())
    }

    /// Reads the lock at `path`; `Ok(None)` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<Lock>, LockError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Lock::parse(&text, &path.display().to_string()).map(Some),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LockError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses lock text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Lock, LockError> {
        let malformed = |pos: Option<Pos>, message: String| {
            let pos = pos.unwrap_or(Pos { line: 1, column: 1 });
            LockError::Malformed {
                file: file.to_owned(),
                line: pos.line,
                column: pos.column,
                message,
            }
        };
        // serde keeps the last of duplicate keys; the tree keeps them all.
        if let Ok(tree) = crate::yaml::parse(text) {
            if let Some((segs, key)) = first_duplicate(&tree, &mut Vec::new()) {
                return Err(malformed(
                    locate(text, &segs, Target::Key),
                    format!("duplicate key `{key}`"),
                ));
            }
        }
        let raw: LockFile = serde_yaml_ng::from_str(text).map_err(|err| {
            let pos = err.location().map(|l| Pos {
                line: l.line(),
                column: l.column(),
            });
            malformed(pos, strip_position(&err.to_string()))
        })?;
        let at = |segs: &[Seg], target: Target| locate(text, segs, target);
        if raw.format != FORMAT {
            return Err(malformed(
                at(&[Seg::key("format")], Target::Value),
                format!(
                    "lock format {} is not supported: this queuegen reads format {FORMAT}",
                    raw.format
                ),
            ));
        }
        let mut envelopes = BTreeMap::new();
        for (name, versions) in raw.envelopes {
            let mut out = BTreeMap::new();
            for (version, fields) in versions {
                let segs = [
                    Seg::key("envelopes"),
                    Seg::key(name.as_str()),
                    Seg::key(version.to_string()),
                ];
                if version == 0 {
                    return Err(malformed(
                        at(&segs, Target::Key),
                        format!("{name}: schema versions start at 1"),
                    ));
                }
                let mut model: Vec<Field> = Vec::with_capacity(fields.len());
                for (index, field) in fields.into_iter().enumerate() {
                    let field_at = [&segs[..], &[Seg::Index(index)]].concat();
                    if model.iter().any(|f| f.name == field.name) {
                        return Err(malformed(
                            at(&field_at, Target::Value),
                            format!(
                                "{name} schema {version}: field `{}` is listed twice",
                                field.name
                            ),
                        ));
                    }
                    let values_at = [&field_at[..], &[Seg::key("values")]].concat();
                    let ty = match (field.ty, field.values) {
                        (TypeName::Enum, Some(values)) if !values.is_empty() => {
                            FieldType::Enum { values }
                        }
                        (TypeName::Enum, _) => {
                            return Err(malformed(
                                at(&field_at, Target::Value),
                                format!(
                                    "{name} schema {version}: enum field `{}` has no values",
                                    field.name
                                ),
                            ))
                        }
                        (_, Some(_)) => {
                            return Err(malformed(
                                at(&values_at, Target::Key),
                                format!(
                                "{name} schema {version}: `values` on `{}`, which is not an enum",
                                field.name
                            ),
                            ))
                        }
                        (other, None) => other.scalar(),
                    };
                    model.push(Field {
                        name: field.name,
                        ty,
                        optional: field.optional,
                        default: field.default,
                        max_bytes: field.max_bytes,
                    });
                }
                out.insert(version, model);
            }
            envelopes.insert(name, out);
        }
        Ok(Lock { envelopes })
    }

    /// The lock file's text: the header, then envelopes by name and versions
    /// in ascending order, one line per field, so review diffs stay small.
    pub fn to_yaml(&self) -> String {
        let mut out = String::from(HEADER);
        writeln!(out, "format: {FORMAT}").unwrap();
        if self.envelopes.is_empty() {
            out.push_str("envelopes: {}\n");
            return out;
        }
        out.push_str("envelopes:\n");
        for (name, versions) in &self.envelopes {
            writeln!(out, "  {}:", compat::yaml_scalar(name)).unwrap();
            for (version, fields) in versions {
                if fields.is_empty() {
                    writeln!(out, "    {version}: []").unwrap();
                    continue;
                }
                writeln!(out, "    {version}:").unwrap();
                for field in fields {
                    let mut parts = vec![format!("name: {}", compat::yaml_scalar(&field.name))];
                    parts.extend(compat::definition_parts(field));
                    writeln!(out, "      - {{ {} }}", parts.join(", ")).unwrap();
                }
            }
        }
        out
    }

    /// The lock once `spec` is recorded, and what happened to each version.
    /// Recorded versions are kept as they are, unless `force`, which makes
    /// the lock exactly the spec's versions (dropping envelopes and versions
    /// the spec no longer has).
    pub fn updated(&self, spec: &Spec, force: bool) -> (Lock, Vec<LockEntry>) {
        let wanted = Lock::of_spec(spec);
        let mut next = if force { Lock::default() } else { self.clone() };
        let mut entries = Vec::new();
        for envelope in &spec.envelopes {
            for (version, fields) in &wanted.envelopes[&envelope.name] {
                let status = match self.schema(&envelope.name, *version) {
                    None => LockStatus::Recorded,
                    Some(recorded) if !force || recorded == fields.as_slice() => {
                        LockStatus::Unchanged
                    }
                    Some(_) => LockStatus::Rewritten,
                };
                if force || status == LockStatus::Recorded {
                    next.envelopes
                        .entry(envelope.name.clone())
                        .or_default()
                        .insert(*version, fields.clone());
                }
                entries.push(LockEntry {
                    envelope: envelope.name.clone(),
                    schema: *version,
                    status,
                });
            }
        }
        for (name, versions) in &self.envelopes {
            for version in versions.keys() {
                if wanted.schema(name, *version).is_none() {
                    entries.push(LockEntry {
                        envelope: name.clone(),
                        schema: *version,
                        status: if force {
                            LockStatus::Dropped
                        } else {
                            LockStatus::Kept
                        },
                    });
                }
            }
        }
        (next, entries)
    }
}

/// What `queuegen lock` did with one schema version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LockEntry {
    pub envelope: String,
    pub schema: u32,
    pub status: LockStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockStatus {
    /// Not in the lock before; recorded from the spec.
    Recorded,
    /// Already recorded; left as it was.
    Unchanged,
    /// Recorded differently before; replaced (`--force` only).
    Rewritten,
    /// Recorded, and no longer in the spec; kept, since its entries may remain.
    Kept,
    /// Recorded, and no longer in the spec; removed (`--force` only).
    Dropped,
}

impl LockStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LockStatus::Recorded => "recorded",
            LockStatus::Unchanged => "unchanged",
            LockStatus::Rewritten => "rewritten",
            LockStatus::Kept => "kept",
            LockStatus::Dropped => "dropped",
        }
    }
}

/// The lock file as written; turned into the model by [`Lock::parse`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    format: u32,
    #[serde(default)]
    envelopes: BTreeMap<String, BTreeMap<u32, Vec<LockedField>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockedField {
    name: String,
    #[serde(rename = "type")]
    ty: TypeName,
    #[serde(default)]
    values: Option<Vec<String>>,
    #[serde(default)]
    optional: bool,
    #[serde(default, deserialize_with = "scalar_text")]
    default: Option<String>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum TypeName {
    String,
    Bool,
    U32,
    U64,
    I32,
    I64,
    Timestamp,
    Enum,
}

impl TypeName {
    fn scalar(self) -> FieldType {
        match self {
            TypeName::String => FieldType::String,
            TypeName::Bool => FieldType::Bool,
            TypeName::U32 => FieldType::U32,
            TypeName::U64 => FieldType::U64,
            TypeName::I32 => FieldType::I32,
            TypeName::I64 => FieldType::I64,
            TypeName::Timestamp => FieldType::Timestamp,
            TypeName::Enum => unreachable!("enums carry their values"),
        }
    }
}

/// A default as text: the lock writes it quoted, but a hand-written `3` or
/// `false` reads as the same canonical text.
fn scalar_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a scalar default")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(Text)
}

/// The path of the first key that repeats an earlier key of its mapping.
fn first_duplicate(node: &Node, segs: &mut Vec<Seg>) -> Option<(Vec<Seg>, String)> {
    match node {
        Node::Map(pairs) => {
            let mut seen: Vec<String> = Vec::new();
            for (key, value) in pairs {
                let text = key.key_text();
                if seen.contains(&text) {
                    let mut at = segs.clone();
                    at.push(Seg::Key {
                        name: text.clone(),
                        occurrence: 1,
                    });
                    return Some((at, text));
                }
                segs.push(Seg::key(text.clone()));
                let found = first_duplicate(value, segs);
                segs.pop();
                if found.is_some() {
                    return found;
                }
                seen.push(text);
            }
            None
        }
        Node::Seq(items) => items.iter().enumerate().find_map(|(i, item)| {
            segs.push(Seg::Index(i));
            let found = first_duplicate(item, segs);
            segs.pop();
            found
        }),
        _ => None,
    }
}

/// serde_yaml_ng ends messages with " at line L column C"; the error shows
/// the position in front instead.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(start)
            if message[start + " at line ".len()..]
                .chars()
                .all(|c| c.is_ascii_digit() || c == ' ' || c.is_ascii_lowercase()) =>
        {
            message[..start].to_owned()
        }
        _ => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(source: &str) -> Spec {
        let checked = crate::check_str(source, "q.yaml");
        assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
        checked.spec.unwrap()
    }

    const OCR: &str = r#"
version: 1
service: s
envelopes:
  OcrRequested:
    schema: 3
    accepts: [2, 3]
    fields:
      subject_ref: { type: string, max_bytes: 200 }
      pages: { type: u32, optional: true }
      priority: { type: enum, values: [low, normal, "yes"], default: normal }
    changes:
      2:
        added: [pages]
        removed: { dpi: { type: u32 } }
      3:
        added: [priority]
        renamed: { document_ref: subject_ref }
queues:
  ocr: { envelope: OcrRequested }
"#;

    #[test]
    fn a_lock_of_the_spec_round_trips() {
        let lock = Lock::of_spec(&spec(OCR));
        let text = lock.to_yaml();
        assert!(text.starts_with("# Published schema versions"), "{text}");
        assert!(
            text.contains(
                "      - { name: priority, type: enum, values: [low, normal, \"yes\"], default: normal }\n"
            ),
            "{text}"
        );
        assert!(text.contains("    1:\n      - { name: document_ref, type: string, max_bytes: 200 }\n      - { name: dpi, type: u32 }\n"), "{text}");
        assert_eq!(Lock::parse(&text, "q.lock").unwrap(), lock);
        assert_eq!(
            Lock::default().to_yaml().lines().last(),
            Some("envelopes: {}")
        );
    }

    #[test]
    fn malformed_locks_name_the_file_and_position() {
        let err = Lock::parse(
            "format: 1\nenvelopes:\n  A:\n    1:\n      - { name: x, type: u33 }\n",
            "q.lock",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("q.lock:5:"), "{text}");
        assert!(text.contains("unknown variant `u33`"), "{text}");
        let err = Lock::parse("format: 2\n", "q.lock").unwrap_err();
        assert_eq!(
            err.to_string(),
            "q.lock:1:9: malformed lock file: lock format 2 is not supported: this queuegen reads format 1"
        );
        let err = Lock::parse(
            "format: 1\nenvelopes:\n  A:\n    1:\n      - { name: x, type: u32, values: [a] }\n",
            "q.lock",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "q.lock:5:31: malformed lock file: A schema 1: `values` on `x`, which is not an enum"
        );
        assert!(err
            .to_diagnostic()
            .unwrap()
            .to_string()
            .contains("help: restore it"));
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let err = Lock::parse(
            "format: 1\nenvelopes:\n  A:\n    1: []\n    1: []\n",
            "q.lock",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "q.lock:5:5: malformed lock file: duplicate key `1`"
        );
    }

    #[test]
    fn hand_written_defaults_read_as_text() {
        let lock = Lock::parse(
            "format: 1\nenvelopes:\n  A:\n    1:\n      - { name: x, type: u32, default: 3 }\n      - { name: y, type: bool, default: false }\n",
            "q.lock",
        )
        .unwrap();
        let fields = lock.schema("A", 1).unwrap();
        assert_eq!(fields[0].default.as_deref(), Some("3"));
        assert_eq!(fields[1].default.as_deref(), Some("false"));
    }

    #[test]
    fn updating_keeps_recorded_versions_unless_forced() {
        let ocr = spec(OCR);
        let mut lock = Lock::of_spec(&ocr);
        lock.envelopes.get_mut("OcrRequested").unwrap().remove(&3);
        lock.envelopes
            .get_mut("OcrRequested")
            .unwrap()
            .get_mut(&2)
            .unwrap()
            .pop();
        lock.envelopes
            .insert("Gone".into(), BTreeMap::from([(1, vec![])]));
        let (next, entries) = lock.updated(&ocr, false);
        let statuses: Vec<(&str, u32, LockStatus)> = entries
            .iter()
            .map(|e| (e.envelope.as_str(), e.schema, e.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("OcrRequested", 1, LockStatus::Unchanged),
                ("OcrRequested", 2, LockStatus::Unchanged),
                ("OcrRequested", 3, LockStatus::Recorded),
                ("Gone", 1, LockStatus::Kept),
            ]
        );
        assert_eq!(next.schema("OcrRequested", 2).unwrap().len(), 1);
        assert!(next.schema("Gone", 1).is_some());

        let (forced, entries) = lock.updated(&ocr, true);
        assert_eq!(forced, Lock::of_spec(&ocr));
        assert_eq!(entries[1].status, LockStatus::Rewritten);
        assert_eq!(entries[3].status, LockStatus::Dropped);
    }

    #[test]
    fn the_lock_sits_beside_the_spec() {
        assert_eq!(
            path_beside(Path::new("deploy/queues.yaml")),
            Path::new("deploy/queues.lock")
        );
    }
}
