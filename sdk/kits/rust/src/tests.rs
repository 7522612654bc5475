//! The kit's unit tests (`cargo test`): framing, the views, the retry rule, the back-off, the handover.

use crate::bot::{Hello, Moves};
use crate::wire::frame;
use crate::*;
use serde::Serialize;

fn one<T: Serialize>(message: &T) -> Message {
    let bytes = frame(message).unwrap();
    FrameReader::default().feed(&bytes).unwrap().remove(0)
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::Str(k.into()), v)).collect())
}

fn welcome() -> Welcome {
    let w = map(vec![
        ("type", Value::Str("welcome".into())),
        ("protocol", Value::Int(1)),
        ("seat", Value::Int(1)),
        ("game", Value::Str("rezzo".into())),
        ("match", Value::Int(3)),
        ("players", Value::Int(2)),
        ("names", Value::Array(vec![Value::Str("a".into()), Value::Str("b".into())])),
        ("tick_rate", Value::Float(15.0)),
        ("budget_ms", Value::Int(63)),
        ("later_field", Value::Bool(true)),
        (
            "config",
            map(vec![
                ("map", Value::Str("Duel".into())),
                ("width", Value::Int(32)),
                ("height", Value::Int(32)),
                ("agents_per_player", Value::Int(1)),
                ("view_size", Value::Int(13)),
                ("max_ticks", Value::Int(3000)),
                ("torus", Value::Bool(false)),
                ("own_base_counts", Value::Bool(true)),
            ]),
        ),
    ]);
    one(&w).decode().unwrap()
}

#[test]
fn frames_split_anywhere_and_bad_frames_are_refused() {
    let end = map(vec![("type", Value::Str("end".into()))]);
    let mut bytes = frame(&end).unwrap();
    bytes.extend(frame(&end).unwrap());
    let mut reader = FrameReader::default();
    let mut got = Vec::new();
    for b in &bytes {
        got.extend(reader.feed(&[*b]).unwrap());
    }
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].kind, "end");
    let tls = FrameReader::default().feed(&[0x16, 0x03, 0x01, 0x02]).err().unwrap();
    assert!(tls.to_string().contains("over the limit"), "{}", tls);
    let array = frame(&vec![1, 2]).unwrap();
    assert!(FrameReader::default().feed(&array).err().unwrap().to_string().contains("not a map"));
    let huge = frame(&Value::Str("x".repeat(70_000))).err().unwrap();
    assert!(huge.to_string().contains("65536"), "{}", huge);
}

#[test]
fn rezzo_view_and_answer() {
    let w = welcome();
    assert_eq!((w.seat, w.match_number, w.budget_ms), (1, 3, 63));
    assert_eq!(rezzo::Config::of(&w).unwrap().map, "Duel");
    let mut cells = vec![0u8; 2 * 169];
    cells[169 + 11 * 13 + 6] = rezzo::FLAG;
    cells[169 + 12] = rezzo::BASE + 2;
    let tick = map(vec![
        ("type", Value::Str("tick".into())),
        ("tick", Value::Int(41)),
        ("budget_ms", Value::Int(63)),
        ("agents", Value::Array(vec![Value::Int(0), Value::Int(3)])),
        ("cells", Value::Bin(cells)),
        ("damage", Value::Bin(vec![0; 2 * 169])),
    ]);
    let v = <rezzo::Rezzo as Game>::view(&one(&tick), &w).unwrap();
    assert_eq!(v.agents, vec![0, 3]);
    assert_eq!((v.ahead(1), v.ahead(0)), (rezzo::FLAG, rezzo::BLANK));
    assert_eq!(rezzo::kind(v.at(1, 12, 6)), rezzo::BASE);
    assert_eq!(rezzo::owner(v.at(1, 12, 6)), Some(2));
    assert_eq!(<rezzo::Rezzo as Game>::noop(&v), vec![0, 0]);
    let moves = one(&Moves { kind: "moves", tick: 41, moves: &vec![1, 5], debug: None });
    assert_eq!(moves.value.get("moves"), Some(&Value::Array(vec![Value::Int(1), Value::Int(5)])));
    assert_eq!(moves.value.get("tick"), Some(&Value::Int(41)));
    // A tick whose planes do not fit its agents is refused, not read out of bounds.
    let short = map(vec![
        ("type", Value::Str("tick".into())),
        ("tick", Value::Int(1)),
        ("budget_ms", Value::Int(63)),
        ("agents", Value::Array(vec![Value::Int(0)])),
        ("cells", Value::Bin(vec![0; 10])),
        ("damage", Value::Bin(vec![0; 10])),
    ]);
    assert!(<rezzo::Rezzo as Game>::view(&one(&short), &w).is_err());
}

#[test]
fn cata_view_and_legal_moves() {
    let mut board = vec![0u8; 512];
    board[0] = 0x80;
    let rule = (0..32).map(|i| Value::Int(if i >= 16 { 1 } else { 0 })).collect();
    let tick = map(vec![
        ("type", Value::Str("tick".into())),
        ("tick", Value::Int(5)),
        ("budget_ms", Value::Int(1000)),
        ("seat", Value::Int(0)),
        ("size", Value::Int(64)),
        ("board", Value::Bin(board)),
        ("rule", Value::Array(rule)),
        ("health", Value::Array(vec![Value::Int(100), Value::Int(200)])),
        ("cells_per_hp", Value::Int(1024)),
        ("turn", Value::Int(2)),
        ("move", Value::Int(1)),
        ("moves_left", Value::Int(2)),
        ("blocked", Value::Bool(false)),
        ("meditated", Value::Bool(false)),
        ("opponent_meditated", Value::Bool(false)),
        (
            "refused",
            map(vec![
                ("tick", Value::Int(3)),
                ("move", Value::Array(vec![Value::Int(1), Value::Int(2)])),
                ("reason", Value::Str("own half".into())),
            ]),
        ),
        ("last_reaction", Value::Nil),
    ]);
    let v = <cata::Cata as Game>::view(&one(&tick), &welcome()).unwrap();
    assert!(v.white(0, 0) && !v.white(0, 1) && !v.white(63, 63));
    let refused = v.refused.clone().unwrap();
    assert_eq!((refused.mv, refused.reason.as_str()), ((1, 2), "own half"));
    let legal = v.legal_moves();
    assert_eq!(legal.len(), 18);
    assert_eq!((legal[0], legal[16], legal[17]), ((cata::STRIKE, 16), (cata::MEDITATE, 0), (cata::PASS, 0)));
    let moves = one(&Moves { kind: "moves", tick: 5, moves: &(1, 18), debug: None });
    assert_eq!(moves.value.get("moves"), Some(&Value::Array(vec![Value::Int(1), Value::Int(18)])));
}

#[test]
fn plain_views_hold_the_whole_tick() {
    let tick = map(vec![
        ("type", Value::Str("tick".into())),
        ("tick", Value::Int(0)),
        ("budget_ms", Value::Int(2000)),
        ("row", Value::Bin(vec![5, 4, 0, 5])),
    ]);
    let v = <plain::Plain as Game>::view(&one(&tick), &welcome()).unwrap();
    assert_eq!(v.raw.get("row").and_then(Value::as_bytes), Some(&[5u8, 4, 0, 5][..]));
    let moves = one(&Moves { kind: "moves", tick: 0, moves: &Value::Array(vec![Value::Int(2)]), debug: None });
    assert_eq!(moves.value.get("moves"), Some(&Value::Array(vec![Value::Int(2)])));
}

#[test]
fn the_retry_rule_and_the_backoff() {
    for code in ["shutdown", "busy", "queue_full", "too_many_connections", "locked_out"] {
        assert!(comes_back(code));
    }
    for code in ["bad_hello", "tls_required", "bad_version", "internal", "seat_taken"] {
        assert!(!comes_back(code));
    }
    let mut b = Backoff::new(1.0, 60.0, 7);
    let (w1, w2, w3) = (b.next(""), b.next(""), b.next(""));
    assert!((0.5..=1.0).contains(&w1) && (1.0..=2.0).contains(&w2) && (2.0..=4.0).contains(&w3));
    for _ in 0..20 {
        assert!(b.next("") <= 60.0);
    }
    assert!(b.next("too many wrong tokens; refused for another 90 s") >= 90.0);
    b.reset();
    assert!((0.5..=1.0).contains(&b.next("")));
}

#[test]
fn options_the_handover_and_hello() {
    // One test, since it changes the process's environment.
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(Options::parse(&args(&["--port", "99999"]), "b").unwrap_err().contains("1-65535"));
    assert!(Options::parse(&args(&["--ladder", "--matches", "2"]), "b").unwrap_err().contains("give one of them"));
    assert!(Options::parse(&args(&["--tls"]), "b").unwrap_err().contains("TLS proxy"));
    // An open descriptor holding the token line, as the launcher's pipe does (a file stands in for it).
    let dir = std::env::temp_dir().join(format!("cellarena-kit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "0123456789abcdef0123456789abcdef\nrest").unwrap();
    use std::os::unix::io::IntoRawFd;
    let fd = std::fs::File::open(&path).unwrap().into_raw_fd();
    std::env::set_var("CELLARENA_TOKEN_FD", fd.to_string());
    std::env::set_var("CELLARENA_TOKEN", "from-env");
    std::env::set_var("CELLARENA_PORT", "4242");
    let o = Options::parse(&args(&["--name", "x", "--matches", "3"]), "b").unwrap();
    assert_eq!((o.port, o.name.as_str(), o.matches, o.ladder), (4242, "x", 3, false));
    assert_eq!(o.token.as_deref(), Some("0123456789abcdef0123456789abcdef"));
    assert!(!std::path::Path::new(&format!("/proc/self/fd/{}", fd)).exists(), "the descriptor is closed");
    std::env::remove_var("CELLARENA_TOKEN_FD");
    assert_eq!(seat_token().as_deref(), Some("from-env"));
    std::env::remove_var("CELLARENA_TOKEN");
    std::env::remove_var("CELLARENA_PORT");
    let hello = one(&Hello::new(&o.name, "rezzo", o.token.as_deref()));
    assert_eq!(hello.value.get("protocol"), Some(&Value::Int(1)));
    assert_eq!(hello.value.get("token").and_then(Value::as_str), Some("0123456789abcdef0123456789abcdef"));
    assert_eq!(hello.value.get("accepts"), Some(&Value::Array(vec![Value::Str("redirect".into())])));
    // A handed connection owns the seat: no token is read; a descriptor that is no socket is refused.
    std::env::set_var("CELLARENA_SOCKET_FD", "0");
    let handed = Options::parse(&args(&[]), "b").unwrap();
    assert_eq!((handed.handed_fd, handed.token), (Some(0), None));
    std::env::set_var("CELLARENA_SOCKET_FD", "zero");
    assert!(Options::parse(&args(&[]), "b").unwrap_err().contains("not a descriptor number"));
    std::env::remove_var("CELLARENA_SOCKET_FD");
    // The back-off's first round, shortened for tests.
    assert_eq!(Options::parse(&args(&[]), "b").unwrap().backoff_first, 1.0);
    std::env::set_var("CELLARENA_BACKOFF_FIRST_S", "0.05");
    assert_eq!(Options::parse(&args(&[]), "b").unwrap().backoff_first, 0.05);
    std::env::set_var("CELLARENA_BACKOFF_FIRST_S", "0");
    assert!(Options::parse(&args(&[]), "b").unwrap_err().contains("CELLARENA_BACKOFF_FIRST_S must be seconds"));
    std::env::remove_var("CELLARENA_BACKOFF_FIRST_S");
    let file = std::fs::File::open("/proc/self/status").unwrap();
    use std::os::unix::io::AsRawFd;
    assert!(crate::wire::Connection::adopt(file.as_raw_fd()).err().unwrap().to_string().contains("not a socket"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn debug_drawing_is_kept_to_the_caps_and_goes_with_the_answer() {
    let mut d = Debug::new();
    let (mut said, quiet) = (false, |_: &str| {});
    assert!(one(&crate::bot::reply_to(3, &vec![0], &mut d, &mut said, &quiet)).value.get("debug").is_none());
    d.mark_for(7, [11, 6], "Red", "ahead");
    d.mark([1, 2], "#ABCDEF", "a label longer than sixteen");
    d.mark([1, 2], "no-such-colour", ""); // dropped: no colour
    d.mark([1 << 31, 0], "red", ""); // dropped: no cell
    d.mark([1, 2], "red", "bad\nlabel"); // dropped: not printable
    d.mark([1, 2], "red", "été");
    d.line([12, 6], [0, 6], "#00ff00");
    d.line_for(2, [0, 0], [1, 1], "blue");
    d.log("first\nsecond\u{1}");
    assert_eq!(d.dropped, 3);
    assert!(d.first_problem.as_deref().unwrap().starts_with("mark([1, 2], \"no-such-colour\")"));
    let got = one(&crate::bot::reply_to(41, &vec![1], &mut d, &mut said, &quiet)).value;
    assert!(said, "the first problem is said");
    let s = |v: &str| Value::Str(v.into());
    let cell = |a: i64, b: i64| Value::Array(vec![Value::Int(a), Value::Int(b)]);
    let expected = map(vec![
        (
            "marks",
            Value::Array(vec![
                map(vec![("cell", cell(11, 6)), ("colour", s("#e6194b")), ("label", s("ahead")), ("agent", Value::Int(7))]),
                map(vec![("cell", cell(1, 2)), ("colour", s("#abcdef")), ("label", s("a label longer t"))]),
                map(vec![("cell", cell(1, 2)), ("colour", s("#e6194b")), ("label", s("été"))]),
            ]),
        ),
        (
            "lines",
            Value::Array(vec![
                map(vec![("from", cell(12, 6)), ("to", cell(0, 6)), ("colour", s("#00ff00"))]),
                map(vec![("from", cell(0, 0)), ("to", cell(1, 1)), ("colour", s("#4363d8")), ("agent", Value::Int(2))]),
            ]),
        ),
        ("text", Value::Array(vec![s("first"), s("second ")])),
    ]);
    assert_eq!(got.get("debug"), Some(&expected));
    assert_eq!(got.get("moves"), Some(&Value::Array(vec![Value::Int(1)])));
    // The caps: 256 marks, 64 lines, 1 KiB of text a tick; a new tick starts clean.
    for i in 0..266 {
        d.mark([i, i], "red", "");
    }
    for _ in 0..69 {
        d.line([0, 0], [1, 1], "red");
    }
    d.log(&"z".repeat(1000));
    d.log(&"z".repeat(100)); // past 1 KiB in all
    d.log("last");
    assert_eq!(d.dropped, 3 + 10 + 5 + 1);
    let capped = d.take().unwrap();
    assert_eq!((capped.marks.len(), capped.lines.len()), (debug::MAX_MARKS, debug::MAX_LINES));
    assert_eq!(capped.text, vec!["z".repeat(1000), "last".to_string()]);
    assert!(d.take().is_none() && d.is_empty());
}

#[test]
fn a_drawing_that_would_pass_the_frame_limit_goes_and_the_move_stays() {
    let mut d = Debug::new();
    let worst = "😀".repeat(16); // 4 bytes a character
    for _ in 0..300 {
        d.mark_for(1 << 40, [-(1 << 31), (1 << 31) - 1], "red", &worst);
    }
    for _ in 0..100 {
        d.line_for(1 << 40, [0, 0], [1, 1], "red");
    }
    let said_lines = std::cell::RefCell::new(Vec::new());
    let log = |text: &str| said_lines.borrow_mut().push(text.to_string());
    let mut said = false;
    // At the caps a drawing fits; a huge answer (a plain game may answer anything) leaves no room.
    let fits = one(&crate::bot::reply_to(1, &vec![1], &mut d, &mut said, &log)).value;
    d.mark([0, 0], "red", "");
    let huge = Value::Str("x".repeat(65500));
    let sent = crate::bot::reply_to(2, &huge, &mut d, &mut said, &log);
    assert!(fits.get("debug").is_some() && sent.debug.is_none());
    assert_eq!(one(&sent).value.get("moves"), Some(&huge));
    assert_eq!(d.dropped, (300 - 256) + (100 - 64) + 1, "the drawing that went counts");
    let lines = said_lines.borrow();
    assert_eq!(lines.len(), 1, "said once a match: {:?}", lines);
    assert!(lines[0].starts_with("debug drawing dropped: more than 256 marks in one tick (only the first"));
}
