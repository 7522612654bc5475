package cellarena;

import java.io.IOException;
import org.msgpack.core.MessagePacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** Rezzo: one 13x13 viewport per live agent; one move per agent (docs/games/rezzo.md). */
public final class Rezzo implements Game<Rezzo.View, int[]> {
    public static final Rezzo GAME = new Rezzo();

    // Move codes.
    public static final int NOOP = 0, ADVANCE = 1, LEFT = 2, RIGHT = 3, BUILD = 4, HIT = 5;
    // Cell codes: unowned 0-4, OOB 7; owned codes are kind + owner (owner 0 is always you).
    public static final int BLANK = 0, WIRE = 1, ELECTRON = 2, TAIL = 3, PHOTON = 4, OOB = 7;
    public static final int AGENT = 8, FLAG = 16, GEYSER = 24, BASE = 32;

    public static int kind(int code) {
        return code >= 8 ? code & 0xF8 : code;
    }

    /** The owner of an owned cell (0 is you), or -1. */
    public static int owner(int code) {
        return code >= 8 ? code & 7 : -1;
    }

    /** The viewport side the welcome's config names (13 unless it says otherwise). */
    public static int viewSize(Welcome w) {
        if (w.config == null || !w.config.isMapValue()) return 13;
        Value v = w.config.asMapValue().map().get(ValueFactory.newString("view_size"));
        return v != null && v.isIntegerValue() ? v.asIntegerValue().toInt() : 13;
    }

    /** A tick: your live agents and one viewport each, row 0 farthest ahead, the agent at row 12, column 6. */
    public static final class View {
        public final long tick;
        public final int budgetMs;
        public final int viewSize;
        public final long[] agents;
        /** Unsigned bytes: read them with {@link #cell}. */
        public final byte[] cells, damage;

        public View(long tick, int budgetMs, int viewSize, long[] agents, byte[] cells, byte[] damage) {
            this.tick = tick;
            this.budgetMs = budgetMs;
            this.viewSize = viewSize;
            this.agents = agents;
            this.cells = cells;
            this.damage = damage;
        }

        /** Agent i's (the i-th of agents) viewport cell at row r, column c. */
        public int cell(int i, int r, int c) {
            return cells[i * viewSize * viewSize + r * viewSize + c] & 0xFF;
        }

        public int damageAt(int i, int r, int c) {
            return damage[i * viewSize * viewSize + r * viewSize + c] & 0xFF;
        }

        /** Relative to the agent: forward 0..12 ahead, right -6..6 (negative is left). */
        public int at(int i, int forward, int right) {
            return cell(i, viewSize - 1 - forward, viewSize / 2 + right);
        }

        public int ahead(int i) {
            return at(i, 1, 0);
        }
    }

    @Override
    public String name() {
        return "rezzo";
    }

    @Override
    public View view(Message m, Welcome w) throws ClientException.Protocol {
        int size = viewSize(w);
        View v = new View(m.getLong("tick"), m.getInt("budget_ms"), size, m.getLongs("agents"), m.getBytes("cells"), m.getBytes("damage"));
        if (v.cells.length != v.agents.length * size * size || v.damage.length != v.cells.length)
            throw new ClientException.Protocol("tick: cells/damage do not hold one viewport per agent");
        return v;
    }

    @Override
    public int[] noop(View v) {
        return new int[v.agents.length];
    }

    @Override
    public void pack(MessagePacker p, int[] moves) throws IOException {
        p.packArrayHeader(moves.length);
        for (int m : moves) p.packInt(m);
    }
}
