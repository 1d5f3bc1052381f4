//! Plain-text tables, short ages and terminal colours for the operator views
//! (`status`, `pending`): colour only when stdout is a terminal and
//! `NO_COLOR` is not set, so piped output stays plain text.

use std::io::IsTerminal;

pub use queuegen::spec::units::short_duration;

/// How a cell is painted on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Plain,
    /// An alert firing, a library missing, an entry lost.
    Red,
    /// Something to look at: n/a lag, an overdue retry.
    Yellow,
    Green,
    Bold,
}

/// Whether to emit ANSI colours.
#[derive(Debug, Clone, Copy)]
pub struct Colours {
    enabled: bool,
}

impl Colours {
    /// Colours when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Colours {
        Colours {
            enabled: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    pub fn paint(self, text: &str, paint: Paint) -> String {
        let code = match paint {
            Paint::Plain => return text.to_owned(),
            Paint::Red => "31",
            Paint::Yellow => "33",
            Paint::Green => "32",
            Paint::Bold => "1",
        };
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// A table of left-aligned columns separated by two spaces.
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<(String, Paint)>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of cells, each with its paint.
    pub fn row(&mut self, cells: Vec<(String, Paint)>) {
        self.rows.push(cells);
    }

    /// Adds a row of unpainted cells.
    pub fn plain_row(&mut self, cells: Vec<String>) {
        self.row(cells.into_iter().map(|cell| (cell, Paint::Plain)).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines; widths count characters before painting.
    pub fn render(&self, colours: Colours) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, (cell, _)) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: Vec<(String, Paint)>| {
            let mut text = String::new();
            for (n, ((cell, paint), width)) in cells.iter().zip(&widths).enumerate() {
                if n > 0 {
                    text.push_str("  ");
                }
                let pad = width.saturating_sub(cell.chars().count());
                text.push_str(&colours.paint(cell, *paint));
                text.push_str(&" ".repeat(pad));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(
            self.header
                .iter()
                .map(|h| ((*h).to_owned(), Paint::Bold))
                .collect(),
        );
        for row in &self.rows {
            line(row.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let mut table = Table::new(&["A", "LONG"]);
        table.plain_row(vec!["wide cell".into(), "x".into()]);
        let plain = Colours { enabled: false };
        assert_eq!(table.render(plain), "A          LONG\nwide cell  x\n");
    }
}
