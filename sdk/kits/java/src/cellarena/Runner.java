package cellarena;

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The bot loop: the command line and CELLARENA_* variables, the connection (or else the seat token) a
 * launcher hands over, TLS, one match or many, ladder mode with back-off and the retry rule of RETRY_LATER,
 * a ladder's redirects, a seat taken back after a lost connection, and SIGTERM.
 */
public final class Runner {
    /**
     * The refusals that mean "not now": a ladder bot waits and comes back. Any other error before a match
     * means the bot or its token is wrong, and retrying cannot help. Mirrors RETRY_LATER in
     * cellarena/sdk/protocol/codes.py (docs/protocol.md, "Joining a ladder").
     */
    public static final List<String> RETRY_LATER = Arrays.asList("shutdown", "busy", "queue_full", "too_many_connections", "locked_out");

    public static final String USAGE = "options: --host H --port P (CELLARENA_HOST/PORT, default 127.0.0.1:7777) --name N (CELLARENA_NAME)\n"
            + "         --token T | --token-file PATH (else the launcher's CELLARENA_TOKEN_FD, or CELLARENA_TOKEN)\n"
            + "         --matches N (play N matches) | --ladder (play until stopped, backing off after refusals)\n"
            + "         --tls (the system's trust store) | --tls-ca PATH (trust only this PEM CA file) -q\n"
            + "         CELLARENA_SOCKET_FD=0: standard input is a connection the launcher made, owning the seat (the first match)\n"
            + "         CELLARENA_BACKOFF_FIRST_S: the first back-off's longest wait (default 1 s; tests set less)";
    /** Connections to a match host tried before a redirected match is given up. */
    public static final int FOLLOW_ATTEMPTS = 3;
    /** The waits (ms) before each try to take back a seat lost mid-match, while a ladder keeps it (its grace). */
    static final long[] REJOIN_WAITS_MS = {250, 500, 1000};

    private Runner() {}

    public static boolean comesBack(String code) {
        return RETRY_LATER.contains(code);
    }

    /** A bad command line: exit status 64. */
    public static final class UsageException extends Exception {
        public UsageException(String message) {
            super(message);
        }
    }

    static String env(String name) {
        String v = System.getenv(name);
        return v == null ? "" : v.trim();
    }

    /**
     * The seat token a launcher hands over: one line read from the pipe CELLARENA_TOKEN_FD names
     * (docs/protocol.md, "Bots that cellarena starts"); else CELLARENA_TOKEN. Java cannot close a
     * descriptor by number: it reads the pipe through /proc/self/fd, which drains it, so nothing is
     * left in it for anyone else.
     */
    public static String seatToken() {
        String fd = env("CELLARENA_TOKEN_FD");
        if (fd.matches("\\d+")) {
            try (InputStream pipe = new FileInputStream("/proc/self/fd/" + fd)) {
                ByteArrayOutputStream line = new ByteArrayOutputStream();
                int b;
                while (line.size() < 4096 && (b = pipe.read()) != -1 && b != '\n') line.write(b);
                String token = line.toString(StandardCharsets.US_ASCII).trim();
                if (!token.isEmpty()) return token;
            } catch (IOException e) {
                // not open: fall back to the variable
            }
        }
        String token = env("CELLARENA_TOKEN");
        return token.isEmpty() ? null : token;
    }

    /** A TLS context checking the server's certificate: against the system's store, or the PEM CA file alone. */
    public static SSLContext tlsContext(String caFile) throws ClientException.Tls {
        try {
            SSLContext context = SSLContext.getInstance("TLS");
            if (caFile == null) {
                context.init(null, null, null);
                return context;
            }
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int n = 0;
            try (InputStream in = Files.newInputStream(Paths.get(caFile))) {
                for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(in))
                    store.setCertificateEntry("ca" + n++, cert);
            }
            if (n == 0) throw new ClientException.Tls("--tls-ca " + caFile + ": no certificate in it (a PEM file is wanted)");
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            context.init(null, tmf.getTrustManagers(), null);
            return context;
        } catch (IOException | GeneralSecurityException e) {
            throw new ClientException.Tls("cannot read CA certificates from " + caFile + ": " + e.getMessage() + " (a PEM file is wanted)");
        }
    }

    /** What the command line and the environment say: flags win over CELLARENA_* variables, which win over the defaults. */
    public static final class Options {
        public String host = "127.0.0.1";
        public int port = 7777;
        public String name;
        public String token;
        public int matches = 1;
        public boolean ladder, quiet, tls;
        /** CELLARENA_SOCKET_FD=0: standard input is a connection the launcher made, owning the seat. */
        public boolean handed;
        public String tlsCa;
        /**
         * CELLARENA_BACKOFF_FIRST_S: the longest wait of the back-off's first round (1 s). For tests, which
         * set milliseconds so that a retry is quick; a server's "for another N s" is still waited out.
         */
        public double backoffFirst = 1.0;

        public static Options parse(String[] args, String defaultName) throws UsageException {
            Options o = new Options();
            o.name = defaultName;
            if (!env("CELLARENA_HOST").isEmpty()) o.host = env("CELLARENA_HOST");
            if (!env("CELLARENA_PORT").isEmpty()) o.port = port(env("CELLARENA_PORT"), "CELLARENA_PORT");
            if (!env("CELLARENA_NAME").isEmpty()) o.name = env("CELLARENA_NAME");
            if (!env("CELLARENA_BACKOFF_FIRST_S").isEmpty()) o.backoffFirst = backoffFirst(env("CELLARENA_BACKOFF_FIRST_S"));
            String tokenFlag = null, tokenFile = null;
            boolean matchesGiven = false;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                boolean takesValue = Arrays.asList("--host", "--port", "--name", "--token", "--token-file", "--matches", "--tls-ca").contains(a);
                if (takesValue && i + 1 >= args.length) throw new UsageException(a + " needs a value");
                switch (a) {
                    case "--host": o.host = args[++i]; break;
                    case "--port": o.port = port(args[++i], "--port"); break;
                    case "--name": o.name = args[++i]; break;
                    case "--token": tokenFlag = args[++i]; break;
                    case "--token-file": tokenFile = args[++i]; break;
                    case "--matches":
                        String v = args[++i];
                        try {
                            o.matches = Integer.parseInt(v);
                        } catch (NumberFormatException e) {
                            o.matches = 0;
                        }
                        if (o.matches < 1) throw new UsageException("--matches must be 1 or more, got " + v);
                        matchesGiven = true;
                        break;
                    case "--ladder": o.ladder = true; break;
                    case "--tls": o.tls = true; break;
                    case "--tls-ca": o.tlsCa = args[++i]; o.tls = true; break;
                    case "-q": case "--quiet": o.quiet = true; break;
                    case "-h": case "--help": throw new UsageException("help");
                    default: throw new UsageException("unknown option " + a);
                }
            }
            if (matchesGiven && o.ladder)
                throw new UsageException("--matches N plays N matches and --ladder plays until stopped: give one of them");
            if (tokenFlag != null && tokenFile != null) throw new UsageException("--token and --token-file: give one of them");
            if (o.name.isEmpty() || o.name.codePointCount(0, o.name.length()) > 64)
                throw new UsageException("--name must be 1 to 64 characters");
            String handed = env("CELLARENA_SOCKET_FD");
            if (!handed.isEmpty()) {
                if (!handed.equals("0"))
                    throw new UsageException("CELLARENA_SOCKET_FD: Java adopts a handed connection only as descriptor 0 "
                            + "(standard input), got '" + handed + "'; unset it to connect to --host/--port instead");
                o.handed = true;
            }
            if (tokenFile != null) {
                try {
                    o.token = new String(Files.readAllBytes(Path.of(tokenFile)), StandardCharsets.UTF_8).trim();
                } catch (IOException e) {
                    throw new UsageException("--token-file " + tokenFile + ": cannot read it (" + e.getMessage() + ")");
                }
                if (o.token.isEmpty()) throw new UsageException("--token-file " + tokenFile + ": the file is empty");
            } else if (tokenFlag != null && !tokenFlag.trim().isEmpty()) {
                o.token = tokenFlag.trim();
            } else if (!o.handed) {  // the handed connection owns the seat: no token needed, none read
                o.token = seatToken();
            }
            return o;
        }

        static int port(String v, String what) throws UsageException {
            try {
                int p = Integer.parseInt(v);
                if (p >= 1 && p <= 65535) return p;
            } catch (NumberFormatException e) {
                // said below
            }
            throw new UsageException(what + " must be 1-65535, got " + v);
        }

        static double backoffFirst(String v) throws UsageException {
            try {
                double s = Double.parseDouble(v);
                if (s > 0 && s <= 60) return s;
            } catch (NumberFormatException e) {
                // said below
            }
            throw new UsageException("CELLARENA_BACKOFF_FIRST_S must be seconds in (0, 60], got " + v + "; unset it for 1 s");
        }
    }

    /** The hello: {@code accepts} says this kit follows a ladder's {@code redirect} (docs/protocol.md). */
    static MessageBufferPacker hello(String name, String game, String token) throws IOException {
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(token == null ? 5 : 6);
        p.packString("type").packString("hello");
        p.packString("protocol").packInt(Frames.PROTOCOL);
        p.packString("name").packString(name);
        p.packString("game").packString(game);
        p.packString("accepts").packArrayHeader(1).packString("redirect");
        if (token != null) p.packString("token").packString(token);
        return p;
    }

    static <V, A> MessageBufferPacker moves(Game<V, A> game, long tick, A answer) throws IOException {
        return moves(game, tick, answer, null);
    }

    /** A {@code moves} answer, with this tick's drawing when there is one. */
    static <V, A> MessageBufferPacker moves(Game<V, A> game, long tick, A answer, Debug debug) throws IOException {
        boolean drawn = debug != null && !debug.isEmpty();
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(drawn ? 4 : 3);
        p.packString("type").packString("moves");
        p.packString("tick").packLong(tick);
        p.packString("moves");
        game.pack(p, answer);
        if (drawn) {
            p.packString("debug");
            debug.pack(p);
        }
        return p;
    }

    /**
     * This tick's answer with its drawing, unless the frame would pass the protocol's limit (the caps keep
     * it far below; a huge answer could not): then the drawing goes, never the move. A dropped drawing is
     * said once a match ({@code said[0]}).
     */
    static <V, A> MessageBufferPacker answer(Game<V, A> game, long tick, A answer, Debug debug, boolean[] said, Consumer<String> log)
            throws IOException {
        if (debug.firstProblem != null && !said[0]) {
            said[0] = true;
            log.accept("debug drawing dropped: " + debug.firstProblem + " (only the first is reported; the move is kept)");
        }
        MessageBufferPacker body = moves(game, tick, answer, debug);
        body.flush();
        if (!debug.isEmpty() && body.getTotalWrittenBytes() > Frames.MAX_CLIENT_FRAME) {
            body = moves(game, tick, answer);
            debug.dropped++;
            if (!said[0]) {
                said[0] = true;
                log.accept("tick " + tick + ": the debug drawing would make the answer too large; sent without it");
            }
        }
        debug.clear();
        return body;
    }

    private static final class Log {
        final String name;
        final boolean quiet;

        Log(String name, boolean quiet) {
            this.name = name;
            this.quiet = quiet;
        }

        void say(String text, boolean always) {
            if (always || !quiet) System.err.println(name + ": " + text);
        }
    }

    /** One match on an open connection, hello sent: welcome, ticks, end. */
    static <V, A> End play(Game<V, A> game, Bot<V, A> bot, Connection conn, Log log) throws ClientException, IOException, Redirected {
        Welcome welcome = null;
        Debug debug = new Debug();
        boolean[] debugSaid = {false};
        while (true) {
            Message m = conn.recv();
            switch (m.type) {
                case "welcome":
                    welcome = new Welcome(m);
                    conn.started();
                    log.say("seat " + welcome.seat + " of match " + welcome.match, false);
                    try {
                        bot.onStart(welcome);
                    } catch (RuntimeException e) {
                        log.say("onStart failed: " + e, true);
                    }
                    break;
                case "tick":
                    if (welcome == null) throw new ClientException.Protocol("a tick came before the welcome");
                    V view = game.view(m, welcome);
                    A answer;
                    debug.clear();
                    try {
                        answer = bot.onTick(view, debug);
                    } catch (RuntimeException e) {
                        log.say("onTick failed at tick " + m.getLong("tick") + " (" + e + "); answering a no-op", true);
                        answer = game.noop(view);
                    }
                    conn.send(answer(game, m.getLong("tick"), answer, debug, debugSaid, text -> log.say(text, true)));
                    break;
                case "end":
                    End end = new End(m);
                    log.say("end after " + end.ticks + " ticks: " + end.result + " (rank " + end.rank + "), late " + end.late
                            + ", invalid " + end.invalid + ", illegal " + end.illegal, false);
                    try {
                        bot.onEnd(end);
                    } catch (RuntimeException e) {
                        log.say("onEnd failed: " + e, true);
                    }
                    return end;
                case "redirect":
                    if (welcome != null) throw new ClientException.Protocol("a redirect arrived in the middle of a match");
                    throw new Redirected(m);
                default:
                    log.say("ignoring a message of type '" + m.type + "' (a later protocol's)", false);
            }
        }
    }

    static String fixFor(String code) {
        switch (code) {
            case "bad_hello": return "; check the bot's token (--token-file, --token or CELLARENA_TOKEN) and its game";
            case "bad_version": return "; this kit speaks protocol 1: update it";
            case "tls_required": return "; connect with --tls";
            case "revoked": return "; ask the ladder's host for the bot's current token";
            case "paused": return "; the ladder paused this bot (the message says why); fix it, then resume it on your page on the ladder or with `cellarena ladder resume`";
            default: return "";
        }
    }

    /** Whether run() is playing: SIGTERM then stops the bot with status 0 (after run() it is the JVM's). */
    private static volatile boolean running;
    private static volatile int playedSoFar;

    /**
     * Play as the command line says: one match, --matches N, or --ladder; {@code make} gives a new bot
     * for each match. Returns the exit status: 0 when played or stopped by SIGTERM, 1 (one line on
     * stderr) when it cannot go on, 64 for a bad command line.
     */
    public static <V, A> int run(Game<V, A> game, String[] args, String defaultName, Supplier<? extends Bot<V, A>> make) {
        Options o;
        SSLContext tls = null;
        Connection handed = null;
        try {
            o = Options.parse(args, defaultName);
            if (o.tls) tls = tlsContext(o.tlsCa);
            if (o.handed) {
                try {
                    handed = Connection.adopt();
                } catch (ClientException e) {
                    throw new UsageException("CELLARENA_SOCKET_FD: " + e.getMessage() + "; unset it to connect to --host/--port instead");
                }
            }
        } catch (UsageException e) {
            if (e.getMessage().equals("help")) {
                System.out.println(USAGE);
                return 0;
            }
            System.err.println(defaultName + ": " + e.getMessage() + "\n" + USAGE);
            return 64;
        } catch (ClientException.Tls e) {
            System.err.println(defaultName + ": " + e.getMessage());
            return 64;
        }
        Log log = new Log(o.name, o.quiet);
        // SIGTERM runs the shutdown hooks: stop as asked, a normal exit, whatever the bot was waiting for.
        running = true;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (!running) return;
            log.say("stopped by SIGTERM after " + playedSoFar + " matches", true);
            Runtime.getRuntime().halt(0);
        }));
        try {
            return new Series<>(game, make, o, tls, log).playAll(handed);
        } finally {
            running = false;
        }
    }

    /** The matches one run() plays, one connection each, with back-off between failed attempts. */
    private static final class Series<V, A> {
        final Game<V, A> game;
        final Supplier<? extends Bot<V, A>> make;
        final Options o;
        final SSLContext tls;
        final Log log;
        final boolean keepTrying;
        final Backoff backoff;
        int played;

        Series(Game<V, A> game, Supplier<? extends Bot<V, A>> make, Options o, SSLContext tls, Log log) {
            this.game = game;
            this.make = make;
            this.o = o;
            this.tls = tls;
            this.log = log;
            this.keepTrying = o.ladder || o.matches > 1;
            this.backoff = new Backoff(o.backoffFirst, 60.0, new java.util.Random());
        }

        int playAll(Connection handed) {
            Bot<V, A> bot = make.get();  // a new bot per match; a match cut short keeps its bot
            while (o.ladder || played < o.matches) {
                String why, serverMessage = "";
                try {
                    try {
                        if (handed != null) {
                            // The first match on the connection the launcher made: it owns the seat.
                            try (Connection conn = handed) {
                                handed = null;
                                conn.send(hello(o.name, game.name(), null));
                                play(game, bot, conn, log);
                            }
                        } else {
                            playAt(bot, o.host, o.port, o.token, tls);
                        }
                    } catch (Redirected r) {
                        if (!follow(bot, r)) continue;
                    }
                    playedSoFar = ++played;
                    backoff.reset();
                    bot = make.get();
                    if (!o.ladder && played >= o.matches) break;
                    log.say("match " + played + (o.ladder ? "" : " of " + o.matches) + " played; connecting for the next", false);
                    continue;
                } catch (ClientException.Server e) {
                    if (!(keepTrying && comesBack(e.code))) {
                        return fail(log, e.getMessage() + fixFor(e.code) + (keepTrying ? "; not trying again: waiting cannot fix this" : ""), keepTrying, played);
                    }
                    why = e.getMessage();
                    serverMessage = e.serverMessage;
                } catch (ClientException.Tls e) {
                    return fail(log, e.getMessage(), keepTrying, played);
                } catch (ClientException.Protocol e) {
                    return fail(log, "the server sent something this kit cannot read (" + e.getMessage() + ")", keepTrying, played);
                } catch (ClientException | IOException e) {
                    if (!keepTrying) return fail(log, e.getMessage(), false, played);
                    why = e.getMessage();
                }
                if (!sleep(backoffWait(why, serverMessage))) return 0;
            }
            return 0;
        }

        /**
         * Connect, say hello, play one match. A connection lost mid-match takes its seat back (the same bot,
         * the same token) while the host keeps it, then counts as a lost connection.
         */
        void playAt(Bot<V, A> bot, String host, int port, String token, SSLContext context)
                throws ClientException, IOException, Redirected {
            String lost = null;
            for (int attempt = 0; ; attempt++) {
                try (Connection conn = new Connection(host, port, context)) {
                    conn.send(hello(o.name, game.name(), token));
                    play(game, bot, conn, log);
                    return;
                } catch (ClientException.Lost e) {
                    // Without a token the seat is no one's to take back (`cellarena serve` seats whoever comes).
                    if (token == null || attempt >= REJOIN_WAITS_MS.length) throw new ClientException.Closed(e.getMessage());
                    lost = e.getMessage();
                    log.say(lost + "; taking the seat back", true);
                    if (!sleep(REJOIN_WAITS_MS[attempt] / 1000.0)) throw new ClientException.Closed(lost);
                } catch (ClientException.Server e) {
                    if (lost != null) throw new ClientException.Closed(lost);  // the grace was over: the loss is the news
                    throw e;
                }
            }
        }

        /**
         * Play the match a ladder sent this bot to; whether it was played. A failure there is the match's,
         * not the bot's: with more matches to play the bot goes back to the ladder after a wait.
         */
        boolean follow(Bot<V, A> bot, Redirected target) throws ClientException, IOException {
            String where = "the match host " + target.host + ":" + target.port;
            if (!target.tls && tls != null && !isLoopback(target.host))
                return giveUp("the ladder sent this bot to " + target.host + ":" + target.port
                        + " without TLS, which would send its seat token in clear; not going (tell the ladder's host)");
            SSLContext context = target.tls ? (tls != null ? tls : tlsContext(null)) : null;
            log.say("playing this match at " + target.host + ":" + target.port, false);
            for (int attempt = 1; attempt <= FOLLOW_ATTEMPTS; attempt++) {
                try {
                    playAt(bot, target.host, target.port, target.token, context);
                    return true;
                } catch (Redirected e) {
                    return giveUp(where + " redirected this bot again; a match host must not");
                } catch (ClientException.Server e) {
                    return giveUp(where + " refused this bot: " + e.getMessage());
                } catch (ClientException.Tls e) {
                    return giveUp(where + ": " + e.getMessage());
                } catch (ClientException.Protocol e) {
                    throw e;
                } catch (ClientException e) {
                    if (attempt == FOLLOW_ATTEMPTS) return giveUp("lost " + where + " (" + e.getMessage() + ")");
                    log.say("lost " + where + " (" + e.getMessage() + "); connecting there again", true);
                    sleep(0.2 * attempt);
                }
            }
            return false;
        }

        boolean giveUp(String text) throws ClientException {
            if (!keepTrying) throw new ClientException.Closed(text);
            sleep(backoffWait(text, ""));
            return false;
        }

        double backoffWait(String why, String serverMessage) {
            double delay = backoff.next(serverMessage);
            log.say(why + String.format("; trying again in %.1f s", delay), true);
            return delay;
        }
    }

    static boolean isLoopback(String host) {
        return host.equals("localhost") || host.equals("::1") || host.startsWith("127.");
    }

    /** Whether the whole wait passed (not interrupted). */
    static boolean sleep(double seconds) {
        try {
            Thread.sleep((long) (seconds * 1000));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static int fail(Log log, String text, boolean keepTrying, int played) {
        log.say("error: " + text + (keepTrying ? " (after " + played + " matches)" : ""), true);
        return 1;
    }
}
