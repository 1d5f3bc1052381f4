//! The runbook's command lines as an operator runs them: the `queuegen` lines of its `sh` blocks, word for word, with the Redis URL of the user the runbook names for them and its `<placeholders>` filled in.

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
        self.words
            .iter()
            .map(|word| {
                let mut word = word.clone();
                while let Some(start) = word.find('<') {
                    let end = start + word[start..].find('>').ok_or("an unclosed <")?;
                    let name = &word[start + 1..end];
                    let value = values
                        .get(name)
                        .ok_or_else(|| format!("no value for <{name}>"))?;
                    word.replace_range(start..=end, value);
                }
                Ok(word)
            })
            .collect()
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
