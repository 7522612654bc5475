//! The wire: one TCP connection carrying length-prefixed msgpack frames (docs/protocol.md, "Frames").

use crate::value::Value;
use std::collections::VecDeque;
use std::fmt;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The protocol version this kit speaks.
pub const PROTOCOL: i64 = 1;
/// A client frame holds at most this many body bytes.
pub const MAX_CLIENT_FRAME: usize = 64 * 1024;
/// A server frame holds at most this many body bytes.
pub const MAX_SERVER_FRAME: usize = 64 * 1024 * 1024;

/// What went wrong, in one line. `Server` is an `error` message (docs/protocol.md lists the codes).
#[derive(Debug, Clone, PartialEq)]
pub enum ClientError {
    /// The connection could not be opened: worth another try in ladder mode.
    Connect(String),
    /// The connection ended without `end` or `error`.
    Closed(String),
    /// The connection was lost after the match's `welcome`: a ladder keeps the seat for its grace,
    /// and the bot may take it back with the same token (docs/protocol.md, "Joining a ladder").
    Lost(String),
    /// The server sent bytes this kit cannot read: retrying cannot help.
    Protocol(String),
    /// The server sent an `error` message.
    Server { code: String, message: String },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ClientError::Connect(s) | ClientError::Closed(s) | ClientError::Lost(s) | ClientError::Protocol(s) => {
                f.write_str(s)
            }
            ClientError::Server { code, message } => write!(f, "the server sent error {}: {}", code, message),
        }
    }
}

impl std::error::Error for ClientError {}

/// One message: its `type`, its body (to decode into a typed struct) and its value.
#[derive(Clone, Debug)]
pub struct Message {
    pub kind: String,
    pub body: Vec<u8>,
    pub value: Value,
}

impl Message {
    /// The body as a typed struct; a `Protocol` error naming the message when it does not fit.
    pub fn decode<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, ClientError> {
        rmp_serde::from_slice(&self.body)
            .map_err(|e| ClientError::Protocol(format!("{}: a field is missing or of the wrong type ({})", self.kind, e)))
    }
}

/// Frames in, messages out: feed bytes as they arrive.
#[derive(Default)]
pub struct FrameReader {
    buffer: Vec<u8>,
}

impl FrameReader {
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Message>, ClientError> {
        self.buffer.extend_from_slice(data);
        let mut out = Vec::new();
        let mut at = 0;
        while self.buffer.len() - at >= 4 {
            let b = &self.buffer[at..at + 4];
            let length = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            if length > MAX_SERVER_FRAME {
                return Err(ClientError::Protocol(format!("a server frame of {} bytes is over the limit", length)));
            }
            if self.buffer.len() - at - 4 < length {
                break;
            }
            let body = self.buffer[at + 4..at + 4 + length].to_vec();
            let value: Value = rmp_serde::from_slice(&body)
                .map_err(|e| ClientError::Protocol(format!("a server frame is not valid msgpack ({})", e)))?;
            if !matches!(value, Value::Map(_)) {
                return Err(ClientError::Protocol("a server frame is not a map".into()));
            }
            let kind = match value.get("type") {
                Some(Value::Str(s)) => s.clone(),
                _ => return Err(ClientError::Protocol("a server message has no string 'type'".into())),
            };
            out.push(Message { kind, body, value });
            at += 4 + length;
        }
        self.buffer.drain(..at);
        Ok(out)
    }
}

/// A message as a frame: the 4-byte big-endian length, then the body (a map with string keys).
pub fn frame<T: serde::Serialize>(message: &T) -> Result<Vec<u8>, ClientError> {
    let body = rmp_serde::to_vec_named(message).map_err(|e| ClientError::Protocol(format!("cannot encode ({})", e)))?;
    if body.len() > MAX_CLIENT_FRAME {
        return Err(ClientError::Protocol(format!(
            "a client frame may hold {} bytes, this one {}",
            MAX_CLIENT_FRAME,
            body.len()
        )));
    }
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// One open connection. `recv` returns `Server` for an `error`, `Closed` for an early end.
pub struct Connection {
    stream: TcpStream,
    address: String,
    reader: FrameReader,
    inbox: VecDeque<Message>,
    eof: bool,
    ended: bool,
    started: bool,
    first_read: bool,
    send_failed: Option<String>,
}

impl Connection {
    /// Connect within 10 s.
    pub fn open(host: &str, port: u16) -> Result<Connection, ClientError> {
        let address = format!("{}:{}", host, port);
        let hint = "is a cellarena server listening there? (--host/--port, CELLARENA_HOST/PORT)";
        let addrs = (host, port)
            .to_socket_addrs()
            .map_err(|e| ClientError::Connect(format!("could not connect to {}: unknown host ({})", address, e)))?;
        let mut why = String::from("no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(10)) {
                Ok(stream) => {
                    // Small moves frames must not wait in Nagle's buffer.
                    let _ = stream.set_nodelay(true);
                    return Ok(Connection::over(stream, address));
                }
                Err(e) => why = e.to_string(),
            }
        }
        Err(ClientError::Connect(format!("could not connect to {}: {}; {}", address, why, hint)))
    }

    /// Adopt descriptor `fd`, a connected stream socket that the program which started this bot handed
    /// over (CELLARENA_SOCKET_FD, docs/protocol.md): it already owns the bot's seat. Err when `fd` is
    /// not an open socket.
    pub fn adopt(fd: i32) -> Result<Connection, ClientError> {
        use std::os::unix::io::FromRawFd;
        // Only an open socket: taking ownership of anything else would be unsound or useless.
        let target = std::fs::read_link(format!("/proc/self/fd/{}", fd))
            .map_err(|_| ClientError::Connect(format!("descriptor {} is not open", fd)))?;
        if !target.to_string_lossy().starts_with("socket:") {
            return Err(ClientError::Connect(format!("descriptor {} is not a socket ({})", fd, target.display())));
        }
        // SAFETY: the launcher gave this process the descriptor, an open socket that nothing else in it
        // uses; the stream closes it when dropped.
        let stream = unsafe { TcpStream::from_raw_fd(fd) };
        let _ = stream.set_nodelay(true); // fails harmlessly on a Unix socket
        let address = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "the handed-over connection".into());
        Ok(Connection::over(stream, address))
    }

    /// A connection on `stream`, nothing read or sent yet: what `open` and `adopt` both make.
    fn over(stream: TcpStream, address: String) -> Connection {
        Connection {
            stream,
            address,
            reader: FrameReader::default(),
            inbox: VecDeque::new(),
            eof: false,
            ended: false,
            started: false,
            first_read: true,
            send_failed: None,
        }
    }

    /// A `welcome` came: a connection lost from now on is a seat that may be taken back.
    pub fn started(&mut self) {
        self.started = true;
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// Send one message. A failed send is not an error yet: the server may have said why before it
    /// closed, and `recv` reports that (or the lost connection).
    pub fn send<T: serde::Serialize>(&mut self, message: &T) -> Result<(), ClientError> {
        let bytes = frame(message)?;
        if let Err(e) = self.stream.write_all(&bytes) {
            self.send_failed = Some(e.to_string());
        }
        Ok(())
    }

    /// The next message, waiting as long as it takes (a ladder's queue may take minutes).
    pub fn recv(&mut self) -> Result<Message, ClientError> {
        while self.inbox.is_empty() {
            if self.eof {
                let when = if self.ended { "after" } else { "before" };
                let extra = self.send_failed.as_ref().map(|e| format!(" (a send failed: {})", e)).unwrap_or_default();
                let text = format!("the server at {} closed the connection {} the match ended{}", self.address, when, extra);
                return Err(if self.started && !self.ended { ClientError::Lost(text) } else { ClientError::Closed(text) });
            }
            let mut buf = [0u8; 1 << 16];
            let n = match self.stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            if n == 0 {
                self.eof = true;
                continue;
            }
            if self.first_read {
                self.first_read = false;
                // A TLS server answers plain bytes with a TLS record, which would read as a huge frame.
                if n >= 2 && (buf[0] == 0x15 || buf[0] == 0x16) && buf[1] == 0x03 {
                    return Err(ClientError::Connect(format!(
                        "the server at {} speaks TLS; this kit speaks plain TCP: run a local TLS proxy (see the kit's README)",
                        self.address
                    )));
                }
            }
            let got = self.reader.feed(&buf[..n])?;
            self.inbox.extend(got);
        }
        let message = self.inbox.pop_front().expect("not empty");
        match message.kind.as_str() {
            "error" => {
                let _ = self.stream.shutdown(Shutdown::Both);
                let text = |k: &str| message.value.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                Err(ClientError::Server { code: text("code"), message: text("message") })
            }
            "end" => {
                self.ended = true;
                Ok(message)
            }
            _ => Ok(message),
        }
    }
}
