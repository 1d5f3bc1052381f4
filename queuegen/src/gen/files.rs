//! Writing generated files only when they changed, and `--check` drift detection.

use std::fs;
use std::path::{Path, PathBuf};

use super::{CommentSyntax, GeneratedFile, GENERATED_MARKER};
use crate::error::{Error, Result};

/// What `write` did to each file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteReport {
    pub written: Vec<PathBuf>,
    pub unchanged: Vec<PathBuf>,
}

/// Writes each file under `out_dir`, skipping files whose content is already
/// identical (so build tools and editors see no spurious change).
pub fn write(out_dir: &Path, files: &[GeneratedFile]) -> Result<WriteReport> {
    let mut report = WriteReport::default();
    for file in files {
        let path = out_dir.join(&file.path);
        if read_if_exists(&path)?.as_deref() == Some(file.contents.as_str()) {
            report.unchanged.push(file.path.clone());
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        fs::write(&path, &file.contents).map_err(|e| Error::io(&path, e))?;
        report.written.push(file.path.clone());
    }
    Ok(report)
}

/// How the files on disk differ from what the spec generates.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drift {
    /// Generated, present, but with other content (edited by hand or stale generator).
    pub differ: Vec<PathBuf>,
    /// Generated but absent.
    pub missing: Vec<PathBuf>,
    /// Present, marked as generated, but no longer produced by the spec.
    pub stale: Vec<PathBuf>,
}

impl Drift {
    pub fn is_clean(&self) -> bool {
        self.differ.is_empty() && self.missing.is_empty() && self.stale.is_empty()
    }
}

/// Compares `out_dir` with `files` without writing anything.
pub fn check(out_dir: &Path, files: &[GeneratedFile]) -> Result<Drift> {
    let mut drift = Drift::default();
    for file in files {
        match read_if_exists(&out_dir.join(&file.path))? {
            None => drift.missing.push(file.path.clone()),
            Some(current) if current != file.contents => drift.differ.push(file.path.clone()),
            Some(_) => {}
        }
    }
    for path in marked_generated(out_dir)? {
        if !files.iter().any(|f| f.path == path) {
            drift.stale.push(path);
        }
    }
    Ok(drift)
}

/// Files under `dir` (relative paths, sorted) whose header carries the generated marker.
fn marked_generated(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    if dir.is_dir() {
        collect_marked(dir, dir, &mut found)?;
    }
    found.sort();
    Ok(found)
}

fn collect_marked(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            collect_marked(root, &path, found)?;
        } else if has_marker(&path)? {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            found.push(relative);
        }
    }
    Ok(())
}

/// Whether one of the first two lines is the generated marker as a comment
/// in any syntax we generate: Rust files carry it on line 1, Lua libraries on
/// line 2 (line 1 is `#!lua name=...`), YAML, conf, SQL and Markdown on line 1.
fn has_marker(path: &Path) -> Result<bool> {
    use std::io::{BufRead, BufReader};
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::new(file);
    let marker_text = GENERATED_MARKER
        .strip_prefix("//")
        .expect("the marker is a // comment");
    for _ in 0..2 {
        let mut line = String::new();
        // Binary or non-UTF-8 files are not ours.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return Ok(false),
            Ok(_) => {}
        }
        let marked = CommentSyntax::ALL.iter().any(|syntax| {
            syntax
                .uncomment(&line)
                .is_some_and(|rest| rest.starts_with(marker_text))
        });
        if marked {
            return Ok(true);
        }
    }
    Ok(false)
}

fn read_if_exists(path: &Path) -> Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(contents) => Ok(Some(contents)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// `to` expressed relative to the directory `from` (both made absolute first),
/// e.g. the spec as seen from the output directory: `../../queues.yaml`.
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let absolute = |p: &Path| {
        std::path::absolute(p)
            .map(|p| normalize(&p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let (from, to) = (absolute(from), absolute(to));
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = PathBuf::new();
    for _ in from.components().skip(common) {
        relative.push("..");
    }
    for part in to.components().skip(common) {
        relative.push(part);
    }
    relative
}

/// Resolves `.` and `..` lexically (the output dir may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, contents: &str) -> GeneratedFile {
        GeneratedFile {
            path: path.into(),
            contents: contents.into(),
        }
    }

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_path(Path::new("/a/b/src/queues"), Path::new("/a/b/queues.yaml")),
            PathBuf::from("../../queues.yaml")
        );
        assert_eq!(
            relative_path(Path::new("/a/./b"), Path::new("/a/b/../c/q.yaml")),
            PathBuf::from("../c/q.yaml")
        );
    }

    #[test]
    fn writes_only_changed_files_and_detects_drift() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("{GENERATED_MARKER} x\n");
        let files = vec![
            file("mod.rs", &format!("{marker}pub mod a;\n")),
            file("a.rs", &format!("{marker}fn a() {{}}\n")),
        ];
        let first = write(dir.path(), &files).unwrap();
        assert_eq!(first.written.len(), 2);
        let second = write(dir.path(), &files).unwrap();
        assert_eq!(second.unchanged.len(), 2);
        assert!(check(dir.path(), &files).unwrap().is_clean());

        fs::write(dir.path().join("a.rs"), "edited").unwrap();
        fs::write(dir.path().join("old.rs"), format!("{marker}old\n")).unwrap();
        fs::write(dir.path().join("handwritten.rs"), "fn mine() {}\n").unwrap();
        fs::remove_file(dir.path().join("mod.rs")).unwrap();
        let drift = check(dir.path(), &files).unwrap();
        assert_eq!(drift.differ, vec![PathBuf::from("a.rs")]);
        assert_eq!(drift.missing, vec![PathBuf::from("mod.rs")]);
        assert_eq!(drift.stale, vec![PathBuf::from("old.rs")]);
    }

    #[test]
    fn yaml_conf_and_markdown_files_are_recognised_by_their_own_comment_header() {
        let dir = tempfile::tempdir().unwrap();
        for (name, syntax) in [
            ("rules.yml", CommentSyntax::Hash),
            ("queue.conf", CommentSyntax::Hash),
            ("RUNBOOK.md", CommentSyntax::Html),
        ] {
            let header = crate::gen::header_in(syntax, "q.yaml");
            fs::write(dir.path().join(name), format!("{header}body\n")).unwrap();
        }
        fs::write(dir.path().join("notes.md"), "<!-- mine -->\n").unwrap();
        fs::write(dir.path().join("mine.yml"), "# mine\nkey: 1\n").unwrap();
        let drift = check(dir.path(), &[]).unwrap();
        let stale: Vec<_> = ["RUNBOOK.md", "queue.conf", "rules.yml"]
            .map(PathBuf::from)
            .to_vec();
        assert_eq!(drift.stale, stale);
    }

    #[test]
    fn lua_libraries_are_recognised_by_the_marker_on_their_second_line() {
        let dir = tempfile::tempdir().unwrap();
        let lua_marker = GENERATED_MARKER.replacen("//", "--", 1);
        let generated =
            format!("#!lua name=qg_x_v1\n{lua_marker} 0.1.0 from q.yaml. DO NOT EDIT.\n");
        fs::write(dir.path().join("old.lua"), &generated).unwrap();
        fs::write(
            dir.path().join("mine.lua"),
            "#!lua name=mine\n-- hand-written\n",
        )
        .unwrap();
        // The marker only counts in the header, not further down.
        fs::write(
            dir.path().join("late.lua"),
            format!("#!lua name=late\n-- mine\n{lua_marker}\n"),
        )
        .unwrap();
        fs::write(dir.path().join("one-line.rs"), "fn main() {}").unwrap();
        fs::write(dir.path().join("binary.bin"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
        let drift = check(dir.path(), &[]).unwrap();
        assert_eq!(drift.stale, vec![PathBuf::from("old.lua")]);

        let files = vec![file("old.lua", &generated)];
        assert!(check(dir.path(), &files).unwrap().is_clean());
    }
}
