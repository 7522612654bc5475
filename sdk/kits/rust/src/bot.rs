//! The bot loop: the command line and CELLARENA_* variables, the seat token a launcher hands over, one
//! match or many, ladder mode with back-off, and the retry rule of RETRY_LATER.

use crate::games::{End, Game, Welcome};
use crate::wire::{ClientError, Connection, PROTOCOL};
use serde::Serialize;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The refusals that mean "not now": a ladder bot waits and comes back. Any other `error` before a
/// match means the bot or its token is wrong, and retrying cannot help. Mirrors RETRY_LATER in
/// cellarena/sdk/protocol/codes.py (docs/protocol.md, "Joining a ladder").
pub const RETRY_LATER: [&str; 5] = ["shutdown", "busy", "queue_full", "too_many_connections", "locked_out"];

pub fn comes_back(code: &str) -> bool {
    RETRY_LATER.contains(&code)
}

/// A bot for game `G`: implement `on_tick` (and, if you like, `on_start` and `on_end`).
pub trait Bot<G: Game> {
    fn on_start(&mut self, _welcome: &Welcome) {}
    fn on_tick(&mut self, view: &G::View) -> G::Answer;
    fn on_end(&mut self, _end: &End) {}
}

/// The wait after the n-th failure in a row: a random time between half and all of
/// min(60, 2^(n-1)) seconds, and at least what a `locked_out` message names ("for another 42 s").
pub struct Backoff {
    first: f64,
    cap: f64,
    failures: u32,
    state: u64,
}

impl Backoff {
    pub fn new(first: f64, cap: f64, seed: u64) -> Backoff {
        Backoff { first, cap, failures: 0, state: seed | 1 }
    }
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        // xorshift64*: enough randomness for jitter, with no crate for it.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = (self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        low + (high - low) * r
    }
    pub fn next(&mut self, server_message: &str) -> f64 {
        self.failures += 1;
        let ceiling = self.cap.min(self.first * 2f64.powi(self.failures.min(33) as i32 - 1));
        let mut wait = self.uniform(ceiling / 2.0, ceiling);
        if let Some(asked) = wait_hint(server_message) {
            wait = wait.max(asked + self.uniform(0.0, 1.0));
        }
        wait
    }
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// "... refused for another 42 s" -> 42.
fn wait_hint(message: &str) -> Option<f64> {
    let mut rest = message;
    while let Some(at) = rest.find("for ") {
        let mut tail = &rest[at + 4..];
        tail = tail.strip_prefix("another ").unwrap_or(tail);
        let number: String = tail.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let after = tail[number.len()..].trim_start_matches(' ');
        if !number.is_empty() && after.starts_with('s') && !after[1..].starts_with(|c: char| c.is_alphanumeric()) {
            return number.parse().ok();
        }
        rest = &rest[at + 4..];
    }
    None
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The seat token a launcher hands over: one line read from the pipe CELLARENA_TOKEN_FD names, and the
/// descriptor closed (docs/protocol.md, "Bots that cellarena starts"); else CELLARENA_TOKEN.
pub fn seat_token() -> Option<String> {
    if let Some(fd) = env("CELLARENA_TOKEN_FD").and_then(|v| v.parse::<i32>().ok()) {
        // Only a descriptor that is open: taking ownership of a closed one would be unsound.
        if fd >= 0 && std::path::Path::new(&format!("/proc/self/fd/{}", fd)).exists() {
            use std::os::unix::io::FromRawFd;
            // SAFETY: the launcher gave this process the descriptor, and nothing else in it uses it;
            // the File closes it when dropped.
            let mut pipe = unsafe { std::fs::File::from_raw_fd(fd) };
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while line.len() < 4096 && matches!(pipe.read(&mut byte), Ok(1)) && byte[0] != b'\n' {
                line.push(byte[0]);
            }
            drop(pipe);
            let token = String::from_utf8_lossy(&line).trim().to_owned();
            if !token.is_empty() {
                return Some(token);
            }
        }
    }
    env("CELLARENA_TOKEN")
}

pub const USAGE: &str = "options: --host H --port P (CELLARENA_HOST/PORT, default 127.0.0.1:7777) --name N (CELLARENA_NAME)
         --token T | --token-file PATH (else the launcher's CELLARENA_TOKEN_FD, or CELLARENA_TOKEN)
         --matches N (play N matches) | --ladder (play until stopped, backing off after refusals) -q";

/// What the command line and the environment say.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub host: String,
    pub port: u16,
    pub name: String,
    pub token: Option<String>,
    pub matches: u32,
    pub ladder: bool,
    pub quiet: bool,
}

fn port_of(v: &str, what: &str) -> Result<u16, String> {
    v.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| format!("{} must be 1-65535, got {}", what, v))
}

impl Options {
    /// Flags win over CELLARENA_* variables, which win over the defaults. Err("help") for --help.
    pub fn parse(args: &[String], default_name: &str) -> Result<Options, String> {
        let mut o = Options {
            host: env("CELLARENA_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port: match env("CELLARENA_PORT") {
                Some(p) => port_of(&p, "CELLARENA_PORT")?,
                None => 7777,
            },
            name: env("CELLARENA_NAME").unwrap_or_else(|| default_name.into()),
            token: None,
            matches: 1,
            ladder: false,
            quiet: false,
        };
        let (mut token_flag, mut token_file, mut matches_given) = (None, None, false);
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            let mut value = || -> Result<String, String> {
                i += 1;
                args.get(i).cloned().ok_or_else(|| format!("{} needs a value", a))
            };
            match a {
                "--host" => o.host = value()?,
                "--port" => o.port = port_of(&value()?, "--port")?,
                "--name" => o.name = value()?,
                "--token" => token_flag = Some(value()?),
                "--token-file" => token_file = Some(value()?),
                "--matches" => {
                    let v = value()?;
                    o.matches = v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| format!("--matches must be 1 or more, got {}", v))?;
                    matches_given = true;
                }
                "--ladder" => o.ladder = true,
                "-q" | "--quiet" => o.quiet = true,
                "--tls" | "--tls-ca" => {
                    return Err(format!(
                        "{}: the Rust kit speaks plain TCP; reach a TLS server through a local TLS proxy (stunnel or socat, see the kit's README) and point --host/--port at it",
                        a
                    ))
                }
                "-h" | "--help" => return Err("help".into()),
                _ => return Err(format!("unknown option {}", a)),
            }
            i += 1;
        }
        if matches_given && o.ladder {
            return Err("--matches N plays N matches and --ladder plays until stopped: give one of them".into());
        }
        if token_flag.is_some() && token_file.is_some() {
            return Err("--token and --token-file: give one of them".into());
        }
        if o.name.is_empty() || o.name.chars().count() > 64 {
            return Err("--name must be 1 to 64 characters".into());
        }
        o.token = if let Some(path) = token_file {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("--token-file {}: cannot read it ({})", path, e))?;
            let text = text.trim().to_owned();
            if text.is_empty() {
                return Err(format!("--token-file {}: the file is empty", path));
            }
            Some(text)
        } else if let Some(t) = token_flag.filter(|t: &String| !t.trim().is_empty()) {
            Some(t.trim().to_owned())
        } else {
            seat_token()
        };
        Ok(o)
    }
}

#[derive(Serialize)]
pub(crate) struct Hello<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    protocol: i64,
    name: &'a str,
    game: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
}

impl<'a> Hello<'a> {
    pub(crate) fn new(o: &'a Options, game: &'a str) -> Hello<'a> {
        Hello { kind: "hello", protocol: PROTOCOL, name: &o.name, game, token: o.token.as_deref() }
    }
}

#[derive(Serialize)]
pub(crate) struct Moves<'a, A: Serialize> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) tick: i64,
    pub(crate) moves: &'a A,
}

struct Log {
    name: String,
    quiet: bool,
}

impl Log {
    fn say(&self, text: &str, always: bool) {
        if always || !self.quiet {
            eprintln!("{}: {}", self.name, text);
        }
    }
}

fn tick_of(view_tick: &crate::wire::Message) -> i64 {
    view_tick.value.get("tick").and_then(crate::value::Value::as_i64).unwrap_or(-1)
}

/// One match on an open connection, `hello` sent: welcome, ticks, end.
fn play<G: Game, B: Bot<G>>(bot: &mut B, conn: &mut Connection, log: &Log) -> Result<End, ClientError> {
    let mut welcome: Option<Welcome> = None;
    loop {
        let message = conn.recv()?;
        match message.kind.as_str() {
            "welcome" => {
                let w: Welcome = message.decode()?;
                log.say(&format!("seat {} of match {}", w.seat, w.match_number), false);
                if catch_unwind(AssertUnwindSafe(|| bot.on_start(&w))).is_err() {
                    log.say("on_start panicked", true);
                }
                welcome = Some(w);
            }
            "tick" => {
                let w = welcome.as_ref().ok_or_else(|| ClientError::Protocol("a tick came before the welcome".into()))?;
                let view = G::view(&message, w)?;
                let tick = tick_of(&message);
                let answer = match catch_unwind(AssertUnwindSafe(|| bot.on_tick(&view))) {
                    Ok(a) => a,
                    Err(_) => {
                        log.say(&format!("on_tick panicked at tick {}; answering a no-op", tick), true);
                        G::noop(&view)
                    }
                };
                conn.send(&Moves { kind: "moves", tick, moves: &answer })?;
            }
            "end" => {
                let end: End = message.decode()?;
                log.say(
                    &format!(
                        "end after {} ticks: {} (rank {}), late {}, invalid {}, illegal {}",
                        end.ticks, end.result, end.rank, end.late, end.invalid, end.illegal
                    ),
                    false,
                );
                if catch_unwind(AssertUnwindSafe(|| bot.on_end(&end))).is_err() {
                    log.say("on_end panicked", true);
                }
                return Ok(end);
            }
            other => log.say(&format!("ignoring a message of type '{}' (a later protocol's)", other), false),
        }
    }
}

fn fix_for(code: &str) -> &'static str {
    match code {
        "bad_hello" => "; check the bot's token (--token-file, --token or CELLARENA_TOKEN) and its game",
        "bad_version" => "; this kit speaks protocol 1: update it",
        "tls_required" => "; connect through a local TLS proxy (see the kit's README)",
        _ => "",
    }
}

/// Play as the command line says: one match, `--matches N`, or `--ladder`; `make` gives a new bot for
/// each match. Returns the exit status: 0 when played, 1 (one line on stderr) when it cannot go on,
/// 64 for a bad command line.
pub fn run<G: Game, B: Bot<G>, F: FnMut() -> B>(game: &str, default_name: &str, mut make: F) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match Options::parse(&args, default_name) {
        Ok(o) => o,
        Err(e) if e == "help" => {
            println!("{}", USAGE);
            return 0;
        }
        Err(e) => {
            eprintln!("{}: {}\n{}", default_name, e, USAGE);
            return 64;
        }
    };
    // Panics are caught and reported by the loop; the default hook would print each one twice.
    std::panic::set_hook(Box::new(|info| eprintln!("panic: {}", info)));
    let log = Log { name: o.name.clone(), quiet: o.quiet };
    let keep_trying = o.ladder || o.matches > 1;
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) ^ (std::process::id() as u64) << 32;
    let mut backoff = Backoff::new(1.0, 60.0, seed);
    let mut played = 0u32;
    let fail = |text: String, played: u32| {
        let after = if keep_trying { format!(" (after {} matches)", played) } else { String::new() };
        log.say(&format!("error: {}{}", text, after), true);
        1
    };
    while o.ladder || played < o.matches {
        let outcome = Connection::open(&o.host, o.port).and_then(|mut conn| {
            conn.send(&Hello::new(&o, game))?;
            let mut bot = make();
            play::<G, B>(&mut bot, &mut conn, &log)
        });
        let (why, server_message) = match outcome {
            Ok(_) => {
                played += 1;
                backoff.reset();
                if !o.ladder && played >= o.matches {
                    break;
                }
                let of = if o.ladder { String::new() } else { format!(" of {}", o.matches) };
                log.say(&format!("match {}{} played; connecting for the next", played, of), false);
                continue;
            }
            Err(ClientError::Server { code, message }) => {
                let text = format!("the server sent error {}: {}", code, message);
                if !(keep_trying && comes_back(&code)) {
                    let stop = if keep_trying { "; not trying again: waiting cannot fix this" } else { "" };
                    return fail(format!("{}{}{}", text, fix_for(&code), stop), played);
                }
                (text, message)
            }
            Err(ClientError::Protocol(e)) => return fail(format!("the server sent something this kit cannot read ({})", e), played),
            Err(e) => {
                if !keep_trying {
                    return fail(e.to_string(), played);
                }
                (e.to_string(), String::new())
            }
        };
        let delay = backoff.next(&server_message);
        log.say(&format!("{}; trying again in {:.1} s", why, delay), true);
        std::thread::sleep(Duration::from_secs_f64(delay));
    }
    0
}
