//! A problem found in a spec: severity, position, dotted path, message and fix.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The spec is rejected; `queuegen check` exits 1.
    Error,
    /// Legal but risky; reported, and the spec is still accepted.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One finding, positioned at the offending key or value.
///
/// Rendered as `FILE:LINE:COL: error: PATH: MESSAGE` and, on the next line,
/// `  help: FIX`; serialized as a flat JSON object with the same parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// The file name as given to the checker.
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters as counted by the YAML parser.
    pub column: usize,
    /// Dotted path of the key concerned, e.g. `queues.ocr.claim.min_idle`
    /// (list items as `partition_by[1]`); empty for the whole document.
    pub path: String,
    /// What is wrong, without the path.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: ",
            self.file, self.line, self.column, self.severity
        )?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Sorts by position; diagnostics at the same place keep the order in which
/// they were found.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| (d.line, d.column));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            file: "queues.yaml".into(),
            line: 12,
            column: 15,
            path: "queues.ocr.claim.min_idle".into(),
            message: "60s is too short".into(),
            help: Some("set it to at least 75s".into()),
        }
    }

    #[test]
    fn renders_like_a_compiler() {
        assert_eq!(
            sample().to_string(),
            "queues.yaml:12:15: error: queues.ocr.claim.min_idle: 60s is too short\n  help: set it to at least 75s"
        );
        let bare = Diagnostic {
            severity: Severity::Warning,
            path: String::new(),
            help: None,
            ..sample()
        };
        assert_eq!(
            bare.to_string(),
            "queues.yaml:12:15: warning: 60s is too short"
        );
    }

    #[test]
    fn serializes_flat() {
        let json = serde_json::to_value(sample()).unwrap();
        assert_eq!(json["severity"], "error");
        assert_eq!(json["line"], 12);
        assert_eq!(json["path"], "queues.ocr.claim.min_idle");
        assert_eq!(json["help"], "set it to at least 75s");
    }

    #[test]
    fn sorts_by_position_stably() {
        let mut list = vec![
            Diagnostic {
                line: 3,
                column: 1,
                message: "b".into(),
                ..sample()
            },
            Diagnostic {
                line: 1,
                column: 9,
                message: "a".into(),
                ..sample()
            },
            Diagnostic {
                line: 3,
                column: 1,
                message: "c".into(),
                ..sample()
            },
        ];
        sort(&mut list);
        let order: Vec<_> = list.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
    }
}
