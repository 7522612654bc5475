package cellarena;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.msgpack.core.MessagePacker;

/**
 * What a bot draws for its own eyes each tick ({@code debug.mark}, {@code debug.line}, {@code debug.log}
 * in onTick), sent as the optional {@code debug} map of that tick's answer (docs/protocol.md, "Debug
 * drawing"), kept in the replay and drawn by the web player. It mirrors the Python SDK's DebugLayer
 * (cellarena/sdk/debug.py), caps included.
 *
 * <p>Forgiving on purpose: drawing is for debugging, so a bad call (a cell that is not two ints, a colour
 * that is no colour, a label that is not printable text) or one past the caps is dropped and counted,
 * never thrown, and never costs the move.
 *
 * <p>A cell is a board cell {@code {x, y}}, or in Rezzo {@code {row, col}} of an agent's viewport (the
 * agent at {12, 6}); there {@code agent} names whose viewport (default: the tick's first agent).
 */
public final class Debug {
    /** Marks kept of one answer (the server's cap: more would be dropped there). */
    public static final int MAX_MARKS = 256;
    /** Lines kept of one answer. */
    public static final int MAX_LINES = 64;
    /** Bytes of text (UTF-8, all lines together) kept of one answer. */
    public static final int MAX_TEXT_BYTES = 1024;
    /** Characters of a mark's label; a longer label is cut to this. */
    public static final int MAX_LABEL = 16;
    /** Colour names taken besides {@code #rrggbb} (the Python SDK's). */
    public static final Map<String, String> COLOURS = Map.ofEntries(
            Map.entry("red", "#e6194b"), Map.entry("green", "#3cb44b"), Map.entry("blue", "#4363d8"),
            Map.entry("yellow", "#ffe119"), Map.entry("orange", "#f58231"), Map.entry("purple", "#911eb4"),
            Map.entry("cyan", "#42d4f4"), Map.entry("magenta", "#f032e6"), Map.entry("white", "#ffffff"),
            Map.entry("black", "#000000"), Map.entry("grey", "#a9a9a9"));

    private record Mark(int[] cell, String colour, String label, Long agent) {}

    private record Line(int[] from, int[] to, String colour, Long agent) {}

    private final List<Mark> marks = new ArrayList<>();
    private final List<Line> lines = new ArrayList<>();
    private final List<String> text = new ArrayList<>();
    private int textRoom = MAX_TEXT_BYTES;
    /** Calls dropped over the match (malformed, or past a cap); the loop reports the first once. */
    public int dropped;
    /** What was wrong with the first dropped call, or null. */
    public String firstProblem;

    private void drop(String why) {
        dropped++;
        if (firstProblem == null) firstProblem = why;
    }

    private static String colourOf(String value) {
        if (value == null) return null;
        String lower = value.toLowerCase(Locale.ROOT);
        if (lower.matches("#[0-9a-f]{6}")) return lower;
        return COLOURS.get(lower);
    }

    private static boolean isCell(int[] cell) {
        return cell != null && cell.length == 2;
    }

    private static String show(Object value, int chars) {
        String s = value instanceof int[] a ? Arrays.toString(a) : String.valueOf(value);
        return s.length() > chars ? s.substring(0, chars) : s;
    }

    /** Control characters (C0, DEL, C1) are not printable, as for the Python SDK's bots. */
    private static boolean printable(String s) {
        return s.codePoints().noneMatch(Character::isISOControl);
    }

    /** Mark {@code cell} in {@code colour} ({@code #rrggbb} or a name of COLOURS). */
    public void mark(int[] cell, String colour) {
        add(cell, colour, null, null);
    }

    /** A mark with a label of up to 16 characters (cut beyond). */
    public void mark(int[] cell, String colour, String label) {
        add(cell, colour, label, null);
    }

    /** A mark in the viewport of Rezzo's agent {@code agent} (its number, as in {@code view.agents}). */
    public void mark(int[] cell, String colour, String label, long agent) {
        add(cell, colour, label, agent);
    }

    private void add(int[] cell, String colour, String label, Long agent) {
        if (marks.size() >= MAX_MARKS) {
            drop("more than " + MAX_MARKS + " marks in one tick");
            return;
        }
        String col = colourOf(colour);
        if (!isCell(cell) || col == null) {
            drop("mark(" + show(cell, 40) + ", \"" + show(colour, 20) + "\"): a cell is two ints, a colour #rrggbb or a name");
            return;
        }
        if (label != null && !printable(label)) {
            drop("mark label \"" + show(label, 40) + "\": a label is printable text");
            return;
        }
        String kept = null;
        if (label != null && !label.isEmpty()) {
            kept = label.codePointCount(0, label.length()) > MAX_LABEL ? label.substring(0, label.offsetByCodePoints(0, MAX_LABEL)) : label;
        }
        marks.add(new Mark(cell.clone(), col, kept, agent));
    }

    /** A line from cell {@code a} to cell {@code b} in {@code colour}. */
    public void line(int[] a, int[] b, String colour) {
        add(a, b, colour, null);
    }

    /** A line in the viewport of Rezzo's agent {@code agent}. */
    public void line(int[] a, int[] b, String colour, long agent) {
        add(a, b, colour, agent);
    }

    private void add(int[] a, int[] b, String colour, Long agent) {
        if (lines.size() >= MAX_LINES) {
            drop("more than " + MAX_LINES + " lines in one tick");
            return;
        }
        String col = colourOf(colour);
        if (!isCell(a) || !isCell(b) || col == null) {
            drop("line(" + show(a, 30) + ", " + show(b, 30) + ", \"" + show(colour, 20) + "\"): cells are two ints, a colour #rrggbb");
            return;
        }
        lines.add(new Line(a.clone(), b.clone(), col, agent));
    }

    /** One or more text lines (split at newlines) for this tick's panel; 1 KiB a tick in all. Characters
     * that are not printable become spaces. */
    public void log(Object text) {
        String all = String.valueOf(text);
        // As Python's splitlines: no empty last line after a final newline, one empty line for "".
        List<String> pieces = new ArrayList<>(Arrays.asList(all.split("\r\n|\r|\n", -1)));
        if (pieces.size() > 1 && pieces.get(pieces.size() - 1).isEmpty()) pieces.remove(pieces.size() - 1);
        for (String raw : pieces) {
            StringBuilder piece = new StringBuilder();
            raw.codePoints().forEach(c -> piece.appendCodePoint(Character.isISOControl(c) ? ' ' : c));
            int size = piece.toString().getBytes(StandardCharsets.UTF_8).length;
            if (size > textRoom) {
                drop("more than " + MAX_TEXT_BYTES + " bytes of text in one tick");
                continue;
            }
            textRoom -= size;
            this.text.add(piece.toString());
        }
    }

    /** Whether anything was drawn this tick. */
    public boolean isEmpty() {
        return marks.isEmpty() && lines.isEmpty() && text.isEmpty();
    }

    /** Forget this tick's drawing (the loop does it before each onTick). */
    public void clear() {
        marks.clear();
        lines.clear();
        text.clear();
        textRoom = MAX_TEXT_BYTES;
    }

    private static void packCell(MessagePacker p, int[] cell) throws IOException {
        p.packArrayHeader(2).packInt(cell[0]).packInt(cell[1]);
    }

    /** This tick's {@code debug} map, packed as the value of an answer's "debug" key. */
    public void pack(MessagePacker p) throws IOException {
        p.packMapHeader((marks.isEmpty() ? 0 : 1) + (lines.isEmpty() ? 0 : 1) + (text.isEmpty() ? 0 : 1));
        if (!marks.isEmpty()) {
            p.packString("marks").packArrayHeader(marks.size());
            for (Mark m : marks) {
                p.packMapHeader(2 + (m.label == null ? 0 : 1) + (m.agent == null ? 0 : 1));
                p.packString("cell");
                packCell(p, m.cell);
                p.packString("colour").packString(m.colour);
                if (m.label != null) p.packString("label").packString(m.label);
                if (m.agent != null) p.packString("agent").packLong(m.agent);
            }
        }
        if (!lines.isEmpty()) {
            p.packString("lines").packArrayHeader(lines.size());
            for (Line l : lines) {
                p.packMapHeader(3 + (l.agent == null ? 0 : 1));
                p.packString("from");
                packCell(p, l.from);
                p.packString("to");
                packCell(p, l.to);
                p.packString("colour").packString(l.colour);
                if (l.agent != null) p.packString("agent").packLong(l.agent);
            }
        }
        if (!text.isEmpty()) {
            p.packString("text").packArrayHeader(text.size());
            for (String t : text) p.packString(t);
        }
    }
}
