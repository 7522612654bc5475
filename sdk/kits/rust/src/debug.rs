//! What a bot draws for its own eyes each tick (`debug.mark`, `debug.line`, `debug.log` in
//! `on_tick`), sent as the optional `debug` map of that tick's answer (docs/protocol.md, "Debug
//! drawing"), kept in the replay and drawn by the web player. It mirrors the Python SDK's DebugLayer
//! (cellarena/sdk/debug.py), caps included.
//!
//! Forgiving on purpose: drawing is for debugging, so a bad call (a colour that is no colour, a label
//! that is not printable text) or one past the caps is dropped and counted, never a panic, and never
//! costs the move.

use serde::Serialize;

/// Marks kept of one answer (the server's cap: more would be dropped there).
pub const MAX_MARKS: usize = 256;
/// Lines kept of one answer.
pub const MAX_LINES: usize = 64;
/// Bytes of text (UTF-8, all lines together) kept of one answer.
pub const MAX_TEXT_BYTES: usize = 1024;
/// Characters of a mark's label; a longer label is cut to this.
pub const MAX_LABEL: usize = 16;
/// Colour names taken besides `#rrggbb` (the Python SDK's).
pub const COLOURS: [(&str, &str); 11] = [
    ("red", "#e6194b"),
    ("green", "#3cb44b"),
    ("blue", "#4363d8"),
    ("yellow", "#ffe119"),
    ("orange", "#f58231"),
    ("purple", "#911eb4"),
    ("cyan", "#42d4f4"),
    ("magenta", "#f032e6"),
    ("white", "#ffffff"),
    ("black", "#000000"),
    ("grey", "#a9a9a9"),
];
/// Cell coordinates a drawing may use: far beyond any board, what the server takes as a cell.
const LIMIT: i64 = 1 << 31;

/// A cell: a board cell `[x, y]`, or in Rezzo `[row, col]` of an agent's viewport (the agent at [12, 6]).
pub type Cell = [i64; 2];

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Mark {
    pub cell: Cell,
    pub colour: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<i64>,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Line {
    pub from: Cell,
    pub to: Cell,
    pub colour: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<i64>,
}

/// The `debug` map of one answer.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct Drawing {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<Mark>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<Line>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub text: Vec<String>,
}

/// One tick's drawing, handed to `on_tick`. `dropped` counts calls dropped over the match (malformed,
/// or past a cap) and `first_problem` says what was wrong with the first; the loop reports it once.
#[derive(Debug)]
pub struct Debug {
    drawing: Drawing,
    text_room: usize,
    pub dropped: u64,
    pub first_problem: Option<String>,
}

impl Default for Debug {
    fn default() -> Debug {
        Debug { drawing: Drawing::default(), text_room: MAX_TEXT_BYTES, dropped: 0, first_problem: None }
    }
}

fn colour_of(value: &str) -> Option<String> {
    let lower = value.to_ascii_lowercase();
    if lower.len() == 7 && lower.starts_with('#') && lower[1..].chars().all(|c| c.is_ascii_hexdigit()) {
        return Some(lower);
    }
    COLOURS.iter().find(|(name, _)| *name == lower).map(|(_, hex)| hex.to_string())
}

fn on_board(cell: &Cell) -> bool {
    cell.iter().all(|v| (-LIMIT..LIMIT).contains(v))
}

/// Control characters (C0, DEL, C1) are not printable, as for the Python SDK's bots.
fn printable(c: char) -> bool {
    !c.is_control()
}

impl Debug {
    pub fn new() -> Debug {
        Debug::default()
    }

    fn drop_call(&mut self, why: String) {
        self.dropped += 1;
        if self.first_problem.is_none() {
            self.first_problem = Some(why);
        }
    }

    /// Mark `cell` in `colour` (`#rrggbb` or a name of `COLOURS`), with a label of up to 16
    /// characters (cut beyond; "" for none).
    pub fn mark(&mut self, cell: Cell, colour: &str, label: &str) {
        self.add_mark(cell, colour, label, None)
    }

    /// `mark` in the viewport of Rezzo's agent `agent` (its number, as in `view.agents`; `mark`
    /// draws in the tick's first agent's).
    pub fn mark_for(&mut self, agent: i64, cell: Cell, colour: &str, label: &str) {
        self.add_mark(cell, colour, label, Some(agent))
    }

    fn add_mark(&mut self, cell: Cell, colour: &str, label: &str, agent: Option<i64>) {
        if self.drawing.marks.len() >= MAX_MARKS {
            return self.drop_call(format!("more than {} marks in one tick", MAX_MARKS));
        }
        let col = match colour_of(colour) {
            Some(c) if on_board(&cell) => c,
            _ => {
                let shown: String = colour.chars().take(20).collect();
                return self.drop_call(format!(
                    "mark({:?}, {:?}): a cell is two ints, a colour #rrggbb or a name",
                    cell, shown
                ));
            }
        };
        if !label.chars().all(printable) {
            let shown: String = label.chars().take(40).collect();
            return self.drop_call(format!("mark label {:?}: a label is printable text", shown));
        }
        let label = if label.is_empty() { None } else { Some(label.chars().take(MAX_LABEL).collect()) };
        self.drawing.marks.push(Mark { cell, colour: col, label, agent });
    }

    /// A line from cell `a` to cell `b` in `colour`.
    pub fn line(&mut self, a: Cell, b: Cell, colour: &str) {
        self.add_line(a, b, colour, None)
    }

    /// `line` in the viewport of Rezzo's agent `agent`.
    pub fn line_for(&mut self, agent: i64, a: Cell, b: Cell, colour: &str) {
        self.add_line(a, b, colour, Some(agent))
    }

    fn add_line(&mut self, from: Cell, to: Cell, colour: &str, agent: Option<i64>) {
        if self.drawing.lines.len() >= MAX_LINES {
            return self.drop_call(format!("more than {} lines in one tick", MAX_LINES));
        }
        match colour_of(colour) {
            Some(colour) if on_board(&from) && on_board(&to) => self.drawing.lines.push(Line { from, to, colour, agent }),
            _ => {
                let shown: String = colour.chars().take(20).collect();
                self.drop_call(format!("line({:?}, {:?}, {:?}): cells are two ints, a colour #rrggbb", from, to, shown))
            }
        }
    }

    /// One or more text lines (split at newlines) for this tick's panel; 1 KiB a tick in all.
    /// Characters that are not printable become spaces.
    pub fn log(&mut self, text: &str) {
        let mut pieces: Vec<&str> = text.lines().collect(); // "\n" and "\r\n", as Python's splitlines
        if pieces.is_empty() {
            pieces.push("");
        }
        for raw in pieces {
            let piece: String = raw.chars().map(|c| if printable(c) { c } else { ' ' }).collect();
            if piece.len() > self.text_room {
                self.drop_call(format!("more than {} bytes of text in one tick", MAX_TEXT_BYTES));
                continue;
            }
            self.text_room -= piece.len();
            self.drawing.text.push(piece);
        }
    }

    /// Whether anything was drawn this tick.
    pub fn is_empty(&self) -> bool {
        self.drawing.marks.is_empty() && self.drawing.lines.is_empty() && self.drawing.text.is_empty()
    }

    /// This tick's `debug` map (None: nothing drawn), and a clean drawing for the next tick.
    pub fn take(&mut self) -> Option<Drawing> {
        self.text_room = MAX_TEXT_BYTES;
        if self.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.drawing))
    }
}
