//! The bot loop: the command line and CELLARENA_* variables, the connection (or else the seat token) a
//! launcher hands over, one match or many, ladder mode with back-off and the retry rule of
//! RETRY_LATER, a ladder's redirects, a seat taken back after a lost connection, and SIGTERM.

use crate::debug::{Debug, Drawing};
use crate::games::{End, Game, Welcome};
use crate::wire::{frame, ClientError, Connection, PROTOCOL};
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

/// A bot for game `G`: implement `on_tick` (and, if you like, `on_start` and `on_end`). `debug` is
/// this tick's drawing for your own eyes ([`Debug`]): sent with the answer, drawn by the web player.
pub trait Bot<G: Game> {
    fn on_start(&mut self, _welcome: &Welcome) {}
    fn on_tick(&mut self, view: &G::View, debug: &mut Debug) -> G::Answer;
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
         --matches N (play N matches) | --ladder (play until stopped, backing off after refusals) -q
         CELLARENA_SOCKET_FD: a connection the launcher made, owning the seat (the first match)
         CELLARENA_BACKOFF_FIRST_S: the first back-off's longest wait (default 1 s; tests set less)";

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
    /// CELLARENA_SOCKET_FD: a connection the launcher made, owning the seat (the first match).
    pub handed_fd: Option<i32>,
    /// CELLARENA_BACKOFF_FIRST_S: the longest wait of the back-off's first round (1 s). For tests, which
    /// set milliseconds so that a retry is quick; a server's "for another N s" is still waited out.
    pub backoff_first: f64,
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
            handed_fd: None,
            backoff_first: match env("CELLARENA_BACKOFF_FIRST_S") {
                Some(v) => v.parse::<f64>().ok().filter(|s| *s > 0.0 && *s <= 60.0).ok_or_else(|| {
                    format!("CELLARENA_BACKOFF_FIRST_S must be seconds in (0, 60], got {}; unset it for 1 s", v)
                })?,
                None => 1.0,
            },
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
        if let Some(fd) = env("CELLARENA_SOCKET_FD") {
            o.handed_fd = Some(fd.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                format!("CELLARENA_SOCKET_FD: '{}' is not a descriptor number; unset it to connect to --host/--port instead", fd)
            })?);
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
        } else if o.handed_fd.is_some() {
            None // the handed connection owns the seat: no token needed, none read
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
    /// The later messages this kit handles: a ladder's `redirect`.
    accepts: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
}

impl<'a> Hello<'a> {
    pub(crate) fn new(name: &'a str, game: &'a str, token: Option<&'a str>) -> Hello<'a> {
        Hello { kind: "hello", protocol: PROTOCOL, name, game, accepts: ["redirect"], token }
    }
}

/// Where a ladder sends this bot's match (docs/protocol.md, "redirect"): another address, not a failure.
#[derive(serde::Deserialize, Clone, Debug, PartialEq)]
pub struct Redirect {
    pub host: String,
    pub port: u16,
    pub token: String,
    pub tls: bool,
}

/// How one match ended when it was not played to its `end`.
enum Outcome {
    Failed(ClientError),
    Redirected(Redirect),
}

impl From<ClientError> for Outcome {
    fn from(e: ClientError) -> Outcome {
        Outcome::Failed(e)
    }
}

#[derive(Serialize)]
pub(crate) struct Moves<'a, A: Serialize> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) tick: i64,
    pub(crate) moves: &'a A,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) debug: Option<Drawing>,
}

/// This tick's answer with its drawing, unless the frame would pass the protocol's limit,
/// MAX_CLIENT_FRAME (the caps keep it far below; a huge answer could not): then the drawing goes, never the move. A dropped
/// drawing is said once a match (`said`).
pub(crate) fn reply_to<'a, A: Serialize>(tick: i64, moves: &'a A, debug: &mut Debug, said: &mut bool, log: &dyn Fn(&str)) -> Moves<'a, A> {
    if let (Some(problem), false) = (&debug.first_problem, *said) {
        *said = true;
        log(&format!("debug drawing dropped: {} (only the first is reported; the move is kept)", problem));
    }
    let mut reply = Moves { kind: "moves", tick, moves, debug: debug.take() };
    if reply.debug.is_some() && frame(&reply).is_err() {
        reply.debug = None;
        debug.dropped += 1;
        if !*said {
            *said = true;
            log(&format!("tick {}: the debug drawing would make the answer too large; sent without it", tick));
        }
    }
    reply
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
fn play<G: Game, B: Bot<G>>(bot: &mut B, conn: &mut Connection, log: &Log) -> Result<End, Outcome> {
    let mut welcome: Option<Welcome> = None;
    let mut debug = Debug::new();
    let mut debug_said = false;
    loop {
        let message = conn.recv()?;
        match message.kind.as_str() {
            "welcome" => {
                let w: Welcome = message.decode()?;
                conn.started();
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
                debug.take(); // a clean drawing for this tick
                let answer = match catch_unwind(AssertUnwindSafe(|| bot.on_tick(&view, &mut debug))) {
                    Ok(a) => a,
                    Err(_) => {
                        log.say(&format!("on_tick panicked at tick {}; answering a no-op", tick), true);
                        G::noop(&view)
                    }
                };
                let say = |text: &str| log.say(text, true);
                conn.send(&reply_to(tick, &answer, &mut debug, &mut debug_said, &say))?;
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
            "redirect" => {
                if welcome.is_some() {
                    return Err(ClientError::Protocol("a redirect arrived in the middle of a match".into()).into());
                }
                let target: Redirect = message.decode()?;
                if target.host.is_empty() || target.port == 0 {
                    return Err(ClientError::Protocol(format!("redirect: no host, or a port outside 1-65535 ({})", target.port)).into());
                }
                return Err(Outcome::Redirected(target));
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
        "revoked" => "; ask the ladder's host for the bot's current token",
        "paused" => "; the ladder paused this bot (the message says why); fix it, then resume it on your page on the ladder or with `cellarena ladder resume`",
        _ => "",
    }
}

/// Connections to a match host tried before a redirected match is given up.
pub const FOLLOW_ATTEMPTS: u32 = 3;
/// The waits (s) before each try to take back a seat lost mid-match, while a ladder keeps it (its
/// grace, a few seconds: docs/protocol.md, "Joining a ladder").
pub const REJOIN_WAITS: [f64; 3] = [0.25, 0.5, 1.0];

/// Matches played so far, for the SIGTERM handler's line.
static PLAYED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The SIGTERM handler's line, without the count: written before the handler is set.
static mut STOP_LINE: [u8; 96] = [0; 96];
static mut STOP_LEN: usize = 0;

extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    fn write(fd: i32, buf: *const u8, count: usize) -> isize;
    fn _exit(status: i32) -> !;
}
const SIGTERM: i32 = 15;

/// SIGTERM stops the bot as asked, a normal exit (status 0) whatever it was waiting for. Only
/// async-signal-safe calls: write and _exit.
extern "C" fn on_sigterm(_: i32) {
    let mut text = [0u8; 160];
    // SAFETY: STOP_LINE is written once, before the handler is set, and only read here.
    let (line, len) = unsafe { (&*std::ptr::addr_of!(STOP_LINE), STOP_LEN) };
    text[..len].copy_from_slice(&line[..len]);
    let mut n = len;
    let mut digits = [0u8; 10];
    let mut d = 0;
    let mut v = PLAYED.load(std::sync::atomic::Ordering::Relaxed);
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        text[n] = digits[d];
        n += 1;
    }
    for b in b" matches\n" {
        text[n] = *b;
        n += 1;
    }
    // SAFETY: plain system calls on a buffer of ours.
    unsafe {
        write(2, text.as_ptr(), n);
        _exit(0)
    }
}

fn stop_on_sigterm(name: &str) {
    let line = format!("{}: stopped by SIGTERM after ", name);
    let bytes = &line.as_bytes()[..line.len().min(96)];
    // SAFETY: written before the handler that reads it is set; one thread.
    unsafe {
        let buf = &mut *std::ptr::addr_of_mut!(STOP_LINE);
        buf[..bytes.len()].copy_from_slice(bytes);
        STOP_LEN = bytes.len();
        signal(SIGTERM, on_sigterm);
    }
}

/// The matches one `run` plays, one connection each, with back-off between failed attempts.
struct Series<'a> {
    o: &'a Options,
    game: &'a str,
    log: Log,
    keep_trying: bool,
    backoff: Backoff,
    played: u32,
}

impl<'a> Series<'a> {
    /// Connect, say hello, play one match. A connection lost mid-match takes its seat back (the same
    /// bot, the same token) while the host keeps it, then counts as a lost connection.
    fn play_at<G: Game, B: Bot<G>>(&self, bot: &mut B, host: &str, port: u16, token: Option<&str>) -> Result<End, Outcome> {
        let mut lost: Option<String> = None;
        let mut attempt = 0;
        loop {
            let result = Connection::open(host, port).map_err(Outcome::from).and_then(|mut conn| {
                conn.send(&Hello::new(&self.o.name, self.game, token))?;
                play::<G, B>(bot, &mut conn, &self.log)
            });
            match result {
                Err(Outcome::Failed(ClientError::Lost(text))) => {
                    // Without a token the seat is no one's to take back (`cellarena serve` seats whoever comes).
                    if token.is_none() || attempt >= REJOIN_WAITS.len() {
                        return Err(ClientError::Closed(text).into());
                    }
                    self.log.say(&format!("{}; taking the seat back", text), true);
                    std::thread::sleep(Duration::from_secs_f64(REJOIN_WAITS[attempt]));
                    lost = Some(text);
                    attempt += 1;
                }
                // The grace was over: the loss is the news, not the refusal.
                Err(Outcome::Failed(ClientError::Server { .. })) if lost.is_some() => {
                    return Err(ClientError::Closed(lost.unwrap_or_default()).into())
                }
                other => return other,
            }
        }
    }

    /// Play the match a ladder sent this bot to: Ok(true) when played, Ok(false) when given up (after a
    /// wait, to go back to the ladder). A failure there is the match's, not the bot's.
    fn follow<G: Game, B: Bot<G>>(&mut self, bot: &mut B, target: &Redirect) -> Result<bool, ClientError> {
        let where_ = format!("the match host {}:{}", target.host, target.port);
        if target.tls {
            return self.give_up(format!(
                "{} speaks TLS, which the Rust kit does not: reach it through a local TLS proxy (see the kit's README), or ask the ladder's host for plain matches",
                where_
            ));
        }
        self.log.say(&format!("playing this match at {}:{}", target.host, target.port), false);
        for attempt in 1..=FOLLOW_ATTEMPTS {
            match self.play_at::<G, B>(bot, &target.host, target.port, Some(&target.token)) {
                Ok(_) => return Ok(true),
                Err(Outcome::Redirected(_)) => {
                    return self.give_up(format!("{} redirected this bot again; a match host must not", where_))
                }
                Err(Outcome::Failed(ClientError::Server { code, message })) => {
                    return self.give_up(format!("{} refused this bot: the server sent error {}: {}", where_, code, message))
                }
                Err(Outcome::Failed(e @ ClientError::Protocol(_))) => return Err(e),
                Err(Outcome::Failed(e)) => {
                    if attempt == FOLLOW_ATTEMPTS {
                        return self.give_up(format!("lost {} ({})", where_, e));
                    }
                    self.log.say(&format!("lost {} ({}); connecting there again", where_, e), true);
                    std::thread::sleep(Duration::from_millis(200 * attempt as u64));
                }
            }
        }
        Ok(false)
    }

    fn give_up(&mut self, text: String) -> Result<bool, ClientError> {
        if !self.keep_trying {
            return Err(ClientError::Closed(text));
        }
        self.wait(&text, "");
        Ok(false)
    }

    fn wait(&mut self, why: &str, server_message: &str) {
        let delay = self.backoff.next(server_message);
        self.log.say(&format!("{}; trying again in {:.1} s", why, delay), true);
        std::thread::sleep(Duration::from_secs_f64(delay));
    }

    fn fail(&self, text: String) -> i32 {
        let after = if self.keep_trying { format!(" (after {} matches)", self.played) } else { String::new() };
        self.log.say(&format!("error: {}{}", text, after), true);
        1
    }

    fn play_all<G: Game, B: Bot<G>, F: FnMut() -> B>(&mut self, mut make: F, mut handed: Option<Connection>) -> i32 {
        let o = self.o;
        let mut bot = make(); // a new bot per match; a match cut short keeps its bot
        while o.ladder || self.played < o.matches {
            let outcome = match handed.take() {
                // The first match on the connection the launcher made: it owns the seat.
                Some(mut conn) => conn
                    .send(&Hello::new(&o.name, self.game, None))
                    .map_err(Outcome::from)
                    .and_then(|_| play::<G, B>(&mut bot, &mut conn, &self.log)),
                None => self.play_at::<G, B>(&mut bot, &o.host, o.port, o.token.as_deref()),
            };
            let failure = match outcome {
                Ok(_) => None,
                Err(Outcome::Redirected(target)) => match self.follow::<G, B>(&mut bot, &target) {
                    Ok(true) => None,
                    Ok(false) => continue,
                    Err(e) => Some(e),
                },
                Err(Outcome::Failed(e)) => Some(e),
            };
            match failure {
                None => {
                    self.played += 1;
                    PLAYED.store(self.played, std::sync::atomic::Ordering::Relaxed);
                    self.backoff.reset();
                    bot = make();
                    if !o.ladder && self.played >= o.matches {
                        break;
                    }
                    let of = if o.ladder { String::new() } else { format!(" of {}", o.matches) };
                    self.log.say(&format!("match {}{} played; connecting for the next", self.played, of), false);
                }
                Some(ClientError::Server { code, message }) => {
                    let text = format!("the server sent error {}: {}", code, message);
                    if !(self.keep_trying && comes_back(&code)) {
                        let stop = if self.keep_trying { "; not trying again: waiting cannot fix this" } else { "" };
                        return self.fail(format!("{}{}{}", text, fix_for(&code), stop));
                    }
                    self.wait(&text, &message);
                }
                Some(ClientError::Protocol(e)) => {
                    return self.fail(format!("the server sent something this kit cannot read ({})", e))
                }
                Some(e) => {
                    if !self.keep_trying {
                        return self.fail(e.to_string());
                    }
                    self.wait(&e.to_string(), "");
                }
            }
        }
        0
    }
}

/// Play as the command line says: one match, `--matches N`, or `--ladder`; `make` gives a new bot for
/// each match. Returns the exit status: 0 when played or stopped by SIGTERM, 1 (one line on stderr)
/// when it cannot go on, 64 for a bad command line.
pub fn run<G: Game, B: Bot<G>, F: FnMut() -> B>(game: &str, default_name: &str, make: F) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = Options::parse(&args, default_name).and_then(|o| match o.handed_fd {
        Some(fd) => Connection::adopt(fd)
            .map(|c| (o, Some(c)))
            .map_err(|e| format!("CELLARENA_SOCKET_FD: {}; unset it to connect to --host/--port instead", e)),
        None => Ok((o, None)),
    });
    let (o, handed) = match parsed {
        Ok(found) => found,
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
    stop_on_sigterm(&o.name);
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) ^ (std::process::id() as u64) << 32;
    let mut series = Series {
        o: &o,
        game,
        log: Log { name: o.name.clone(), quiet: o.quiet },
        keep_trying: o.ladder || o.matches > 1,
        backoff: Backoff::new(o.backoff_first, 60.0, seed),
        played: 0,
    };
    series.play_all::<G, B, F>(make, handed)
}
