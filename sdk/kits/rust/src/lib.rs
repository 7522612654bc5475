//! The cellarena Rust kit: play cellarena's games over TCP (docs/protocol.md).
//!
//! Implement [`Bot`] for a game's [`Game`] type ([`rezzo::Rezzo`], [`cata::Cata`], or
//! [`plain::Plain`] for any game as msgpack data) and call [`run`] from `main`:
//!
//! ```no_run
//! use cellarena::{rezzo, run, Bot};
//! struct Forward;
//! impl Bot<rezzo::Rezzo> for Forward {
//!     fn on_tick(&mut self, view: &rezzo::View, _debug: &mut cellarena::Debug) -> Vec<i32> {
//!         view.agents.iter().map(|_| rezzo::ADVANCE).collect()
//!     }
//! }
//! fn main() { std::process::exit(run::<rezzo::Rezzo, _, _>("rezzo", "forward", || Forward)) }
//! ```
//!
//! `run` reads the command line and the CELLARENA_* variables, takes the seat token a launcher hands
//! over, and plays one match, `--matches N`, or `--ladder` with back-off.

pub mod bot;
pub mod debug;
pub mod games;
pub mod value;
pub mod wire;

pub use bot::{comes_back, run, seat_token, Backoff, Bot, Options, RETRY_LATER};
pub use debug::Debug;
pub use games::{cata, plain, rezzo, End, Game, Welcome};
pub use value::Value;
pub use wire::{ClientError, Connection, FrameReader, Message};

#[cfg(test)]
mod tests;
