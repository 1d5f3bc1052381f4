//! Walking the YAML tree with paths: strict mappings (unknown, duplicate and
//! missing keys) and a context that turns problems into positioned diagnostics.

use crate::diagnostic::{Diagnostic, Severity};
use crate::suggest;
use crate::yaml::{locate, Node, Pos, Seg, Target};

use super::format::{Obj, Prop, Ty};
use super::values;

/// Collects diagnostics and resolves their positions in the source.
pub(crate) struct Ctx<'s> {
    source: &'s str,
    file: &'s str,
    diagnostics: Vec<Diagnostic>,
}

impl<'s> Ctx<'s> {
    pub fn new(source: &'s str, file: &'s str) -> Self {
        Ctx {
            source,
            file,
            diagnostics: Vec::new(),
        }
    }

    /// Where `at` is in the source. A node that cannot be found (it should
    /// not happen) falls back to its nearest ancestor, then to 1:1.
    pub fn position(&self, at: &At) -> Pos {
        let mut segs: &[Seg] = &at.segs;
        let mut target = at.target;
        loop {
            if let Some(pos) = locate(self.source, segs, target) {
                return pos;
            }
            match segs.split_last() {
                Some((_, parent)) => {
                    segs = parent;
                    target = Target::Key;
                }
                None => return Pos { line: 1, column: 1 },
            }
        }
    }

    pub fn error(&mut self, at: &At, message: impl Into<String>, help: impl Into<String>) {
        self.report(Severity::Error, at, message.into(), Some(help.into()));
    }

    pub fn warning(&mut self, at: &At, message: impl Into<String>, help: impl Into<String>) {
        self.report(Severity::Warning, at, message.into(), Some(help.into()));
    }

    /// Reports an error and reads nothing, for `return ctx.refuse(...)`.
    pub fn refuse<T>(
        &mut self,
        at: &At,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Option<T> {
        self.error(at, message, help);
        None
    }

    /// Reports an error and answers false, for the checks that say whether
    /// all was well: `ok = ctx.fail(...)`, `return ctx.fail(...)`.
    pub fn fail(&mut self, at: &At, message: impl Into<String>, help: impl Into<String>) -> bool {
        self.error(at, message, help);
        false
    }

    fn report(&mut self, severity: Severity, at: &At, message: String, help: Option<String>) {
        let pos = self.position(at);
        self.push_at(severity, pos, at.path.clone(), message, help);
    }

    /// A diagnostic at a known position (syntax errors).
    pub fn push_at(
        &mut self,
        severity: Severity,
        pos: Pos,
        path: String,
        message: String,
        help: Option<String>,
    ) {
        self.diagnostics.push(Diagnostic {
            severity,
            file: self.file.to_owned(),
            line: pos.line,
            column: pos.column,
            path,
            message,
            help,
        });
    }

    /// Line `line` (1-based) of the source.
    pub fn source_line(&self, line: usize) -> Option<&str> {
        self.source.lines().nth(line.checked_sub(1)?)
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// A diagnostic about the key (or value) at `keys` from the document
    /// root, for checks that run on the model after reading (the lock file).
    /// An absent key is reported at its nearest enclosing key.
    pub fn report_at_keys(
        &mut self,
        severity: Severity,
        keys: &[impl AsRef<str>],
        target: Target,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        let at = At {
            segs: keys.iter().map(|k| Seg::key(k.as_ref())).collect(),
            target,
            path: keys
                .iter()
                .fold(String::new(), |path, key| join(&path, key.as_ref())),
        };
        self.report(severity, &at, message.into(), Some(help.into()));
    }

    pub fn finish(self) -> Vec<Diagnostic> {
        let mut diagnostics = self.diagnostics;
        crate::diagnostic::sort(&mut diagnostics);
        diagnostics
    }
}

/// A place a diagnostic points at, with the dotted path it is about. The
/// path may name a key that is absent (a default) while the place is the
/// nearest key that exists.
#[derive(Debug, Clone)]
pub(crate) struct At {
    segs: Vec<Seg>,
    target: Target,
    pub path: String,
}

/// A node of the document with its path from the root.
#[derive(Debug, Clone)]
pub(crate) struct Item<'a> {
    pub node: &'a Node,
    segs: Vec<Seg>,
    pub path: String,
}

/// `queues` + `ocr` -> `queues.ocr`. A key that is empty or contains a dot
/// or whitespace is quoted, so the path stays unambiguous.
pub(crate) fn join(path: &str, key: &str) -> String {
    let key = if key.is_empty() || key.contains(|c: char| c == '.' || c.is_whitespace()) {
        format!("{key:?}")
    } else {
        key.to_owned()
    };
    if path.is_empty() {
        key
    } else {
        format!("{path}.{key}")
    }
}

impl<'a> Item<'a> {
    pub fn root(node: &'a Node) -> Self {
        Item {
            node,
            segs: Vec::new(),
            path: String::new(),
        }
    }

    pub fn entry(&self, key: &str, occurrence: usize, node: &'a Node) -> Item<'a> {
        let mut segs = self.segs.clone();
        segs.push(Seg::Key {
            name: key.to_owned(),
            occurrence,
        });
        Item {
            node,
            segs,
            path: join(&self.path, key),
        }
    }

    pub fn index(&self, index: usize, node: &'a Node) -> Item<'a> {
        let mut segs = self.segs.clone();
        segs.push(Seg::Index(index));
        Item {
            node,
            segs,
            path: format!("{}[{index}]", self.path),
        }
    }

    /// The entry's key; for list items and the root, the node itself.
    pub fn key(&self) -> At {
        let target = match self.segs.last() {
            Some(Seg::Key { .. }) => Target::Key,
            _ => Target::Value,
        };
        At {
            segs: self.segs.clone(),
            target,
            path: self.path.clone(),
        }
    }

    pub fn value(&self) -> At {
        At {
            segs: self.segs.clone(),
            target: Target::Value,
            path: self.path.clone(),
        }
    }
}

/// The entries of a mapping in source order, first occurrences only; reports
/// a non-mapping and every duplicate key (at the duplicate, naming the line
/// of the first).
pub(crate) fn entries<'a>(
    ctx: &mut Ctx<'_>,
    item: &Item<'a>,
    expected: &str,
    help: &str,
) -> Option<Vec<(String, Item<'a>)>> {
    let Node::Map(pairs) = item.node else {
        return ctx.refuse(
            &item.value(),
            format!("expected {expected}, found {}", item.node.kind()),
            help,
        );
    };
    let mut out: Vec<(String, Item<'a>)> = Vec::with_capacity(pairs.len());
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (key, value) in pairs {
        let text = key.key_text();
        let count = match seen.iter_mut().find(|(k, _)| *k == text) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                seen.push((text.clone(), 1));
                0
            }
        };
        let child = item.entry(&text, count, value);
        if matches!(key, Node::Seq(_) | Node::Map(_)) {
            ctx.error(
                &item.value(),
                "complex mapping keys are not supported",
                "use plain names as keys",
            );
            continue;
        }
        if count > 0 {
            let first = out
                .iter()
                .find(|(k, _)| *k == text)
                .map(|(_, first)| ctx.position(&first.key()));
            let here = ctx.position(&child.key());
            let first = first.map_or(String::new(), |first| {
                format!(" (first on {})", first_at(first, here))
            });
            ctx.error(
                &child.key(),
                format!("duplicate key `{text}`{first}"),
                "remove one of them: a key may appear only once in a mapping",
            );
            continue;
        }
        out.push((text, child));
    }
    Some(out)
}

/// The entries of an optional top-level mapping of named entries
/// (`schedules`, `pipelines`): none when the key is absent or empty.
pub(crate) fn optional_entries<'a>(
    ctx: &mut Ctx<'_>,
    spec: &Object<'a>,
    key: &str,
    expected: &str,
    help: &str,
) -> Option<Vec<(String, Item<'a>)>> {
    match spec.get(key).filter(|it| !matches!(it.node, Node::Null)) {
        None => Some(Vec::new()),
        Some(item) => entries(ctx, item, expected, help),
    }
}

/// "line 12" for where `first` is, with the column when `here` is on the same line.
pub(crate) fn first_at(first: Pos, here: Pos) -> String {
    if first.line == here.line {
        format!("line {}, column {}", first.line, first.column)
    } else {
        format!("line {}", first.line)
    }
}

/// A mapping with the fixed keys of `obj`. An absent one (its key left out)
/// reads as empty, so every value takes its default.
pub(crate) struct Object<'a> {
    obj: &'static Obj,
    path: String,
    anchor: At,
    entries: Vec<(&'static str, Item<'a>)>,
    /// Not a mapping: every read is `Bad`, so checks that need it are skipped.
    broken: bool,
}

/// Result of reading one key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Read<T> {
    Absent,
    /// Present but invalid (already reported).
    Bad,
    Ok(T),
}

impl<T> Read<T> {
    /// The value, the default when absent, or `None` when invalid.
    pub fn or(self, default: T) -> Option<T> {
        match self {
            Read::Absent => Some(default),
            Read::Bad => None,
            Read::Ok(value) => Some(value),
        }
    }

    /// `Some(None)` when absent, `None` when invalid.
    pub fn optional(self) -> Option<Option<T>> {
        match self {
            Read::Absent => Some(None),
            Read::Bad => None,
            Read::Ok(value) => Some(Some(value)),
        }
    }

    pub fn is_present(&self) -> bool {
        !matches!(self, Read::Absent)
    }
}

pub(crate) fn object<'a>(ctx: &mut Ctx<'_>, item: &Item<'a>, obj: &'static Obj) -> Object<'a> {
    let mut object = Object {
        obj,
        path: item.path.clone(),
        anchor: item.key(),
        entries: Vec::new(),
        broken: false,
    };
    let keys: Vec<String> = obj.keys().map(|k| format!("`{k}`")).collect();
    let help = format!("write a mapping with the keys {}", keys.join(", "));
    let Some(found) = entries(ctx, item, "a mapping", &help) else {
        object.broken = true;
        return object;
    };
    for (key, child) in found {
        match obj.prop(&key) {
            Some(prop) => object.entries.push((prop.key, child)),
            None => {
                let help = if key == "<<" {
                    "YAML merge keys are not supported; write each setting out".to_owned()
                } else {
                    suggest::help(&key, obj.keys(), "valid keys here are")
                };
                ctx.error(&child.key(), "unknown key", help);
            }
        }
    }
    for prop in obj.props.iter().filter(|p| p.required) {
        if object.get(prop.key).is_none() {
            ctx.error(
                &object.anchor.clone().about(join(&object.path, prop.key)),
                format!("missing required key `{}`", prop.key),
                format!(
                    "add `{}:` — {}",
                    prop.key,
                    lower_first(prop.doc.trim_end_matches('.'))
                ),
            );
        }
    }
    object
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl At {
    /// The same place, about another path.
    pub fn about(mut self, path: String) -> At {
        self.path = path;
        self
    }
}

impl<'a> Object<'a> {
    /// The sub-mapping at `key`; empty (all defaults) when absent.
    pub fn child(&self, ctx: &mut Ctx<'_>, key: &str, obj: &'static Obj) -> Object<'a> {
        match self.get(key) {
            Some(item) => object(ctx, item, obj),
            None => Object {
                obj,
                path: join(&self.path, key),
                anchor: self.anchor.clone(),
                entries: Vec::new(),
                broken: self.broken,
            },
        }
    }

    pub fn get(&self, key: &str) -> Option<&Item<'a>> {
        debug_assert!(
            self.obj.prop(key).is_some(),
            "`{key}` is not a key of {} in spec::v1::format",
            self.obj.name
        );
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, item)| item)
    }

    /// Reads `key` with `parse`, which reports its own problems.
    pub fn read<T>(
        &self,
        ctx: &mut Ctx<'_>,
        key: &str,
        parse: impl FnOnce(&mut Ctx<'_>, &Item<'a>) -> Option<T>,
    ) -> Read<T> {
        if self.broken {
            return Read::Bad;
        }
        match self.get(key) {
            None => Read::Absent,
            Some(item) => parse(ctx, item).map_or(Read::Bad, Read::Ok),
        }
    }

    /// Reads the whole number at `key` within the bounds its entry in
    /// `format` gives; `why` explains them in the help.
    pub fn count(&self, ctx: &mut Ctx<'_>, key: &str, why: &str) -> Read<u64> {
        let Ty::Int { min, max } = self.prop(key).ty else {
            panic!("`{key}` of {} is not a whole number", self.obj.name)
        };
        self.read(ctx, key, |ctx, it| values::count(ctx, it, min, max, why))
    }

    /// Reads `key`, one of the choices its entry in `format` lists, as the
    /// item of `meanings` in the same place; `what` names it in messages.
    pub fn choice<T: Copy>(
        &self,
        ctx: &mut Ctx<'_>,
        key: &str,
        what: &str,
        meanings: &[T],
    ) -> Read<T> {
        let Ty::Choice(options) = self.prop(key).ty else {
            panic!("`{key}` of {} is not a choice", self.obj.name)
        };
        assert_eq!(options.len(), meanings.len(), "the meanings of `{key}`");
        self.read(ctx, key, |ctx, it| {
            let chosen = values::choice(ctx, it, options, what)?;
            options
                .iter()
                .position(|o| *o == chosen)
                .map(|i| meanings[i])
        })
    }

    fn prop(&self, key: &str) -> &'static Prop {
        self.obj
            .prop(key)
            .unwrap_or_else(|| panic!("`{key}` is not a key of {}", self.obj.name))
    }

    /// Where a problem with `key` is reported: its value when present,
    /// otherwise the nearest enclosing key that exists.
    pub fn at(&self, key: &str) -> At {
        match self.get(key) {
            Some(item) => item.value(),
            None => self.anchor.clone().about(join(&self.path, key)),
        }
    }

    /// Where a problem with the mapping as a whole is reported.
    pub fn anchor(&self) -> At {
        self.anchor.clone().about(self.path.clone())
    }
}
