// One connection to a cellarena server, over TCP or TLS: connect, send messages, and wait for the next
// one. Errors are classes, so that the loop in bot.ts can tell "try again" from "stop".

import * as fs from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";

import { encodeFrame, FrameReader, type Fields, MAX_SERVER_FRAME, ProtocolError } from "./protocol.js";

/** Milliseconds to wait for the TCP connection (and the TLS handshake) to open. */
export const CONNECT_TIMEOUT_MS = 10000;
/** TCP keep-alive probes after this much silence: a bot queued on a ladder hears nothing for minutes,
 * and without probes a network that dropped the connection would leave it waiting forever. */
const KEEP_ALIVE_MS = 30000;
// Errors of the network itself; any other error before a TLS handshake ends is the handshake refused.
const NETWORK_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/** Base of the connection's errors; the message is one line that says what happened. */
export class ClientError extends Error {
  override name = "ClientError";
}

/** The connection could not be opened, or was lost: another try may meet a server. */
export class ConnectError extends ClientError {
  override name = "ConnectError";
}

/** The TLS handshake was refused (the certificate is not trusted or not for this host, or the server
 * does not speak TLS): trying again cannot help until the settings change. */
export class TLSError extends ClientError {
  override name = "TLSError";
}

/** The connection ended without an `end` or `error` message. */
export class ConnectionClosedError extends ClientError {
  override name = "ConnectionClosedError";
}

/** The server sent an `error` message (and closes the connection next). */
export class ServerError extends ClientError {
  override name = "ServerError";
  constructor(
    readonly code: string,
    readonly serverMessage: string,
  ) {
    super(`the server sent error '${code}': ${serverMessage}`);
  }
}

/** TLS settings: `ca` is a PEM file of the CA certificates to trust instead of Node's store. */
export interface TlsOptions {
  ca?: string;
}

/** Reads a CA file for `TlsOptions.ca`; a TLSError names the file when it cannot be read. */
export function readCa(path: string): Buffer {
  try {
    return fs.readFileSync(path);
  } catch (err) {
    throw new TLSError(`cannot read CA certificates from ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
}

export class Connection {
  /** Set once an `end` has been read: the server closes the connection after it. */
  ended = false;
  private readonly reader = new FrameReader(MAX_SERVER_FRAME);
  private readonly inbox: Fields[] = [];
  private failure: Error | undefined;
  private waiter: (() => void) | undefined;
  private heard = false;

  private constructor(
    private readonly sock: net.Socket,
    readonly host: string,
    readonly port: number,
    readonly tls: boolean,
  ) {
    sock.on("data", (chunk: Buffer) => this.onData(chunk));
    sock.on("error", (err) => this.fail(new ConnectionClosedError(`the connection to ${this.address} was lost (${err.message})`)));
    sock.on("close", () => {
      const when = this.ended ? "after the match ended" : "before the match ended";
      const hint = !this.heard && !this.tls ? "; if that port serves TLS, connect with --tls" : "";
      this.fail(new ConnectionClosedError(`the server at ${this.address} closed the connection ${when}${hint}`));
    });
  }

  get address(): string {
    return `${this.host}:${this.port}`;
  }

  /** Adopts descriptor `fd`, a connection to the match server that the program which started this bot
   * made and handed over (CELLARENA_SOCKET_FD, docs/protocol.md): it already owns the bot's seat. A
   * ConnectError when `fd` is not an open socket. */
  static adopt(fd: number): Connection {
    let sock: net.Socket;
    try {
      const stat = fs.fstatSync(fd);
      if (!stat.isSocket()) throw new Error("not a socket");
      sock = new net.Socket({ fd, readable: true, writable: true });
    } catch (err) {
      throw new ConnectError(`descriptor ${fd} is not an open socket (${(err as Error).message})`);
    }
    sock.setNoDelay(true);
    return new Connection(sock, sock.remoteAddress ?? "the handed-over connection", sock.remotePort ?? 0, false);
  }

  /** Opens a connection (with a TLS handshake when `tlsOptions` is given, checking the server's
   * certificate and name); a ConnectError or TLSError says what failed and what to try. */
  static open(host: string, port: number, tlsOptions?: TlsOptions, game = "GAME"): Promise<Connection> {
    const address = `${host}:${port}`;
    const hint =
      `is a cellarena server listening there? Start one with \`cellarena serve ${game}\`, or point the bot ` +
      "elsewhere with --host/--port (or CELLARENA_HOST/CELLARENA_PORT)";
    return new Promise((resolve, reject) => {
      let sock: net.Socket;
      const ca = tlsOptions?.ca !== undefined ? readCa(tlsOptions.ca) : undefined;
      const ready = (): void => {
        sock.removeAllListeners("error");
        sock.removeAllListeners("timeout");
        sock.setTimeout(0); // from now on a bot may wait any time for its match
        resolve(new Connection(sock, host, port, tlsOptions !== undefined));
      };
      if (tlsOptions !== undefined) {
        const options: tls.ConnectionOptions = { host, port, ca };
        if (!net.isIP(host)) options.servername = host; // SNI takes names, not addresses
        sock = tls.connect(options, ready);
      } else {
        sock = net.connect({ host, port }, ready);
      }
      sock.setNoDelay(true); // moves are small and urgent: no Nagle delay
      sock.setKeepAlive(true, KEEP_ALIVE_MS);
      sock.setTimeout(CONNECT_TIMEOUT_MS);
      sock.on("timeout", () => {
        sock.destroy();
        reject(new ConnectError(`could not connect to ${address}: no answer in ${CONNECT_TIMEOUT_MS / 1000} s; ${hint}`));
      });
      sock.on("error", (err: NodeJS.ErrnoException) => {
        sock.destroy();
        if (tlsOptions !== undefined && !NETWORK_ERRORS.has(err.code ?? "")) {
          reject(
            new TLSError(
              `TLS handshake with ${address} failed: ${err.message}; check that --tls-ca names the CA that ` +
                "signed the server's certificate (without it Node's CA store is used) and that --host is a name " +
                "the certificate is for; if that port is a plain server, drop --tls",
            ),
          );
        } else if (err.code === "ECONNREFUSED") {
          reject(new ConnectError(`could not connect to ${address}: connection refused; ${hint}`));
        } else {
          reject(new ConnectError(`could not connect to ${address}: ${err.message}; ${hint}`));
        }
      });
    });
  }

  /** Frames and sends one message. A failed send is not raised here: the next `recv` reports why the
   * connection ended, after any frames (an `end`, an `error`) the server sent before closing. */
  send(message: object): void {
    if (!this.sock.destroyed) this.sock.write(encodeFrame(message));
  }

  /** Whether another message has already arrived (the loop skips to the newest tick with it). */
  hasMessage(): boolean {
    return this.inbox.length > 0;
  }

  /** The next message without taking it, if one has arrived. */
  peek(): Fields | undefined {
    return this.inbox[0];
  }

  /** The next message, waiting as long as it takes (a bot may wait any time for its match). An `error`
   * message is thrown as ServerError, a closed connection as ConnectionClosedError. */
  async recv(): Promise<Fields> {
    while (this.inbox.length === 0) {
      if (this.failure !== undefined) throw this.failure;
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
    const message = this.inbox.shift() as Fields;
    if (message.type === "error") {
      this.close();
      throw new ServerError(String(message.code ?? "?"), String(message.message ?? ""));
    }
    if (message.type === "end") this.ended = true;
    return message;
  }

  close(): void {
    this.sock.destroy();
  }

  private onData(chunk: Buffer): void {
    if (this.failure !== undefined) return;
    if (!this.heard && !this.tls && chunk.length >= 2 && (chunk[0] === 0x15 || chunk[0] === 0x16) && chunk[1] === 0x03) {
      // A TLS record (an alert or a handshake) where a frame length belongs: a TLS server.
      this.fail(new TLSError(`the server at ${this.address} speaks TLS; connect with --tls (and --tls-ca PATH for its CA)`));
      this.sock.destroy();
      return;
    }
    this.heard = true;
    try {
      this.inbox.push(...this.reader.feed(chunk));
    } catch (err) {
      this.fail(err as ProtocolError);
      this.sock.destroy();
    }
    this.wake();
  }

  private fail(err: Error): void {
    if (this.failure === undefined) this.failure = err;
    this.wake();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter) waiter();
  }
}
