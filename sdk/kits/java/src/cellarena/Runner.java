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
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The bot loop: the command line and CELLARENA_* variables, the seat token a launcher hands over, TLS,
 * one match or many, ladder mode with back-off, and the retry rule of RETRY_LATER.
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
            + "         --tls (the system's trust store) | --tls-ca PATH (trust only this PEM CA file) -q";

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
        public String tlsCa;

        public static Options parse(String[] args, String defaultName) throws UsageException {
            Options o = new Options();
            o.name = defaultName;
            if (!env("CELLARENA_HOST").isEmpty()) o.host = env("CELLARENA_HOST");
            if (!env("CELLARENA_PORT").isEmpty()) o.port = port(env("CELLARENA_PORT"), "CELLARENA_PORT");
            if (!env("CELLARENA_NAME").isEmpty()) o.name = env("CELLARENA_NAME");
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
            if (tokenFile != null) {
                try {
                    o.token = new String(Files.readAllBytes(Path.of(tokenFile)), StandardCharsets.UTF_8).trim();
                } catch (IOException e) {
                    throw new UsageException("--token-file " + tokenFile + ": cannot read it (" + e.getMessage() + ")");
                }
                if (o.token.isEmpty()) throw new UsageException("--token-file " + tokenFile + ": the file is empty");
            } else if (tokenFlag != null && !tokenFlag.trim().isEmpty()) {
                o.token = tokenFlag.trim();
            } else {
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
    }

    static MessageBufferPacker hello(Options o, String game) throws IOException {
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(o.token == null ? 4 : 5);
        p.packString("type").packString("hello");
        p.packString("protocol").packInt(Frames.PROTOCOL);
        p.packString("name").packString(o.name);
        p.packString("game").packString(game);
        if (o.token != null) p.packString("token").packString(o.token);
        return p;
    }

    static <V, A> MessageBufferPacker moves(Game<V, A> game, long tick, A answer) throws IOException {
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(3);
        p.packString("type").packString("moves");
        p.packString("tick").packLong(tick);
        p.packString("moves");
        game.pack(p, answer);
        return p;
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
    static <V, A> End play(Game<V, A> game, Bot<V, A> bot, Connection conn, Log log) throws ClientException, IOException {
        Welcome welcome = null;
        while (true) {
            Message m = conn.recv();
            switch (m.type) {
                case "welcome":
                    welcome = new Welcome(m);
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
                    try {
                        answer = bot.onTick(view);
                    } catch (RuntimeException e) {
                        log.say("onTick failed at tick " + m.getLong("tick") + " (" + e + "); answering a no-op", true);
                        answer = game.noop(view);
                    }
                    conn.send(moves(game, m.getLong("tick"), answer));
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
            default: return "";
        }
    }

    /**
     * Play as the command line says: one match, --matches N, or --ladder; {@code make} gives a new bot
     * for each match. Returns the exit status: 0 when played, 1 (one line on stderr) when it cannot go
     * on, 64 for a bad command line.
     */
    public static <V, A> int run(Game<V, A> game, String[] args, String defaultName, Supplier<? extends Bot<V, A>> make) {
        Options o;
        SSLContext tls = null;
        try {
            o = Options.parse(args, defaultName);
            if (o.tls) tls = tlsContext(o.tlsCa);
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
        boolean keepTrying = o.ladder || o.matches > 1;
        Backoff backoff = new Backoff();
        int played = 0;
        while (o.ladder || played < o.matches) {
            String why, serverMessage = "";
            try (Connection conn = new Connection(o.host, o.port, tls)) {
                conn.send(hello(o, game.name()));
                play(game, make.get(), conn, log);
                played++;
                backoff.reset();
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
            double delay = backoff.next(serverMessage);
            log.say(why + String.format("; trying again in %.1f s", delay), true);
            try {
                Thread.sleep((long) (delay * 1000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return 0;
            }
        }
        return 0;
    }

    private static int fail(Log log, String text, boolean keepTrying, int played) {
        log.say("error: " + text + (keepTrying ? " (after " + played + " matches)" : ""), true);
        return 1;
    }
}
