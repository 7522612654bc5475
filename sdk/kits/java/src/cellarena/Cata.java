package cellarena;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.msgpack.core.MessagePacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** C.A.T.A.: the board, the 32-entry rule, both healths; one move {code, index} per tick (docs/games/cata.md). */
public final class Cata implements Game<Cata.View, Cata.Move> {
    public static final Cata GAME = new Cata();
    public static final int PASS = 0, STRIKE = 1, BLOCK = 2, MEDITATE = 3;

    /** One move: code, and the rule entry 0-31 (0 for pass and meditate). */
    public static final class Move {
        public final int code, index;

        public Move(int code, int index) {
            this.code = code;
            this.index = index;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Move && ((Move) o).code == code && ((Move) o).index == index;
        }

        @Override
        public int hashCode() {
            return code * 32 + index;
        }

        @Override
        public String toString() {
            return "[" + code + ", " + index + "]";
        }
    }

    /** Your previous move, when it was illegal. */
    public static final class Refused {
        public final long tick;
        public final Move move;
        public final String reason;

        Refused(long tick, Move move, String reason) {
            this.tick = tick;
            this.move = move;
            this.reason = reason;
        }
    }

    /** A tick. Seat 0 is black, 1 white; board is packed bits, a set bit is white. */
    public static final class View {
        public long tick;
        public int budgetMs, seat, size, turn, move, movesLeft;
        public byte[] board;
        public int[] rule = new int[32];
        public long[] health;
        public long cellsPerHp;
        public boolean blocked, meditated, opponentMeditated;
        /** Null unless your previous move was illegal. */
        public Refused refused;
        /** The whole tick: last_reaction and any later field, as msgpack data. */
        public Message raw;

        /** Whether cell (row, col) is white: cell k = row * size + col is bit 7 - k % 8 of byte k / 8. */
        public boolean white(int row, int col) {
            int k = row * size + col;
            return ((board[k / 8] >> (7 - k % 8)) & 1) == 1;
        }

        /** Every legal move now, strikes first (docs/protocol.md lists what is legal). */
        public List<Move> legalMoves() {
            int other = 1 - seat;
            List<Move> strikes = new ArrayList<>(), rest = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                boolean mine = (i >> 4) == seat;
                if (!mine && rule[i] == other) strikes.add(new Move(STRIKE, i));
                if (mine && turn > 1 && !blocked && rule[i] == other) rest.add(new Move(BLOCK, i));
            }
            if (turn > 1) {
                if (!meditated && health[seat] < health[other]) rest.add(new Move(MEDITATE, 0));
                rest.add(new Move(PASS, 0));
            }
            strikes.addAll(rest);
            return strikes;
        }
    }

    @Override
    public String name() {
        return "cata";
    }

    @Override
    public View view(Message m, Welcome w) throws ClientException.Protocol {
        View v = new View();
        v.raw = m;
        v.tick = m.getLong("tick");
        v.budgetMs = m.getInt("budget_ms");
        v.seat = m.getInt("seat");
        v.size = m.getInt("size");
        v.board = m.getBytes("board");
        long[] rule = m.getLongs("rule");
        v.health = m.getLongs("health");
        if (rule.length != 32 || v.health.length != 2 || v.seat < 0 || v.seat > 1 || (long) v.board.length * 8 < (long) v.size * v.size)
            throw new ClientException.Protocol("tick: the board, rule, health or seat has the wrong size");
        for (int i = 0; i < 32; i++) v.rule[i] = (int) rule[i];
        v.cellsPerHp = m.getLong("cells_per_hp");
        v.turn = m.getInt("turn");
        v.move = m.getInt("move");
        v.movesLeft = m.getInt("moves_left");
        v.blocked = m.getBool("blocked");
        v.meditated = m.getBool("meditated");
        v.opponentMeditated = m.getBool("opponent_meditated");
        Value r = m.get("refused");
        if (r != null && r.isMapValue()) {
            Message refused = new Message(r.asMapValue().map());
            long[] mv = refused.getLongs("move");
            v.refused = new Refused(refused.getLong("tick"), mv.length == 2 ? new Move((int) mv[0], (int) mv[1]) : new Move(PASS, 0),
                    refused.getString("reason", ""));
        }
        return v;
    }

    @Override
    public Move noop(View v) {
        return new Move(PASS, 0);
    }

    @Override
    public void pack(MessagePacker p, Move move) throws IOException {
        p.packArrayHeader(2);
        p.packInt(move.code);
        p.packInt(move.index);
    }

}
