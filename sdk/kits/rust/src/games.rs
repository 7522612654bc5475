//! What a bot is shown and what it answers, per game (docs/protocol.md, "Games"). Rezzo and C.A.T.A.
//! are typed; any game plays through [`plain::Plain`], which hands the tick over as a [`Value`].

use crate::value::Value;
use crate::wire::{ClientError, Message};
use serde::{Deserialize, Serialize};

/// The `welcome`: your seat and the game's settings (`config` as data: see each game for a typed one).
#[derive(Clone, Debug, Deserialize)]
pub struct Welcome {
    #[serde(default)]
    pub seat: i64,
    pub game: String,
    #[serde(rename = "match")]
    pub match_number: i64,
    pub players: i64,
    pub names: Vec<String>,
    /// Ticks per second; 0 in fast mode.
    pub tick_rate: f64,
    pub budget_ms: i64,
    #[serde(default = "nil")]
    pub config: Value,
}

fn nil() -> Value {
    Value::Nil
}

/// The `end`: your result and counts.
#[derive(Clone, Debug, Deserialize)]
pub struct End {
    pub ticks: i64,
    pub result: String,
    pub rank: i64,
    pub ranks: Vec<i64>,
    pub winner: Option<i64>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub late: i64,
    #[serde(default)]
    pub invalid: i64,
    #[serde(default)]
    pub illegal: i64,
}

/// A game as the kit plays it: how a tick becomes a view, and what a no-op answer is.
pub trait Game {
    type View;
    type Answer: Serialize;
    fn view(tick: &Message, welcome: &Welcome) -> Result<Self::View, ClientError>;
    /// What is sent when the bot's `on_tick` panics.
    fn noop(view: &Self::View) -> Self::Answer;
}

/// Rezzo: one 13x13 viewport per live agent; one move per agent.
pub mod rezzo {
    use super::*;

    pub const NOOP: i32 = 0;
    pub const ADVANCE: i32 = 1;
    pub const LEFT: i32 = 2;
    pub const RIGHT: i32 = 3;
    pub const BUILD: i32 = 4;
    pub const HIT: i32 = 5;

    /// Cell codes: unowned 0-4, OOB 7; owned codes are kind + owner (owner 0 is always you).
    pub const BLANK: u8 = 0;
    pub const WIRE: u8 = 1;
    pub const ELECTRON: u8 = 2;
    pub const TAIL: u8 = 3;
    pub const PHOTON: u8 = 4;
    pub const OOB: u8 = 7;
    pub const AGENT: u8 = 8;
    pub const FLAG: u8 = 16;
    pub const GEYSER: u8 = 24;
    pub const BASE: u8 = 32;

    pub fn kind(code: u8) -> u8 {
        if code >= 8 {
            code & 0xF8
        } else {
            code
        }
    }
    /// The owner of an owned cell (0 is you), or None.
    pub fn owner(code: u8) -> Option<u8> {
        if code >= 8 {
            Some(code & 7)
        } else {
            None
        }
    }

    /// The `welcome`'s config for Rezzo.
    #[derive(Clone, Debug, Deserialize)]
    pub struct Config {
        pub map: String,
        pub width: i64,
        pub height: i64,
        pub agents_per_player: i64,
        pub view_size: usize,
        pub max_ticks: i64,
        pub torus: bool,
        pub own_base_counts: bool,
    }

    impl Config {
        pub fn of(welcome: &Welcome) -> Result<Config, ClientError> {
            let bytes = rmp_serde::to_vec_named(&welcome.config).map_err(|e| ClientError::Protocol(e.to_string()))?;
            rmp_serde::from_slice(&bytes).map_err(|e| ClientError::Protocol(format!("welcome: the config does not fit Rezzo ({})", e)))
        }
    }

    #[derive(Deserialize)]
    struct Tick {
        tick: i64,
        budget_ms: i64,
        agents: Vec<i64>,
        cells: serde_bytes::ByteBuf,
        damage: serde_bytes::ByteBuf,
    }

    /// A tick: your live agents and one `view_size` x `view_size` viewport each, row 0 farthest
    /// ahead, the agent at the bottom row's middle column (row 12, column 6).
    #[derive(Clone, Debug)]
    pub struct View {
        pub tick: i64,
        pub budget_ms: i64,
        pub view_size: usize,
        pub agents: Vec<i64>,
        pub cells: Vec<u8>,
        pub damage: Vec<u8>,
    }

    impl View {
        /// Agent `i`'s (the i-th of `agents`) viewport cell at row `r`, column `c`.
        pub fn cell(&self, i: usize, r: usize, c: usize) -> u8 {
            self.cells[i * self.view_size * self.view_size + r * self.view_size + c]
        }
        pub fn damage_at(&self, i: usize, r: usize, c: usize) -> u8 {
            self.damage[i * self.view_size * self.view_size + r * self.view_size + c]
        }
        /// Relative to the agent: `forward` 0..12 ahead, `right` -6..6 (negative is left).
        pub fn at(&self, i: usize, forward: usize, right: i64) -> u8 {
            let centre = (self.view_size / 2) as i64;
            self.cell(i, self.view_size - 1 - forward, (centre + right) as usize)
        }
        pub fn ahead(&self, i: usize) -> u8 {
            self.at(i, 1, 0)
        }
    }

    pub struct Rezzo;

    impl Game for Rezzo {
        type View = View;
        /// One move per agent, in `agents` order.
        type Answer = Vec<i32>;
        fn view(tick: &Message, welcome: &Welcome) -> Result<View, ClientError> {
            let t: Tick = tick.decode()?;
            let view_size = Config::of(welcome).map(|c| c.view_size).unwrap_or(13);
            let plane = view_size * view_size;
            if t.cells.len() != t.agents.len() * plane || t.damage.len() != t.cells.len() {
                return Err(ClientError::Protocol("tick: cells/damage do not hold one viewport per agent".into()));
            }
            Ok(View {
                tick: t.tick,
                budget_ms: t.budget_ms,
                view_size,
                agents: t.agents,
                cells: t.cells.into_vec(),
                damage: t.damage.into_vec(),
            })
        }
        fn noop(view: &View) -> Vec<i32> {
            vec![NOOP; view.agents.len()]
        }
    }
}

/// C.A.T.A.: the board, the 32-entry rule, both healths; one move `(code, index)` per tick.
pub mod cata {
    use super::*;

    pub const PASS: i32 = 0;
    pub const STRIKE: i32 = 1;
    pub const BLOCK: i32 = 2;
    pub const MEDITATE: i32 = 3;

    /// Your previous move, when it was illegal.
    #[derive(Clone, Debug, Deserialize)]
    pub struct Refused {
        pub tick: i64,
        #[serde(rename = "move")]
        pub mv: (i32, i32),
        pub reason: String,
    }

    /// A tick. Seat 0 is black, 1 white; `board` is packed bits, a set bit is white.
    #[derive(Clone, Debug, Deserialize)]
    pub struct View {
        pub tick: i64,
        pub budget_ms: i64,
        pub seat: usize,
        pub size: usize,
        #[serde(with = "serde_bytes")]
        pub board: Vec<u8>,
        pub rule: Vec<u8>,
        pub health: Vec<i64>,
        pub cells_per_hp: i64,
        pub turn: i64,
        #[serde(rename = "move")]
        pub move_in_turn: i64,
        pub moves_left: i64,
        pub blocked: bool,
        pub meditated: bool,
        pub opponent_meditated: bool,
        pub refused: Option<Refused>,
        /// The last reaction phase, as data (docs/protocol.md lists its fields).
        #[serde(default = "super::nil")]
        pub last_reaction: Value,
    }

    impl View {
        /// Whether cell (row, col) is white: cell k = row * size + col is bit 7 - k % 8 of byte k / 8.
        pub fn white(&self, row: usize, col: usize) -> bool {
            let k = row * self.size + col;
            (self.board[k / 8] >> (7 - k % 8)) & 1 == 1
        }
        /// Every legal move now, strikes first (docs/protocol.md lists what is legal).
        pub fn legal_moves(&self) -> Vec<(i32, i32)> {
            let other = 1 - self.seat;
            let (mut strikes, mut rest) = (Vec::new(), Vec::new());
            for i in 0..32usize {
                let mine = i >> 4 == self.seat;
                if !mine && self.rule[i] as usize == other {
                    strikes.push((STRIKE, i as i32));
                }
                if mine && self.turn > 1 && !self.blocked && self.rule[i] as usize == other {
                    rest.push((BLOCK, i as i32));
                }
            }
            if self.turn > 1 {
                if !self.meditated && self.health[self.seat] < self.health[other] {
                    rest.push((MEDITATE, 0));
                }
                rest.push((PASS, 0));
            }
            strikes.extend(rest);
            strikes
        }
    }

    pub struct Cata;

    impl Game for Cata {
        type View = View;
        /// `(code, index)`: index is the rule entry 0-31 (0 for pass and meditate).
        type Answer = (i32, i32);
        fn view(tick: &Message, _welcome: &Welcome) -> Result<View, ClientError> {
            let v: View = tick.decode()?;
            if v.rule.len() != 32 || v.health.len() != 2 || v.seat > 1 || v.board.len() * 8 < v.size * v.size {
                return Err(ClientError::Protocol("tick: the board, rule, health or seat has the wrong size".into()));
            }
            Ok(v)
        }
        fn noop(_view: &View) -> (i32, i32) {
            (PASS, 0)
        }
    }
}

/// Any game, untyped: the tick as a [`Value`], the answer any [`Value`] (docs/protocol.md, "Games").
pub mod plain {
    use super::*;

    #[derive(Clone, Debug)]
    pub struct View {
        pub tick: i64,
        pub budget_ms: i64,
        /// The whole tick message.
        pub raw: Value,
    }

    pub struct Plain;

    impl Game for Plain {
        type View = View;
        type Answer = Value;
        fn view(tick: &Message, _welcome: &Welcome) -> Result<View, ClientError> {
            let int = |k: &str| {
                tick.value.get(k).and_then(Value::as_i64).ok_or_else(|| ClientError::Protocol(format!("tick: the field '{}' is not an int", k)))
            };
            Ok(View { tick: int("tick")?, budget_ms: int("budget_ms")?, raw: tick.value.clone() })
        }
        fn noop(_view: &View) -> Value {
            Value::Nil
        }
    }
}
