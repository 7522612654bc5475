package cellarena;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** The kit's unit tests, a plain main (no JUnit download): framing, the views, the retry rule, the back-off, options. */
public final class KitTest {
    private static int checks, failures;

    private static void check(boolean ok, String what) {
        checks++;
        if (!ok) {
            failures++;
            System.err.println("failed: " + what);
        }
    }

    private static Message one(MessageBufferPacker p) throws Exception {
        byte[] f = Frames.frame(p);
        List<Message> got = new Frames.Reader().feed(f, f.length);
        return got.get(0);
    }

    private static String raises(ThrowingRunnable r) {
        try {
            r.run();
        } catch (Exception e) {
            return String.valueOf(e.getMessage());
        }
        return "";
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    private static Welcome welcome() throws Exception {
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(10);
        p.packString("type").packString("welcome");
        p.packString("protocol").packInt(1);
        p.packString("seat").packInt(1);
        p.packString("game").packString("rezzo");
        p.packString("match").packInt(3);
        p.packString("players").packInt(2);
        p.packString("names").packArrayHeader(2).packString("a").packString("b");
        p.packString("tick_rate").packDouble(15.0);
        p.packString("budget_ms").packInt(63);
        p.packString("config").packMapHeader(1).packString("view_size").packInt(13);
        return new Welcome(one(p));
    }

    static void framesSplitAnywhere() throws Exception {
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(1).packString("type").packString("end");
        byte[] f = Frames.frame(p);
        byte[] two = new byte[f.length * 2];
        System.arraycopy(f, 0, two, 0, f.length);
        System.arraycopy(f, 0, two, f.length, f.length);
        Frames.Reader r = new Frames.Reader();
        int got = 0;
        for (byte b : two) got += r.feed(new byte[] {b}, 1).size();
        check(got == 2, "two frames fed a byte at a time");
        check(raises(() -> new Frames.Reader().feed(new byte[] {0x16, 0x03, 0x01, 0x02}, 4)).contains("over the limit"), "a TLS record");
        MessageBufferPacker arr = MessagePack.newDefaultBufferPacker();
        arr.packArrayHeader(1).packInt(1);
        byte[] af = Frames.frame(arr);
        check(raises(() -> new Frames.Reader().feed(af, af.length)).contains("not a map"), "not a map");
        MessageBufferPacker huge = MessagePack.newDefaultBufferPacker();
        huge.packString("x".repeat(70_000));
        check(raises(() -> Frames.frame(huge)).contains("65536"), "a client frame over the limit");
    }

    static void rezzoView() throws Exception {
        Welcome w = welcome();
        check(w.seat == 1 && w.match == 3 && w.names.equals(Arrays.asList("a", "b")) && w.tickRate == 15.0, "welcome");
        byte[] cells = new byte[2 * 169];
        cells[169 + 11 * 13 + 6] = (byte) Rezzo.FLAG;
        cells[169 + 12] = (byte) (Rezzo.BASE + 2);
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(6);
        p.packString("type").packString("tick");
        p.packString("tick").packInt(41);
        p.packString("budget_ms").packInt(63);
        p.packString("agents").packArrayHeader(2).packInt(0).packInt(3);
        p.packString("cells").packBinaryHeader(cells.length).writePayload(cells);
        p.packString("damage").packBinaryHeader(cells.length).writePayload(new byte[cells.length]);
        Rezzo.View v = Rezzo.GAME.view(one(p), w);
        check(v.tick == 41 && v.agents.length == 2 && v.agents[1] == 3, "agents");
        check(v.ahead(1) == Rezzo.FLAG && v.ahead(0) == Rezzo.BLANK, "ahead");
        check(Rezzo.kind(v.at(1, 12, 6)) == Rezzo.BASE && Rezzo.owner(v.at(1, 12, 6)) == 2, "a base of seat 2");
        Message moves = one(Runner.moves(Rezzo.GAME, 41, new int[] {1, 5}));
        check(moves.getLong("tick") == 41 && Arrays.equals(moves.getLongs("moves"), new long[] {1, 5}), "moves");
    }

    static void cataView() throws Exception {
        byte[] board = new byte[512];
        board[0] = (byte) 0x80;
        MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
        p.packMapHeader(16);
        p.packString("type").packString("tick");
        p.packString("tick").packInt(5);
        p.packString("budget_ms").packInt(1000);
        p.packString("seat").packInt(0);
        p.packString("size").packInt(64);
        p.packString("board").packBinaryHeader(512).writePayload(board);
        p.packString("rule").packArrayHeader(32);
        for (int i = 0; i < 32; i++) p.packInt(i >= 16 ? 1 : 0);
        p.packString("health").packArrayHeader(2).packInt(100).packInt(200);
        p.packString("cells_per_hp").packInt(1024);
        p.packString("turn").packInt(2);
        p.packString("move").packInt(1);
        p.packString("moves_left").packInt(2);
        p.packString("blocked").packBoolean(false);
        p.packString("meditated").packBoolean(false);
        p.packString("opponent_meditated").packBoolean(false);
        p.packString("refused").packMapHeader(3);
        p.packString("tick").packInt(3).packString("move").packArrayHeader(2).packInt(1).packInt(2);
        p.packString("reason").packString("own half");
        Cata.View v = Cata.GAME.view(one(p), welcome());
        check(v.white(0, 0) && !v.white(0, 1) && !v.white(63, 63), "board bits");
        check(v.refused != null && v.refused.move.equals(new Cata.Move(1, 2)) && v.refused.reason.equals("own half"), "refused");
        List<Cata.Move> legal = v.legalMoves();
        check(legal.size() == 18 && legal.get(0).equals(new Cata.Move(Cata.STRIKE, 16)), "strikes first");
        check(legal.get(16).equals(new Cata.Move(Cata.MEDITATE, 0)) && legal.get(17).equals(new Cata.Move(Cata.PASS, 0)), "meditate, pass");
        Message moves = one(Runner.moves(Cata.GAME, 5, new Cata.Move(1, 18)));
        check(Arrays.equals(moves.getLongs("moves"), new long[] {1, 18}), "a cata answer");
        Plain plain = new Plain("drop2df");
        Message any = one(Runner.moves(plain, 0, ValueFactory.newArray(ValueFactory.newInteger(4))));
        check(Arrays.equals(any.getLongs("moves"), new long[] {4}) && plain.name().equals("drop2df"), "a plain answer");
    }

    static void retryRuleAndBackoff() {
        for (String code : new String[] {"shutdown", "busy", "queue_full", "too_many_connections", "locked_out"})
            check(Runner.comesBack(code), code + " comes back");
        for (String code : new String[] {"bad_hello", "tls_required", "bad_version", "internal", "seat_taken"})
            check(!Runner.comesBack(code), code + " stops");
        Backoff b = new Backoff(1.0, 60.0, new Random(7));
        double w1 = b.next(""), w2 = b.next(""), w3 = b.next("");
        check(w1 >= 0.5 && w1 <= 1 && w2 >= 1 && w2 <= 2 && w3 >= 2 && w3 <= 4, "doubling waits");
        for (int i = 0; i < 20; i++) check(b.next("") <= 60, "the cap");
        check(b.next("too many wrong tokens; refused for another 90 s") >= 90, "the lock-out's time");
        b.reset();
        double again = b.next("");
        check(again >= 0.5 && again <= 1, "reset");
    }

    static void optionsAndHello() throws Exception {
        check(raises(() -> Runner.Options.parse(new String[] {"--port", "99999"}, "b")).contains("1-65535"), "port range");
        check(raises(() -> Runner.Options.parse(new String[] {"--ladder", "--matches", "2"}, "b")).contains("give one of them"), "ladder or matches");
        Path file = Files.createTempFile("token", ".txt");
        Files.writeString(file, "0123456789abcdef\n");
        Runner.Options o = Runner.Options.parse(new String[] {"--name", "x", "--matches", "3", "--token-file", file.toString()}, "b");
        Files.delete(file);
        check(o.name.equals("x") && o.matches == 3 && !o.ladder && o.token.equals("0123456789abcdef"), "options");
        Message hello = one(Runner.hello(o.name, "rezzo", o.token));
        check(hello.getLong("protocol") == 1 && hello.getString("token").equals("0123456789abcdef") && hello.getString("game").equals("rezzo"), "hello");
        check(hello.getStrings("accepts").equals(java.util.List.of("redirect")), "hello accepts redirect");
        check(raises(() -> Runner.tlsContext("/nonexistent/ca.pem")).contains("/nonexistent/ca.pem"), "a CA file that is not there");
        // CELLARENA_BACKOFF_FIRST_S, the back-off's first round shortened for tests (Java cannot set a variable).
        check(Runner.Options.backoffFirst("0.05") == 0.05, "a first back-off of 50 ms");
        check(raises(() -> Runner.Options.backoffFirst("0")).contains("CELLARENA_BACKOFF_FIRST_S must be seconds"), "a first back-off of 0 s");
    }

    static void debugDrawing() throws Exception {
        Debug d = new Debug();
        check(!one(Runner.moves(Rezzo.GAME, 3, new int[] {0}, d)).fields.containsKey(ValueFactory.newString("debug")), "nothing drawn, no debug");
        d.mark(new int[] {11, 6}, "Red", "ahead", 7);
        d.mark(new int[] {1, 2}, "#ABCDEF", "a label longer than sixteen");
        d.mark(new int[] {1, 2}, "no-such-colour");  // dropped: no colour
        d.mark(new int[] {1, 2, 3}, "red");  // dropped: no cell
        d.mark(new int[] {1, 2}, "red", "bad\nlabel");  // dropped: not printable
        d.mark(new int[] {1, 2}, "red", "\u00e9t\u00e9");
        d.line(new int[] {12, 6}, new int[] {0, 6}, "#00ff00");
        d.line(new int[] {0, 0}, new int[] {1, 1}, "blue", 2);
        d.log("first\nsecond\u0001");
        check(d.dropped == 3 && d.firstProblem.startsWith("mark([1, 2], \"no-such-colour\")"), "dropped and counted: " + d.firstProblem);
        Message m = one(Runner.moves(Rezzo.GAME, 41, new int[] {1}, d));
        String expected = "{\"marks\":[{\"cell\":[11,6],\"colour\":\"#e6194b\",\"label\":\"ahead\",\"agent\":7},"
                + "{\"cell\":[1,2],\"colour\":\"#abcdef\",\"label\":\"a label longer t\"},"
                + "{\"cell\":[1,2],\"colour\":\"#e6194b\",\"label\":\"\u00e9t\u00e9\"}],"
                + "\"lines\":[{\"from\":[12,6],\"to\":[0,6],\"colour\":\"#00ff00\"},"
                + "{\"from\":[0,0],\"to\":[1,1],\"colour\":\"#4363d8\",\"agent\":2}],"
                + "\"text\":[\"first\",\"second \"]}";
        check(m.get("debug").toJson().equals(expected), "the debug map: " + m.get("debug").toJson());
        check(Arrays.equals(m.getLongs("moves"), new long[] {1}), "the move with it");
        // The caps: 256 marks, 64 lines, 1 KiB of text a tick; a new tick starts clean.
        d.clear();
        for (int i = 0; i < 266; i++) d.mark(new int[] {i, i}, "red");
        for (int i = 0; i < 69; i++) d.line(new int[] {0, 0}, new int[] {1, 1}, "red");
        d.log("z".repeat(1000));
        d.log("z".repeat(100));  // past 1 KiB in all
        d.log("last");
        check(d.dropped == 3 + 10 + 5 + 1, "past the caps: " + d.dropped);
        Value capped = one(Runner.moves(Rezzo.GAME, 42, new int[] {1}, d)).get("debug");
        Map<Value, Value> drawn = capped.asMapValue().map();
        check(drawn.get(ValueFactory.newString("marks")).asArrayValue().size() == Debug.MAX_MARKS, "256 marks");
        check(drawn.get(ValueFactory.newString("lines")).asArrayValue().size() == Debug.MAX_LINES, "64 lines");
        check(drawn.get(ValueFactory.newString("text")).toJson().equals("[\"" + "z".repeat(1000) + "\",\"last\"]"), "1 KiB of text");
        d.clear();
        check(d.isEmpty(), "a new tick starts clean");
    }

    static void aDrawingThatWouldPassTheFrameLimitGoesAndTheMoveStays() throws Exception {
        Debug d = new Debug();
        String worst = "\ud83d\ude00".repeat(16);  // 4 bytes a character in UTF-8
        for (int i = 0; i < 300; i++) d.mark(new int[] {Integer.MIN_VALUE, Integer.MAX_VALUE}, "red", worst, Integer.MIN_VALUE);
        for (int i = 0; i < 100; i++) d.line(new int[] {0, 0}, new int[] {1, 1}, "red", Integer.MIN_VALUE);
        List<String> said = new java.util.ArrayList<>();
        boolean[] once = {false};
        // At the caps a drawing fits; a huge answer (a plain game may answer anything) leaves no room.
        Message fits = one(Runner.answer(Rezzo.GAME, 1, new int[] {1}, d, once, said::add));
        d.mark(new int[] {0, 0}, "red");
        Plain plain = new Plain("drop2df");
        Value huge = ValueFactory.newString("x".repeat(65500));
        Message sent = one(Runner.answer(plain, 2, huge, d, once, said::add));
        check(fits.get("debug") != null && sent.get("debug") == null && sent.getString("moves").length() == 65500, "the drawing went, the move stayed");
        check(d.dropped == (300 - 256) + (100 - 64) + 1, "the drawing that went counts: " + d.dropped);
        check(said.size() == 1 && said.get(0).startsWith("debug drawing dropped: more than 256 marks in one tick (only the first"), "said once: " + said);
    }

    public static void main(String[] args) throws Exception {
        framesSplitAnywhere();
        rezzoView();
        cataView();
        retryRuleAndBackoff();
        optionsAndHello();
        debugDrawing();
        aDrawingThatWouldPassTheFrameLimitGoesAndTheMoveStays();
        System.out.println((checks - failures) + " of " + checks + " checks passed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
