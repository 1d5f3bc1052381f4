//! Schema evolution: the older versions of an envelope, reconstructed from its declared changes.
//!
//! The spec describes only the current schema in `fields`; each
//! `changes.N` says how version N differs from N - 1. Walking the changes
//! down from the current schema gives every older version's fields, which
//! the generator turns into one struct per version and a conversion per
//! step, and which `lock` and `diff` compare with what was published.

use crate::model::{Envelope, Field, SchemaChange};

/// One body field of an older (or the current) schema version.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionField {
    /// The field as that version defines it, under that version's name.
    pub field: Field,
    /// Its name in the current schema; `None` if a later version removed it.
    pub current: Option<String>,
}

/// Where a field of one version comes from in the version before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldSource {
    /// The previous version has it, under this name.
    Carried { previous: String },
    /// New in this version: it takes its default, or `None` when optional.
    Added,
}

impl Envelope {
    /// The declared change that produced `version`, if any.
    pub fn change(&self, version: u32) -> Option<&SchemaChange> {
        self.changes.iter().find(|c| c.version == version)
    }

    /// The body fields of schema `version` (1..=schema): the current fields
    /// that version had, in the current order and under their names then,
    /// followed by fields removed since, oldest removal last.
    pub fn fields_of(&self, version: u32) -> Vec<VersionField> {
        assert!(
            (1..=self.schema).contains(&version),
            "{} has schema versions 1..={}, not {version}",
            self.name,
            self.schema
        );
        let mut fields: Vec<VersionField> = self
            .fields
            .iter()
            .map(|field| VersionField {
                field: field.clone(),
                current: Some(field.name.clone()),
            })
            .collect();
        for newer in (version + 1..=self.schema).rev() {
            let Some(change) = self.change(newer) else {
                continue;
            };
            fields.retain(|f| !change.added.contains(&f.field.name));
            for rename in &change.renamed {
                if let Some(f) = fields.iter_mut().find(|f| f.field.name == rename.to) {
                    f.field.name.clone_from(&rename.from);
                }
            }
            fields.extend(change.removed.iter().map(|field| VersionField {
                field: field.clone(),
                current: None,
            }));
        }
        fields
    }

    /// The keys, from the spec's root, where `field` of `version` is
    /// defined: the current field it became, or the `removed` entry of the
    /// change that dropped it (`changes` when none says).
    pub fn keys_of(&self, version: u32, field: &VersionField) -> Vec<String> {
        let mut keys = vec!["envelopes".to_owned(), self.name.clone()];
        if let Some(current) = &field.current {
            keys.extend(["fields".to_owned(), current.clone()]);
            return keys;
        }
        keys.push("changes".to_owned());
        let name = &field.field.name;
        let dropped_by = self
            .changes
            .iter()
            .find(|c| c.version > version && c.removed.iter().any(|f| f.name == *name));
        if let Some(change) = dropped_by {
            keys.extend([
                change.version.to_string(),
                "removed".to_owned(),
                name.clone(),
            ]);
        }
        keys
    }

    /// How each field of `version` (2..=schema) is filled from an entry of
    /// `version - 1`, in the order of [`Envelope::fields_of`].
    pub fn step(&self, version: u32) -> Vec<(Field, FieldSource)> {
        assert!(version >= 2, "schema 1 has no previous version");
        let change = self.change(version);
        self.fields_of(version)
            .into_iter()
            .map(|vf| {
                let name = &vf.field.name;
                let renamed = change.and_then(|c| c.renamed.iter().find(|r| r.to == *name));
                let source = match change {
                    Some(c) if c.added.contains(name) => FieldSource::Added,
                    _ => FieldSource::Carried {
                        previous: renamed.map_or(name, |r| &r.from).clone(),
                    },
                };
                (vf.field, source)
            })
            .collect()
    }

    /// The accepted versions older than the current schema, oldest first:
    /// the ones workers decode through upcasts.
    pub fn older_accepted(&self) -> Vec<u32> {
        let mut older: Vec<u32> = self
            .accepts
            .iter()
            .copied()
            .filter(|v| *v < self.schema)
            .collect();
        older.sort_unstable();
        older
    }

    /// The oldest accepted version, which the upcast chain starts from.
    pub fn oldest_accepted(&self) -> u32 {
        self.accepts.iter().copied().min().unwrap_or(self.schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ocr() -> Envelope {
        let source = r#"
version: 1
service: s
envelopes:
  OcrRequested:
    schema: 3
    accepts: [1, 2, 3]
    fields:
      subject_ref: { type: string, max_bytes: 200 }
      pages: { type: u32, optional: true }
      language: { type: string, max_bytes: 8, default: en }
    changes:
      2:
        added: [pages]
        removed: { dpi: { type: u32 } }
      3:
        added: [language]
        renamed: { document_ref: subject_ref }
queues:
  ocr: { envelope: OcrRequested }
"#;
        let checked = crate::check_str(source, "q.yaml");
        assert!(!checked.has_errors(), "{:#?}", checked.diagnostics);
        checked.spec.unwrap().envelopes.remove(0)
    }

    fn names(fields: &[VersionField]) -> Vec<(&str, Option<&str>)> {
        fields
            .iter()
            .map(|f| (f.field.name.as_str(), f.current.as_deref()))
            .collect()
    }

    #[test]
    fn older_versions_are_rebuilt_from_the_changes() {
        let envelope = ocr();
        assert_eq!(
            names(&envelope.fields_of(3)),
            [
                ("subject_ref", Some("subject_ref")),
                ("pages", Some("pages")),
                ("language", Some("language"))
            ]
        );
        assert_eq!(
            names(&envelope.fields_of(2)),
            [
                ("document_ref", Some("subject_ref")),
                ("pages", Some("pages"))
            ]
        );
        assert_eq!(
            names(&envelope.fields_of(1)),
            [("document_ref", Some("subject_ref")), ("dpi", None)]
        );
        let dpi = &envelope.fields_of(1)[1].field;
        assert_eq!(dpi.ty, crate::model::FieldType::U32);
    }

    #[test]
    fn a_step_says_where_each_field_comes_from() {
        let envelope = ocr();
        let step: Vec<(String, FieldSource)> = envelope
            .step(3)
            .into_iter()
            .map(|(f, s)| (f.name, s))
            .collect();
        assert_eq!(
            step,
            [
                (
                    "subject_ref".to_owned(),
                    FieldSource::Carried {
                        previous: "document_ref".into()
                    }
                ),
                (
                    "pages".to_owned(),
                    FieldSource::Carried {
                        previous: "pages".into()
                    }
                ),
                ("language".to_owned(), FieldSource::Added),
            ]
        );
        let step2: Vec<FieldSource> = envelope.step(2).into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            step2,
            [
                FieldSource::Carried {
                    previous: "document_ref".into()
                },
                FieldSource::Added
            ]
        );
    }
}
