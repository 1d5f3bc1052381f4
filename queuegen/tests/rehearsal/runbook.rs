//! The runbook's command lines as an operator runs them: the `queuegen` and `psql` lines of its `sh` blocks, word for word, with the Redis URL of the user the runbook names for them and its `<placeholders>` filled in; a line of any other program (but `kubectl`, which needs a Kubernetes API) fails the rehearsal.

use std::collections::BTreeMap;
use std::path::Path;

/// A `queuegen` command line of a `sh` block.
#[derive(Debug, Clone)]
pub struct Line {
    /// The line as written.
    pub text: String,
    /// The user of the `REDIS_URL=redis://USER:...` it is prefixed with, if any.
    pub user: Option<String>,
    /// Its words after any prefix: `queuegen ...`.
    pub words: Vec<String>,
}

impl Line {
    /// The value of option `--name`, if given.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.words
            .iter()
            .position(|word| word == name)
            .and_then(|at| self.words.get(at + 1))
            .map(String::as_str)
    }

    /// Its words with each `<placeholder>` replaced from `values`; `None`
    /// when one has no value.
    pub fn filled(&self, values: &BTreeMap<&str, String>) -> Result<Vec<String>, String> {
        self.words.iter().map(|word| fill(word, values)).collect()
    }
}

/// The runbook: its `sh` blocks' lines.
pub struct Runbook {
    pub lines: Vec<String>,
}

impl Runbook {
    pub fn read(path: &Path) -> Runbook {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = Vec::new();
        let mut in_sh = false;
        for line in text.lines() {
            match line.trim() {
                "```sh" => in_sh = true,
                "```" => in_sh = false,
                code if in_sh && !code.is_empty() => lines.push(code.to_owned()),
                _ => {}
            }
        }
        Runbook { lines }
    }

    /// The user of the runbook's `export REDIS_URL=...` line, which every
    /// command without its own URL reads.
    pub fn exported_user(&self) -> Result<String, String> {
        let export = self
            .lines
            .iter()
            .find_map(|line| line.strip_prefix("export REDIS_URL="))
            .ok_or("the runbook exports no REDIS_URL")?;
        user_of(export).ok_or_else(|| {
            format!(
                "the runbook's `export REDIS_URL={export}` names no user: under the generated \
                 users file (default user off) every command it runs fails NOAUTH"
            )
        })
    }

    /// Every `queuegen` line, in the runbook's order.
    pub fn queuegen_lines(&self) -> Vec<Line> {
        self.lines
            .iter()
            .filter_map(|text| {
                let mut words = split(text);
                let mut user = None;
                if let Some(url) = words.first().and_then(|w| w.strip_prefix("REDIS_URL=")) {
                    user = user_of(url);
                    words.remove(0);
                }
                (words.first().map(String::as_str) == Some("queuegen")).then(|| Line {
                    text: text.clone(),
                    user,
                    words,
                })
            })
            .collect()
    }
}

/// How the rehearsal treats a runbook line, by its program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `export NAME=...`: the environment the other lines run in.
    Export,
    /// `[REDIS_URL=...] queuegen ...`: run as the user it names.
    Queuegen,
    /// `psql "$DATABASE_URL" ...`: run through `sh` against the stage's database.
    Psql,
    /// `kubectl ...`: not run (the rehearsal has no Kubernetes API server);
    /// the manifests they apply are run by the stage's own cluster.
    Kubectl,
    /// Anything else (`redis-cli`, say): a command the rehearsal cannot
    /// prove runs as a role, so the runbook must not have it.
    Other(String),
}

/// The kind of a line of a `sh` block.
pub fn kind(line: &str) -> Kind {
    let words = split(line);
    let program = words
        .iter()
        .find(|word| !word.contains('=') || word.starts_with('-'))
        .map(String::as_str)
        .unwrap_or_default();
    match (words.first().map(String::as_str), program) {
        (Some("export"), _) => Kind::Export,
        (_, "queuegen") => Kind::Queuegen,
        (_, "psql") => Kind::Psql,
        (_, "kubectl") => Kind::Kubectl,
        (_, other) => Kind::Other(other.to_owned()),
    }
}

impl Runbook {
    /// Every line of `kind`, in the runbook's order.
    pub fn lines_of(&self, wanted: &Kind) -> Vec<String> {
        self.lines
            .iter()
            .filter(|line| kind(line) == *wanted)
            .cloned()
            .collect()
    }

    /// The lines of programs the rehearsal does not know how to run as a role.
    pub fn unrunnable(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|line| matches!(kind(line), Kind::Other(_)))
            .cloned()
            .collect()
    }
}

/// `line` with each `<placeholder>` replaced from `values`.
pub fn fill(line: &str, values: &BTreeMap<&str, String>) -> Result<String, String> {
    let mut line = line.to_owned();
    while let Some(start) = line.find('<') {
        let end = start + line[start..].find('>').ok_or("an unclosed <")?;
        let name = &line[start + 1..end];
        let value = values
            .get(name)
            .ok_or_else(|| format!("no value for <{name}>"))?;
        line.replace_range(start..=end, value);
    }
    Ok(line)
}

/// The user of `redis://USER:PASSWORD@HOST:PORT`.
fn user_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("redis://")
        .or(url.strip_prefix("rediss://"))?;
    let (credentials, _) = rest.split_once('@')?;
    let user = credentials.split(':').next()?;
    (!user.is_empty()).then(|| user.to_owned())
}

/// Shell words: whitespace-separated, '...' and "..." quoted.
fn split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}
